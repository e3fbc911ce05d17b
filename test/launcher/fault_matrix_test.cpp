// The fault matrix: in a 2-process training job under `accel launch`, each rank fails in each
// way (SIGKILL, SIGSEGV, exit 1, hang) at each phase (before the rendezvous, while the
// shared-memory segment is set up, in the middle of an all-reduce, in the middle of writing a
// checkpoint). Every time the job ends within its timeout, the summary names the first failure,
// no process and no /dev/shm segment of the job is left, and the checkpoint written before the
// failure still resumes. The faults come from the runtime's ACCELERATE_TEST_FAULT
// (runtime/src/test_faults.h); the program is the resume test's (checkpoints every step).
#include "job_probes.h"
#include "run_command.h"
#include "worker_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace {

using namespace accel_test;
namespace fs = std::filesystem;

constexpr int kTimeoutSeconds = 5; // --rdzv_timeout: the rendezvous and every collective
// Start-up of two LibTorch processes, the steps before the fault, and the launcher's grace
// between SIGTERM and SIGKILL, on a loaded 2-core machine.
constexpr int kSlackSeconds = 25;

enum class Phase { Rendezvous, SharedMemory, AllReduce, Save };
enum class Action { Kill, Segv, Exit, Hang };

struct Case {
  Phase phase;
  Action action;
  int rank;
};

const char *point_of(Phase phase) {
  switch (phase) {
  case Phase::Rendezvous:
    return "rendezvous";
  case Phase::SharedMemory:
    return "shared-memory";
  case Phase::AllReduce:
    return "all-reduce";
  case Phase::Save:
    return "save";
  }
  return "";
}

const char *action_of(Action action) {
  switch (action) {
  case Action::Kill:
    return "kill";
  case Action::Segv:
    return "segv";
  case Action::Exit:
    return "exit";
  case Action::Hang:
    return "hang";
  }
  return "";
}

// The fault plan. A save is 6 points on rank 0 (its state file, model, optimizer, scheduler,
// manifest, publishing) and 1 on rank 1 (its state file): the fault hits the first point of
// the second save, so the first checkpoint is whole.
std::string fault_plan(const Case &c) {
  std::string point = point_of(c.phase);
  if (c.phase == Phase::Save) {
    point += "@" + std::to_string(c.rank == 0 ? 7 : 2);
  }
  return point + ":" + std::to_string(c.rank) + ":" + action_of(c.action);
}

// What the summary's first entry says: the failing rank and how it ended. A hung rank answers
// nothing, so the other one gives up at the timeout and is the root cause (the launcher stops
// the hung one); its message names the hung rank, or the store only rank 0 would have served.
std::string expected_root_cause(const Case &c) {
  const std::string rank = "rank " + std::to_string(c.rank);
  switch (c.action) {
  case Action::Kill:
    return rank + " was killed by signal 9";
  case Action::Segv:
    return rank + " was killed by signal 11";
  case Action::Exit:
    return rank + " exited with code 1";
  case Action::Hang:
    // resume_training leaves the runtime's exception uncaught: std::terminate, SIGABRT.
    return "rank " + std::to_string(1 - c.rank) + " was killed by signal 6";
  }
  return "";
}

std::string expected_naming_of_hung_rank(const Case &c) {
  switch (c.phase) {
  case Phase::Rendezvous:
    return c.rank == 0 ? "does not answer as a rendezvous store (rank 0 hangs"
                       : "never arrived: rank(s) 1";
  case Phase::SharedMemory:
    return "rank " + std::to_string(c.rank) + " did not answer within 5.0 s";
  case Phase::AllReduce:
  case Phase::Save:
    return "process " + std::to_string(c.rank) + " did not contribute its part within 5.0 s";
  }
  return "";
}

