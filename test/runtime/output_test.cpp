// Console output once per job: Accelerator::print on the main process only, errors from every
// process still visible.
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <string>

namespace {

size_t count(const std::string &text, const std::string &needle) {
  size_t found = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++found;
  }
  return found;
}

const std::string &output_of(const std::vector<accel_test::WorkerResult> &results, int rank) {
  for (const auto &result : results) {
    if (result.exit.rank == rank) {
      return result.output;
    }
  }
  throw std::runtime_error("no result for rank " + std::to_string(rank));
}

TEST(Output, PrintWritesOnceOnTheMainProcessAndErrorsStayVisible) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    // A collective among the operands runs on every process, as it must.
    accelerator.print() << "samples seen " << accelerator.reduce(24) << '\n';
    auto &stream = accelerator.print() << "stream stays good " << 1.5 << std::endl;
    EXPECT_TRUE(stream.good()) << "on rank " << peer.rank;
    accelerator.print("loss ", 0.25, " after ", 3, " steps");
    accelerator.print(4242);
    // The C way: the value printf returns says whether this process printed.
    const int written = accelerator.printf("printf %d of %s\n", accelerator.reduce(3), "two");
    EXPECT_EQ(written, peer.rank == 0 ? 16 : 0);
    std::fflush(stdout);
    std::cerr << "error from rank " << peer.rank << std::endl;
  });
  ASSERT_TRUE(accel_test::all_succeeded(results));
  const auto &main = output_of(results, 0);
  const auto &other = output_of(results, 1);
  EXPECT_EQ(count(main, "samples seen 48\n"), 1u) << main;
  EXPECT_EQ(count(main, "stream stays good 1.5\n"), 1u) << main;
  EXPECT_EQ(count(main, "loss 0.25 after 3 steps\n"), 1u) << main;
  EXPECT_EQ(count(main, "4242\n"), 1u) << main;
  EXPECT_EQ(count(main, "printf 6 of two\n"), 1u) << main;
  for (const char *printed :
       {"samples seen", "stream stays good", "loss 0.25", "4242\n", "printf"}) {
    EXPECT_EQ(count(other, printed), 0u) << other;
  }
  EXPECT_EQ(count(main, "error from rank 0"), 1u) << main;
  EXPECT_EQ(count(other, "error from rank 1"), 1u) << other;
}

TEST(Output, OneProcessPrintsToStdout) {
  accelerate::Accelerator accelerator;
  ::testing::internal::CaptureStdout();
  accelerator.print() << "epoch " << 1 << '\n';
  accelerator.print("done");
  std::cout << std::flush;
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "epoch 1\ndone\n");
}

} // namespace
