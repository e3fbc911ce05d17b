// notebook_launcher: N forked workers from inside the caller, results back, failures named.
#include "training_fixture.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;
using accelerate::notebook_launcher;
namespace fs = std::filesystem;

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

TEST(NotebookLauncher, TwoWorkersAllReduceAndRankZerosResultComesBack) {
  // Torch work in the caller first: forking after the intra-op thread pool exists must work.
  auto warm = torch::randn({256, 256}).matmul(torch::randn({256, 256}));
  ASSERT_EQ(warm.size(0), 256);
  const auto sum = notebook_launcher(
      [](float scale) {
        accelerate::Accelerator accelerator;
        auto total =
            accelerator.reduce(torch::full({4}, scale * (accelerator.process_index() + 1)));
        return total[0].item<float>() + 100.0f * accelerator.process_index();
      },
      2, {}, 2.0f);
  EXPECT_EQ(sum, 6.0f); // (1 + 2) * 2 on rank 0, whose result is returned
}

TEST(NotebookLauncher, TrainsTheEquivalenceModel) {
  using accel_test::OptimizerKind;
  const auto distributed = notebook_launcher(
      [] {
        return accel_test::train_with_accelerator<torch::data::samplers::SequentialSampler>(
            OptimizerKind::Adam, 4, 1000);
      },
      2);
  const auto single = accel_test::train_with_accelerator<torch::data::samplers::SequentialSampler>(
      OptimizerKind::Adam, 8, 1000);
  ASSERT_EQ(distributed.size(), single.size());
  for (size_t i = 0; i < single.size(); ++i) {
    EXPECT_TRUE(torch::allclose(distributed[i], single[i], 1e-5, 1e-6)) << "tensor " << i;
  }
}

TEST(NotebookLauncher, OneProcessRunsInTheCaller) {
  const pid_t caller = getpid();
  EXPECT_EQ(notebook_launcher([] { return static_cast<int>(getpid()); }, 1), caller);
}

void expect_failure_naming(const std::function<void()> &launch, const std::string &expected) {
  const auto start = std::chrono::steady_clock::now();
  try {
    launch();
    ADD_FAILURE() << "the launch must throw";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// Every worker records its pid; after a failure none may be left.
struct PidDir {
  PidDir() : path(fs::temp_directory_path() / ("accel-nb-" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~PidDir() { fs::remove_all(path); }
  void record(int rank) const { std::ofstream(path / std::to_string(rank)) << getpid(); }
  void expect_none_alive() const {
    for (const auto &entry : fs::directory_iterator(path)) {
      std::ifstream in(entry.path());
      pid_t pid = 0;
      in >> pid;
      for (int i = 0; i < 100 && alive(pid); ++i) {
        std::this_thread::sleep_for(20ms);
      }
      EXPECT_FALSE(alive(pid)) << "worker " << pid << " is left";
    }
  }
  fs::path path;
};

// Runs `processes` workers that record their pids; `failing_rank` calls `fail`, the others
// wait. The launch must throw `expected` quickly and leave no worker behind.
void expect_worker_failure(int processes, int failing_rank, const std::function<void()> &fail,
                           const std::string &expected) {
  PidDir pids;
  expect_failure_naming(
      [&] {
        notebook_launcher(
            [&] {
              const int rank = std::atoi(std::getenv("RANK"));
              pids.record(rank);
              if (rank == failing_rank) {
                fail();
              }
              std::this_thread::sleep_for(300s);
            },
            processes);
      },
      expected);
  pids.expect_none_alive();
}

TEST(NotebookLauncher, AWorkerThatThrowsIsNamedAndTheOthersStopped) {
  expect_worker_failure(
      2, 1, [] { throw std::runtime_error("loss is NaN"); }, "rank 1 failed: loss is NaN");
}

TEST(NotebookLauncher, AWorkerThatAbortsIsNamed) {
  expect_worker_failure(2, 0, [] { std::abort(); }, "rank 0 was killed by signal 6");
}

TEST(NotebookLauncher, AWorkerKilledBySigkillIsNamed) {
  expect_worker_failure(3, 1, [] { raise(SIGKILL); }, "rank 1 was killed by signal 9");
}

TEST(NotebookLauncher, RefusesWhenAnAcceleratorExistsInTheCaller) {
  accelerate::Accelerator accelerator;
  bool ran = false;
  expect_failure_naming([&] { notebook_launcher([&] { ran = true; }, 2); },
                        "an Accelerator already exists in this process");
  EXPECT_FALSE(ran);
}

} // namespace
