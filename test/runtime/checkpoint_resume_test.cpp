// Exact resume and crash safety, end to end: a real training program (programs/
// resume_training.cpp) checkpoints every step, is killed with SIGKILL halfway through (or in the
// middle of writing a checkpoint), is started again with --resume, and must finish with the
// parameters of a run that was never interrupted: bit for bit, on 1 and on 2 processes.
#include "run_command.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using accel_test::CommandResult;
using accel_test::run_command;

// 3 epochs of 6 steps; 9 is halfway through the second epoch.
constexpr int kHalfway = 9;
// Kill points in one save_state of one process: before each of its 5 files and before the
// rename that publishes the directory.
constexpr int kKillPointsPerSave = 6;

// No default config from the user's home may leak into the launcher.
const std::map<std::string, std::string> kIsolated = {{"HF_HOME", "/nonexistent-accel-test"}};

CommandResult train(int processes, const std::string &project, const std::string &out,
                    std::vector<std::string> flags,
                    std::map<std::string, std::string> env = kIsolated,
                    const std::vector<std::string> &launch_flags = {}) {
  std::vector<std::string> argv;
  if (processes > 1) {
    argv = {ACCEL_BIN, "launch", "--num_processes", std::to_string(processes)};
    argv.insert(argv.end(), launch_flags.begin(), launch_flags.end());
  }
  argv.insert(argv.end(), {RESUME_PROGRAM, "--project", project, "--out", out});
  argv.insert(argv.end(), flags.begin(), flags.end());
  env.insert(kIsolated.begin(), kIsolated.end());
  return run_command(argv, env);
}

std::vector<torch::Tensor> load_result(const std::string &path) {
  std::vector<torch::Tensor> result;
  torch::load(result, path);
  return result;
}

void expect_bit_identical(const std::string &expected_path, const std::string &actual_path) {
  const auto expected = load_result(expected_path);
  const auto actual = load_result(actual_path);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(torch::equal(expected[i], actual[i]))
        << "tensor " << i << " differs by " << (expected[i] - actual[i]).abs().max();
  }
}

std::string describe(const CommandResult &result) {
  return "exit " + std::to_string(result.exit_code) + "\nstdout:\n" + result.out + "\nstderr:\n" +
         result.err;
}

void expect_exact_resume(int processes, const std::vector<std::string> &extra_flags,
                         const std::vector<std::string> &launch_flags = {}) {
  const auto dir = accel_test::make_temp_dir("resume-" + std::to_string(processes));
  const auto straight = train(processes, dir + "/straight", dir + "/straight.pt", extra_flags,
                              kIsolated, launch_flags);
  ASSERT_EQ(straight.exit_code, 0) << describe(straight);

  auto flags = extra_flags;
  flags.insert(flags.end(), {"--kill-after-step", std::to_string(kHalfway)});
  const auto killed =
      train(processes, dir + "/job", dir + "/killed.pt", flags, kIsolated, launch_flags);
  ASSERT_NE(killed.exit_code, 0) << "the run was to be killed at step " << kHalfway << "\n"
                                 << describe(killed);
  ASSERT_FALSE(fs::exists(dir + "/killed.pt"));
  // total_limit 2 kept the newest two.
  EXPECT_TRUE(fs::exists(dir + "/job/checkpoints/checkpoint_" + std::to_string(kHalfway - 1) +
                         "/checkpoint.json"));
  EXPECT_FALSE(fs::exists(dir + "/job/checkpoints/checkpoint_" + std::to_string(kHalfway - 3)));

  flags = extra_flags;
  flags.push_back("--resume");
  const auto resumed =
      train(processes, dir + "/job", dir + "/resumed.pt", flags, kIsolated, launch_flags);
  ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  const bool split =
      std::find(launch_flags.begin(), launch_flags.end(), "--split_batches") != launch_flags.end();
  EXPECT_EQ(resumed.out.find("every batch split across 2 processes") != std::string::npos, split)
      << resumed.out;
  expect_bit_identical(dir + "/straight.pt", dir + "/resumed.pt");
  fs::remove_all(dir);
}

TEST(CheckpointResume, KilledHalfwayAndResumedEqualsStraightRunOneProcess) {
  expect_exact_resume(1, {});
}

TEST(CheckpointResume, KilledHalfwayAndResumedEqualsStraightRunTwoProcesses) {
  expect_exact_resume(2, {});
}

// accel launch --split_batches reaches the program (it says so), and a split epoch resumes
// exactly where it was killed.
TEST(CheckpointResume, SplitBatchesResumeExactlyTwoProcesses) {
  expect_exact_resume(2, {}, {"--split_batches"});
}

TEST(CheckpointResume, Fp16LossScaleIsResumedTooTwoProcesses) {
  expect_exact_resume(2, {"--fp16"});
}

// SIGKILL at every point of the second checkpoint's writing: the first stays loadable, the
// half-written one is never taken for a checkpoint, and resuming from the first still ends
// exactly where the uninterrupted run ends.
TEST(CheckpointResume, KillDuringSaveStateLeavesThePreviousCheckpointWhole) {
  const auto dir = accel_test::make_temp_dir("crash-safety");
  const auto straight = train(1, dir + "/straight", dir + "/straight.pt", {});
  ASSERT_EQ(straight.exit_code, 0) << describe(straight);

  for (int point = 0; point < kKillPointsPerSave; ++point) {
    SCOPED_TRACE("killed at point " + std::to_string(point) + " of the second save");
    const std::string project = dir + "/job" + std::to_string(point);
    const auto killed =
        train(1, project, dir + "/killed.pt", {},
              {{"ACCELERATE_TEST_FAULT",
                "save@" + std::to_string(kKillPointsPerSave + point + 1) + ":0:kill"}});
    ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << describe(killed);
    EXPECT_TRUE(fs::exists(project + "/checkpoints/checkpoint_0/checkpoint.json"));
    EXPECT_FALSE(fs::exists(project + "/checkpoints/checkpoint_1/checkpoint.json"));

    const auto resumed = train(1, project, dir + "/resumed.pt", {"--resume"});
    ASSERT_EQ(resumed.exit_code, 0) << describe(resumed);
    EXPECT_NE(resumed.out.find("checkpoint_0"), std::string::npos) << resumed.out;
    expect_bit_identical(dir + "/straight.pt", dir + "/resumed.pt");
  }
  fs::remove_all(dir);
}

} // namespace