std::string first_line(const std::string &path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

class FaultMatrix : public ::testing::TestWithParam<std::tuple<Phase, Action, int>> {};

TEST_P(FaultMatrix, TheJobEndsNamesTheFailureAndLeavesNothing) {
  const Case c{std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam())};
  const std::string plan = fault_plan(c);
  SCOPED_TRACE("ACCELERATE_TEST_FAULT=" + plan);
  const auto dir = make_temp_dir("fault-matrix");
  const std::string project = dir + "/project";
  // Marks every process of this job, the launcher's watchdog and the workers' children
  // included (they inherit it).
  const std::string marker = std::to_string(getpid()) + "-" + plan;
  const std::map<std::string, std::string> env = {{"HF_HOME", "/nonexistent-accel-test"},
                                                  {"ACCELERATE_TEST_FAULT", plan},
                                                  {"ACCEL_FAULT_MATRIX_CASE", marker}};
  const std::string program =
      std::string(RESUME_PROGRAM) + " --project " + project + " --out " + dir + "/out.pt";
  // The launcher's pid names its job's segments (accel-job<pid>.0-...); each worker's pid
  // names a segment made outside a launcher's job (accel-<pid>-...).
  const std::string launcher = "echo $$ > " + dir +
                               "/launcher; exec " ACCEL_BIN
                               " launch --num_processes 2 --rdzv_timeout " +
                               std::to_string(kTimeoutSeconds) + " /bin/sh -c '" + write_pid(dir) +
                               "; exec " + program + "'";

  const auto start = std::chrono::steady_clock::now();
  const auto result = run_command({"/bin/sh", "-c", launcher}, env, 120);
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  EXPECT_NE(result.exit_code, 0) << result.err;
  EXPECT_LT(seconds, kTimeoutSeconds + kSlackSeconds) << result.err;
  const std::string heading = "accel: the job failed (root cause first; the other workers were "
                              "stopped):\n  ";
  const auto first = result.err.find(heading);
  ASSERT_NE(first, std::string::npos) << result.err;
  EXPECT_EQ(result.err.compare(first + heading.size(), expected_root_cause(c).size(),
                               expected_root_cause(c)),
            0)
      << result.err;
  if (c.action == Action::Hang) {
    EXPECT_NE(result.err.find(expected_naming_of_hung_rank(c), first), std::string::npos)
        << result.err;
  }

  EXPECT_TRUE(
      wait_until([&] { return processes_with_variable("ACCEL_FAULT_MATRIX_CASE", marker).empty(); },
                 std::chrono::seconds(10)))
      << "processes of the job outlived it";
  EXPECT_TRUE(shared_memory_entries("accel-job" + first_line(dir + "/launcher") + ".").empty());
  for (pid_t worker : read_pids(dir)) {
    EXPECT_TRUE(shared_memory_entries("accel-" + std::to_string(worker) + "-").empty())
        << "worker " << worker;
  }

  if (c.phase == Phase::Save) {
    // The fault hit the second save: the first checkpoint is whole and the job resumes from it.
    EXPECT_FALSE(fs::exists(project + "/checkpoints/checkpoint_1/checkpoint.json"));
    const auto resumed =
        run_command({ACCEL_BIN, "launch", "--num_processes", "2", RESUME_PROGRAM, "--project",
                     project, "--out", dir + "/resumed.pt", "--resume"},
                    {{"HF_HOME", "/nonexistent-accel-test"}});
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from " + project + "/checkpoints/checkpoint_0"),
              std::string::npos)
        << resumed.out;
  }
  fs::remove_all(dir);
}

// The launcher itself stopped while rank 0's segment still has its name (rank 0 hangs right
// after making it): by Ctrl-C, SIGTERM or SIGKILL, the name leaves /dev/shm with the job.
class StoppedLauncher : public ::testing::TestWithParam<int> {};

TEST_P(StoppedLauncher, LeavesNoSegmentAndNoProcess) {
  const int signal = GetParam();
  const auto dir = make_temp_dir("stopped-launcher");
  const std::string marker = std::to_string(getpid()) + "-stopped-" + std::to_string(signal);
  accelerate::launch::WorkerSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo $$ > " + dir +
                   "/launcher; exec " ACCEL_BIN
                   " launch --num_processes 2 --rdzv_timeout 60 " RESUME_PROGRAM " --project " +
                   dir + "/project --out " + dir + "/out.pt"};
  spec.env = {{"HF_HOME", "/nonexistent-accel-test"},
              {"ACCELERATE_TEST_FAULT", "shared-memory:0:hang"},
              {"ACCEL_FAULT_MATRIX_CASE", marker}};
  spec.capture_output = true;
  std::string output;
  accelerate::launch::WorkerGroup group(
      {spec}, [&](int, int, std::string_view chunk) { output.append(chunk); });
  ASSERT_TRUE(wait_until([&] { return !first_line(dir + "/launcher").empty(); }));
  const std::string launcher = first_line(dir + "/launcher");
  const std::string prefix = "accel-job" + launcher + ".";
  ASSERT_TRUE(wait_until([&] { return !shared_memory_entries(prefix).empty(); }))
      << "rank 0 never made its segment\n"
      << output;
  kill(std::stoi(launcher), signal);
  group.wait(std::chrono::seconds(30));
  EXPECT_TRUE(
      wait_until([&] { return shared_memory_entries(prefix).empty(); }, std::chrono::seconds(10)))
      << shared_memory_entries(prefix)[0];
  EXPECT_TRUE(
      wait_until([&] { return processes_with_variable("ACCEL_FAULT_MATRIX_CASE", marker).empty(); },
                 std::chrono::seconds(10)));
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(, StoppedLauncher, ::testing::Values(SIGINT, SIGTERM, SIGKILL),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::string(sigabbrev_np(info.param));
                         });

std::string case_name(const ::testing::TestParamInfo<FaultMatrix::ParamType> &info) {
  std::string name = std::string(point_of(std::get<0>(info.param))) + "_" +
                     action_of(std::get<1>(info.param)) + "_rank" +
                     std::to_string(std::get<2>(info.param));
  for (auto &c : name) {
    c = c == '-' ? '_' : c;
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    , FaultMatrix,
    ::testing::Combine(::testing::Values(Phase::Rendezvous, Phase::SharedMemory, Phase::AllReduce,
                                         Phase::Save),
                       ::testing::Values(Action::Kill, Action::Segv, Action::Exit, Action::Hang),
                       ::testing::Values(0, 1)),
    case_name);

} // namespace
