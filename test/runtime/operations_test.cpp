// Collectives across real processes: the values, and failing loudly instead of hanging.
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <type_traits>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

TEST(Operations, GatherReduceBroadcastPad) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    const float r = static_cast<float>(peer.rank);
    EXPECT_TRUE(torch::equal(accelerator.gather(torch::tensor({r, r})),
                             torch::tensor({0.f, 0.f, 1.f, 1.f})));
    EXPECT_TRUE(torch::equal(accelerator.gather(torch::tensor(r)), torch::tensor({0.f, 1.f})));
    EXPECT_TRUE(
        torch::equal(accelerator.reduce(torch::tensor({r + 1, 10.f})), torch::tensor({3.f, 20.f})));
    EXPECT_TRUE(torch::equal(accelerator.reduce(torch::tensor({r + 1, 10.f}), "mean"),
                             torch::tensor({1.5f, 10.f})));
    EXPECT_TRUE(torch::equal(accelerator.reduce(torch::tensor({r}), "max"), torch::tensor({1.f})));
    EXPECT_TRUE(
        torch::equal(accelerator.broadcast(torch::full({2, 2}, r), 1), torch::full({2, 2}, 1.f)));
    // Rank 0 has 2 rows, rank 1 has 3: both are padded to 3 and can then be gathered.
    auto mine = torch::full({peer.rank + 2, 2}, r + 1);
    auto padded = accelerator.pad_across_processes(mine, 0, -1);
    EXPECT_EQ(padded.size(0), 3);
    auto gathered = accelerator.gather(padded);
    auto expected =
        torch::tensor({{1.f, 1.f}, {1.f, 1.f}, {-1.f, -1.f}, {2.f, 2.f}, {2.f, 2.f}, {2.f, 2.f}});
    EXPECT_TRUE(torch::equal(gathered, expected)) << gathered;
    auto first = accelerator.pad_across_processes(mine, 0, -1, /*pad_first=*/true);
    EXPECT_EQ(first[0][0].item<float>(), peer.rank == 0 ? -1.f : 2.f);
    accelerator.wait_for_everyone();
    {
      auto guard = accelerator.main_process_first();
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Numbers a training loop keeps (running loss, correct counts, samples seen), combined across
// processes in the type they have.
TEST(Operations, ReduceOfNumbersSumsAndAveragesInTheirOwnType) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    const int r = peer.rank;
    const int sum_int = accelerator.reduce(r + 1);
    EXPECT_EQ(sum_int, 3);
    EXPECT_EQ(accelerator.reduce(10 * r + 1, "mean"), 6); // (1 + 11) / 2
    const size_t seen = accelerator.reduce(static_cast<size_t>(30000));
    EXPECT_EQ(seen, 60000u);
    // Exactly, beyond what a double holds: 2^53 + 1 and 2.
    const int64_t large = accelerator.reduce(r == 0 ? (int64_t{1} << 53) + 1 : int64_t{2});
    EXPECT_EQ(large, (int64_t{1} << 53) + 3);
    const float loss = accelerator.reduce(r == 0 ? 0.25f : 0.5f);
    EXPECT_EQ(loss, 0.75f);
    const double accuracy = accelerator.reduce(r == 0 ? 0.5 : 0.75, "mean");
    EXPECT_EQ(accuracy, 0.625);
    static_assert(std::is_same_v<decltype(accelerator.reduce(1.0f)), float>);
    static_assert(std::is_same_v<decltype(accelerator.reduce(size_t{1})), size_t>);
    static_assert(std::is_same_v<decltype(accelerator.reduce(torch::ones({1}))), torch::Tensor>);
    // The largest or smallest value of a batch (a per-sample loss's max), across processes.
    EXPECT_EQ(accelerator.reduce(r == 0 ? 2.5 : 0.5, "max"), 2.5);
    EXPECT_EQ(accelerator.reduce(r == 0 ? 2.5f : 0.5f, "min"), 0.5f);
    EXPECT_EQ(accelerator.reduce(r == 0 ? int64_t{-3} : int64_t{7}, "max"), 7);
    try {
      accelerator.reduce(1.0, "median");
      ADD_FAILURE() << "a median of a number is not offered";
    } catch (const std::invalid_argument &error) {
      EXPECT_NE(std::string(error.what()).find("\"median\""), std::string::npos) << error.what();
    }
    // Still in step after the error: the bad op was refused before any communication.
    EXPECT_EQ(accelerator.reduce(1), 2);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(Operations, ReduceOfANumberInOneProcessReturnsIt) {
  accelerate::Accelerator accelerator;
  EXPECT_EQ(accelerator.reduce(7), 7);
  EXPECT_EQ(accelerator.reduce(7, "mean"), 7);
  EXPECT_EQ(accelerator.reduce(0.1), 0.1);
  EXPECT_EQ(accelerator.reduce(0.1, "max"), 0.1);
  EXPECT_THROW(accelerator.reduce(7, "median"), std::invalid_argument);
}

TEST(Operations, DifferentShapesAreAnErrorNamingRanksAndShapes) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    try {
      accelerator.gather(torch::zeros({peer.rank + 2, 4}));
      ADD_FAILURE() << "gather of different shapes must fail";
    } catch (const std::runtime_error &error) {
      EXPECT_STREQ(error.what(), "accelerate: gather needs the same tensor shape on every "
                                 "process, got rank 0 [2, 4], rank 1 [3, 4]");
    }
    EXPECT_THROW(accelerator.reduce(torch::zeros({peer.rank + 1})), std::runtime_error);
    EXPECT_THROW(accelerator.reduce(torch::zeros({1}), "median"), std::invalid_argument);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Different collectives, or tensors of different types, at the same point: an error on every
// process naming each rank's call, instead of a Gloo error or a hang.
TEST(Operations, DifferentCallsAreAnErrorNamingEachRanksCall) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    try {
      if (peer.rank == 0) {
        accelerator.gather(torch::zeros({2}));
      } else {
        accelerator.reduce(torch::zeros({2}));
      }
      ADD_FAILURE() << "a gather beside a reduce must fail";
    } catch (const std::runtime_error &error) {
      EXPECT_STREQ(error.what(),
                   "accelerate: the processes called different collectives, or passed tensors of "
                   "different types or devices, at the same point: rank 0 gather of Float [2] on "
                   "cpu, rank 1 reduce of Float [2] on cpu");
    }
    try {
      accelerator.broadcast(torch::zeros({3}, peer.rank == 0 ? torch::kFloat32 : torch::kFloat64));
      ADD_FAILURE() << "a broadcast of a float beside one of a double must fail";
    } catch (const std::runtime_error &error) {
      EXPECT_NE(std::string(error.what())
                    .find("rank 0 broadcast of Float [3] on cpu, rank 1 broadcast of Double [3] "
                          "on cpu"),
                std::string::npos)
          << error.what();
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Debug mode (accel launch --debug): the number reduces and wait_for_everyone compare their
// calls too, so one process waiting where another reduces is named, not a hang.
TEST(Operations, DebugModeNamesABarrierBesideAReduceOfANumber) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    ::setenv("ACCELERATE_DEBUG_MODE", "true", 1);
    accelerate::Accelerator accelerator;
    try {
      if (peer.rank == 0) {
        accelerator.wait_for_everyone();
      } else {
        accelerator.reduce(1.5, "sum");
      }
      ADD_FAILURE() << "a barrier beside a reduce must fail in debug mode";
    } catch (const std::runtime_error &error) {
      EXPECT_STREQ(error.what(),
                   "accelerate: the processes called different collectives, or passed tensors of "
                   "different types or devices, at the same point: rank 0 wait_for_everyone, "
                   "rank 1 reduce of a number of Double [1] on cpu");
    }
    try {
      if (peer.rank == 0) {
        accelerator.reduce(int64_t{3}, "sum");
      } else {
        accelerator.reduce(3.0, "sum");
      }
      ADD_FAILURE() << "a whole number's reduce beside a double's must fail in debug mode";
    } catch (const std::runtime_error &error) {
      EXPECT_NE(std::string(error.what()).find("rank 0 reduce of a number of Long [1] on cpu"),
                std::string::npos)
          << error.what();
    }
    // Matching calls pass, with the checks on.
    EXPECT_EQ(accelerator.reduce(int64_t{peer.rank + 1}, "sum"), 3);
    accelerator.wait_for_everyone();
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(Operations, APeerThatDiesMakesTheOthersFailNotHang) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Options options;
    options.timeout = 10s;
    accelerate::Accelerator accelerator(options);
    accelerator.wait_for_everyone();
    if (peer.rank == 1) {
      std::_Exit(0); // gone without a word, like a crash
    }
    try {
      accelerator.reduce(torch::ones({4}));
      ADD_FAILURE() << "a collective without its peer must fail";
    } catch (const std::runtime_error &error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind("accelerate: reduce", 0), 0u) << message;
      EXPECT_NE(message.find("failed on rank 0 of 2"), std::string::npos) << message;
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
  EXPECT_FALSE(results[0].exit.stopped_by_group) << "rank 0 hung: " << results[0].output;
}

TEST(Operations, OneProcessNeedsNoGroup) {
  accelerate::Accelerator accelerator;
  auto t = torch::arange(3);
  EXPECT_TRUE(torch::equal(accelerator.gather(t), t));
  EXPECT_TRUE(torch::equal(accelerator.reduce(t, "sum"), t));
  EXPECT_TRUE(torch::equal(accelerator.broadcast(t, 0), t));
  EXPECT_TRUE(torch::equal(accelerator.pad_across_processes(t), t));
  accelerator.wait_for_everyone();
}

TEST(Operations, SaveIsAtomicAndOnTheMainProcess) {
  accelerate::Accelerator accelerator;
  const auto path =
      (std::filesystem::temp_directory_path() / ("accel-save-" + std::to_string(getpid()) + ".pt"))
          .string();
  accelerator.save(torch::arange(5), path);
  torch::Tensor loaded;
  torch::load(loaded, path);
  EXPECT_TRUE(torch::equal(loaded, torch::arange(5)));
  // A failed save leaves the previous file as it was and no temporary behind.
  EXPECT_THROW(accelerator.save(torch::arange(5), "/nonexistent-dir/model.pt"), std::exception);
  std::filesystem::remove(path);
}

} // namespace
