// `accel launch`'s command line: Accelerate's flags, unknown options, bad values.
#include "run_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {

using accel_test::run_command;

const std::map<std::string, std::string> kIsolated = {{"HF_HOME", "/nonexistent-accel-test"}};

std::vector<std::string> launch(std::vector<std::string> args) {
  args.insert(args.begin(), {ACCEL_BIN, "launch"});
  return args;
}

TEST(Flags, AccelerateFlagsAreAcceptedWithTheirMeaning) {
  auto result = run_command(
      launch({"--multi_gpu", "--debug", "--same_network", "--rdzv_backend", "static", "--no_python",
              "/bin/sh", "-c", "echo $ACCELERATE_USE_CPU $ACCELERATE_DEBUG_MODE"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] false true\n");

  // Hyphens work as underscores do.
  result = run_command(launch({"--multi-gpu", "--same-network", "--rdzv-backend", "static",
                               "--no-python", "/bin/sh", "-c", "echo $ACCELERATE_DEBUG_MODE"}),
                       kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] false\n");
}

// accel's own flag (Python Accelerate sets the hook in code): the workers learn it through
// ACCELERATE_COMM_HOOK, "no" unless asked.
TEST(Flags, CommHookReachesTheWorkers) {
  auto result = run_command(
      launch({"--comm_hook", "bf16", "--no_python", "/bin/sh", "-c", "echo $ACCELERATE_COMM_HOOK"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] bf16\n");
  result = run_command(launch({"/bin/sh", "-c", "echo $ACCELERATE_COMM_HOOK"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] no\n");
}

// PowerSGD's two settings reach the workers only when given (the runtime has DDP's defaults);
// given without PowerSGD they do nothing, and the launcher says so.
TEST(Flags, PowerSgdSettingsReachTheWorkers) {
  const std::vector<std::string> echo = {
      "/bin/sh", "-c",
      "echo $ACCELERATE_COMM_HOOK ${ACCELERATE_POWERSGD_RANK-unset} "
      "${ACCELERATE_POWERSGD_START_ITER-unset}"};
  auto with = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), echo.begin(), echo.end());
    return run_command(launch(flags), kIsolated);
  };
  auto result = with(
      {"--comm_hook", "powersgd", "--powersgd-rank", "4", "--powersgd_start_iter", "10", "-v"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] powersgd 4 10\n");
  EXPECT_NE(result.err.find("gradients compressed by PowerSGD (rank 4, from step 10)"),
            std::string::npos)
      << result.err;
  result = with({"--comm_hook", "powersgd"});
  EXPECT_EQ(result.out, "[rank0] powersgd unset unset\n") << result.err;
  // Not given, the workers inherit the launcher's environment: -v says what they will use (it
  // showed the defaults, 1 and 1000).
  auto inherited = kIsolated;
  inherited["ACCELERATE_POWERSGD_RANK"] = "8";
  result = run_command(
      launch({"--comm_hook", "powersgd", "-v", "/bin/sh", "-c", "echo $ACCELERATE_POWERSGD_RANK"}),
      inherited);
  EXPECT_EQ(result.out, "[rank0] 8\n") << result.err;
  EXPECT_NE(result.err.find("gradients compressed by PowerSGD (rank 8 (ACCELERATE_POWERSGD_RANK), "
                            "from step 1000)"),
            std::string::npos)
      << result.err;
  result = with({"--powersgd_rank", "4"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("accel: note: powersgd_rank and powersgd_start_iter apply only with "
                            "--comm_hook powersgd (comm_hook is no)"),
            std::string::npos)
      << result.err;
}

// accel's own flag (Accelerate 1.15 sets split_batches in code, and has no launch flag for it):
// every worker gets ACCELERATE_SPLIT_BATCHES=true, only when given, so that otherwise the
// launcher's environment passes through. It is no config key: Accelerate's config loader
// refuses keys it does not know, and so does ours.
TEST(Flags, SplitBatchesReachTheWorkersAndIsNoConfigKey) {
  const std::vector<std::string> echo = {"/bin/sh", "-c", "echo ${ACCELERATE_SPLIT_BATCHES-unset}"};
  auto with = [&](std::vector<std::string> flags,
                  const std::map<std::string, std::string> &env = kIsolated) {
    flags.insert(flags.end(), echo.begin(), echo.end());
    return run_command(launch(flags), env);
  };
  auto result = with({"--split_batches", "--num_processes", "2", "-v"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank0] true\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank1] true\n"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("every batch split across the processes"), std::string::npos)
      << result.err;
  result = with({"--split-batches"});
  EXPECT_EQ(result.out, "[rank0] true\n") << result.err;
  result = with({});
  EXPECT_EQ(result.out, "[rank0] unset\n") << result.err;
  auto inherited = kIsolated;
  inherited["ACCELERATE_SPLIT_BATCHES"] = "1";
  result = with({}, inherited);
  EXPECT_EQ(result.out, "[rank0] 1\n") << result.err;

  const auto dir = accel_test::make_temp_dir("split-batches-config");
  const auto file = dir + "/split.yaml";
  std::ofstream(file) << "num_processes: 2\nsplit_batches: true\n";
  result = run_command(launch({"--config_file", file, "/bin/true"}), kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(file + ":2:1: key 'split_batches': unknown key"), std::string::npos)
      << result.err;
  std::filesystem::remove_all(dir);
}

// Local SGD for the whole run, accel's own flag too (Accelerate has it in code only): the
// workers get ACCELERATE_LOCAL_SGD_STEPS, and the verbose plan says so.
TEST(Flags, LocalSgdStepsReachTheWorkers) {
  const std::vector<std::string> echo = {"/bin/sh", "-c",
                                         "echo ${ACCELERATE_LOCAL_SGD_STEPS-unset}"};
  auto flags = std::vector<std::string>{"--local_sgd_steps", "8", "--num_processes", "2", "-v"};
  flags.insert(flags.end(), echo.begin(), echo.end());
  auto result = run_command(launch(flags), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank0] 8\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank1] 8\n"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("Local SGD (parameters averaged every 8 steps)"), std::string::npos)
      << result.err;
  flags = {"--local-sgd-steps", "3"};
  flags.insert(flags.end(), echo.begin(), echo.end());
  EXPECT_EQ(run_command(launch(flags), kIsolated).out, "[rank0] 3\n");
  flags.assign(echo.begin(), echo.end());
  EXPECT_EQ(run_command(launch(flags), kIsolated).out, "[rank0] unset\n");
}

TEST(Flags, ModuleDoesNotApplyToNativePrograms) {
  for (const char *flag : {"-m", "--module"}) {
    const auto result = run_command(launch({flag, "/bin/echo", "x"}), kIsolated);
    EXPECT_EQ(result.exit_code, 2) << flag;
    EXPECT_NE(result.err.find("-m/--module runs a Python module"), std::string::npos) << result.err;
  }
  // After PROGRAM, -m is the program's.
  const auto result = run_command(launch({"/bin/echo", "-m"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] -m\n");
}

TEST(Flags, UnknownOptionsAreReportedAsSuch) {
  auto result = run_command(launch({"--multi_cpu", "/bin/echo", "x"}), kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("accel: error: unknown option '--multi_cpu'"), std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("PATH"), std::string::npos) << result.err;

  // `--` ends the launcher's options.
  result = run_command(launch({"--", "/bin/echo", "--multi_cpu"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] --multi_cpu\n");
  // A `--` after PROGRAM is the program's.
  result = run_command(launch({"/bin/echo", "a", "--", "b"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] a -- b\n");
}

TEST(Flags, BadValuesExit2WithAClearMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--num_processes", "two"}, "--num_processes: 'two' is not a whole number"},
      {{"--num_processes", "0"}, "--num_processes: '0' is out of range (1 to any)"},
      {{"--num-processes", "2.5"}, "--num_processes: '2.5' is not a whole number"},
      {{"--main_process_port", "70000"},
       "--main_process_port: '70000' is out of range (1 to 65535)"},
      {{"--mixed_precision", "fp32"}, "--mixed_precision: 'fp32' is not one of no, fp16, bf16"},
      {{"--comm_hook", "int8"}, "--comm_hook: 'int8' is not one of no, fp16, bf16, powersgd"},
      {{"--powersgd_rank", "0"}, "--powersgd_rank: '0' is out of range (1 to 1048576)"},
      {{"--powersgd_start_iter", "soon"}, "--powersgd_start_iter: 'soon' is not a whole number"},
      {{"--local_sgd_steps", "0"}, "--local_sgd_steps: '0' is out of range (1 to any)"},
      // The config file's limits (the flag took 2147483647, the file refused over 1048576).
      {{"--powersgd_rank", "2147483647"},
       "--powersgd_rank: '2147483647' is out of range (1 to 1048576)"},
      {{"--powersgd_start_iter", "1073741825"},
       "--powersgd_start_iter: '1073741825' is out of range (0 to 1073741824)"},
      {{"--rdzv_timeout", "soon"}, "--rdzv_timeout: 'soon' is not a number of seconds"},
      // Timeouts have a range: 1e308 s overflowed to "-9223372036854775808ms", 1e-9 s became
      // 0, and a monitor interval of 1e-300 s kept the launcher busy.
      {{"--rdzv_timeout", "1e308"},
       "--rdzv_timeout: '1e308' is out of range (0.001 to 604800 seconds)"},
      {{"--rdzv_timeout", "1e-9"},
       "--rdzv_timeout: '1e-9' is out of range (0.001 to 604800 seconds)"},
      {{"--rdzv_timeout", "inf"}, "--rdzv_timeout: 'inf' is not a number of seconds"},
      {{"--monitor_interval", "1e-300"},
       "--monitor_interval: '1e-300' is out of range (0.01 to 3600 seconds)"},
      {{"--monitor_interval", "-1"},
       "--monitor_interval: '-1' is out of range (0.01 to 3600 seconds)"},
      {{"--monitor_interval", "nan"}, "--monitor_interval: 'nan' is not a number of seconds"},
      {{"--rdzv_backend", "c10d"},
       "--rdzv_backend: 'c10d' is not one of static (accel's rendezvous is static"},
      {{"--tee", "5"}, "--tee: '5' is out of range (0 to 3)"},
      {{"--multi_gpu", "--cpu"}, "--multi_gpu and --cpu contradict each other"},
  };
  for (const auto &[args, message] : cases) {
    auto argv = args;
    argv.push_back("true");
    const auto result = run_command(launch(argv), kIsolated);
    EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.err;
    EXPECT_NE(result.err.find("accel: error: " + message), std::string::npos) << result.err;
  }
  // The ends of the ranges are valid, and the workers get the timeout.
  auto edges = run_command(launch({"--rdzv_timeout", "0.001", "--monitor_interval", "0.01",
                                   "/bin/sh", "-c", "echo $ACCELERATE_TIMEOUT"}),
                           kIsolated);
  EXPECT_EQ(edges.exit_code, 0) << edges.err;
  EXPECT_EQ(edges.out, "[rank0] 0.001000\n");
  edges = run_command(launch({"--rdzv_timeout", "604800", "--monitor_interval", "3600", "/bin/sh",
                              "-c", "echo $ACCELERATE_TIMEOUT"}),
                      kIsolated);
  EXPECT_EQ(edges.exit_code, 0) << edges.err;
  EXPECT_EQ(edges.out, "[rank0] 604800.000000\n");
  const auto test = run_command({ACCEL_BIN, "test", "--num_processes", "two"}, kIsolated);
  EXPECT_EQ(test.exit_code, 2);
  EXPECT_NE(test.err.find("--num_processes: 'two' is not a whole number"), std::string::npos)
      << test.err;
  EXPECT_EQ(run_command({ACCEL_BIN, "launch", "--help"}).exit_code, 0);
}

} // namespace
