// Config files: Accelerate's own files load as they are; ours are Accelerate's format; bad
// files stop with FILE:LINE:COLUMN and the key.
#include "run_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace {

using accel_test::run_command;
namespace fs = std::filesystem;

const std::string kInputs = ACCEL_TEST_INPUTS;
const std::map<std::string, std::string> kIsolated = {{"HF_HOME", "/nonexistent-accel-test"}};

std::string write(const std::string &dir, const std::string &name, const std::string &text) {
  const auto path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string read(const std::string &path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Config, AccelerateDefaultFileLoadsAndFlagsOverrideIt) {
  const auto file = kInputs + "/accelerate-1.15-default_config.yaml";
  const auto from_file = run_command({ACCEL_BIN, "launch", "--config_file", file, "/bin/sh", "-c",
                                      "echo $WORLD_SIZE $ACCELERATE_USE_CPU"},
                                     kIsolated);
  EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_file.out, "[rank0] 1 true\n");
  // Only a note matters here: another test's job may hold the default port meanwhile, which
  // the launcher reports on stderr too.
  EXPECT_EQ(from_file.err.find("note"), std::string::npos)
      << "default values of Python-only keys deserve no note: " << from_file.err;

  const auto overridden = run_command(
      {ACCEL_BIN, "launch", "--config_file", file, "--num_processes", "2", "--mixed_precision",
       "bf16", "/bin/sh", "-c", "echo $WORLD_SIZE $ACCELERATE_MIXED_PRECISION"},
      kIsolated);
  EXPECT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_NE(overridden.out.find("[rank1] 2 bf16"), std::string::npos) << overridden.out;
}

TEST(Config, CommHookComesFromTheFileAndTheFlagOverridesIt) {
  const auto dir = accel_test::make_temp_dir("config-comm-hook");
  const auto file = write(dir, "hook.yaml", "num_processes: 1\ncomm_hook: fp16\n");
  auto result = run_command(
      {ACCEL_BIN, "launch", "--config_file", file, "/bin/sh", "-c", "echo $ACCELERATE_COMM_HOOK"},
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] fp16\n");
  result = run_command({ACCEL_BIN, "launch", "--config_file", file, "--comm_hook", "no", "/bin/sh",
                        "-c", "echo $ACCELERATE_COMM_HOOK"},
                       kIsolated);
  EXPECT_EQ(result.out, "[rank0] no\n") << result.err;
  const auto power = write(dir, "powersgd.yaml",
                           "comm_hook: powersgd\npowersgd_rank: 2\npowersgd_start_iter: 0\n");
  result = run_command({ACCEL_BIN, "launch", "--config_file", power, "--powersgd_rank", "3",
                        "/bin/sh", "-c",
                        "echo $ACCELERATE_COMM_HOOK $ACCELERATE_POWERSGD_RANK "
                        "$ACCELERATE_POWERSGD_START_ITER"},
                       kIsolated);
  EXPECT_EQ(result.out, "[rank0] powersgd 3 0\n") << result.err;
  const auto bad_rank = write(dir, "bad-rank.yaml", "powersgd_rank: 0\n");
  result = run_command({ACCEL_BIN, "env", "--config_file", bad_rank});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(bad_rank + ":1:16: key 'powersgd_rank'"), std::string::npos)
      << result.err;
  const auto bad = write(dir, "bad-hook.yaml", "comm_hook: int8\n");
  result = run_command({ACCEL_BIN, "env", "--config_file", bad});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(bad + ":1:12: key 'comm_hook': 'int8' is not one of"),
            std::string::npos)
      << result.err;
  fs::remove_all(dir);
}

TEST(Config, AccelerateMultiMachineFileLoadsWithANoteForPythonOnlyKeys) {
  const auto result =
      run_command({ACCEL_BIN, "env", "--config_file", kInputs + "/accelerate-1.15-multi_cpu.yaml"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char *expected :
       {"machine_rank: 1", "main_process_ip: 10.0.0.5", "main_process_port: 29555",
        "mixed_precision: bf16", "num_machines: 2", "num_processes: 4",
        "distributed_type: MULTI_CPU"}) {
    EXPECT_NE(result.out.find(expected), std::string::npos) << expected << "\n" << result.out;
  }
  EXPECT_NE(result.err.find("note: ignoring 'dynamo_config'"), std::string::npos) << result.err;
}

TEST(Config, EnvSaysNotFoundWithoutAConfig) {
  const auto result = run_command({ACCEL_BIN, "env"}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("- Config in effect:\n\tNot found\n"), std::string::npos) << result.out;
}

// A directory named as the config file: `accel launch` stops naming it (it said
// "basic_filebuf::underflow error"), `accel env` reports it and goes on.
TEST(Config, ADirectoryInsteadOfAConfigFileIsNamed) {
  const auto dir = accel_test::make_temp_dir("config-directory");
  auto result = run_command({ACCEL_BIN, "launch", "--config_file", dir, "true"}, kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("accel: error: " + dir + ": is a directory, not a config file"),
            std::string::npos)
      << result.err;
  result = run_command({ACCEL_BIN, "test", "--config_file", dir}, kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(dir + ": is a directory, not a config file"), std::string::npos)
      << result.err;
  result = run_command({ACCEL_BIN, "env", "--config_file", dir}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("- Config file: " + dir + " (a directory, not a config file)\n"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("- Config in effect:\n\tNot found\n"), std::string::npos) << result.out;
  // The default location too.
  const auto home = accel_test::make_temp_dir("config-directory-home");
  fs::create_directories(home + "/accelerate/default_config.yaml");
  result = run_command({ACCEL_BIN, "env"}, {{"HF_HOME", home}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  result = run_command({ACCEL_BIN, "launch", "true"}, {{"HF_HOME", home}});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("default_config.yaml: is a directory, not a config file"),
            std::string::npos)
      << result.err;
  fs::remove_all(dir);
  fs::remove_all(home);
}

TEST(Config, EnvSaysWhetherGradientsCanUseSharedMemory) {
  auto result = run_command({ACCEL_BIN, "env"}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("- Shared-memory gradient sum (CPU, one machine): on, /dev/shm has "),
            std::string::npos)
      << result.out;
  auto off = kIsolated;
  off["ACCELERATE_SHARED_MEMORY"] = "false";
  result = run_command({ACCEL_BIN, "env"}, off);
  EXPECT_NE(
      result.out.find("gradient sum (CPU, one machine): off (ACCELERATE_SHARED_MEMORY=false)"),
      std::string::npos)
      << result.out;
  // A word that is neither yes nor no: the report says training refuses it.
  off["ACCELERATE_SHARED_MEMORY"] = "perhaps";
  result = run_command({ACCEL_BIN, "env"}, off);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("gradient sum (CPU, one machine): refused: "
                            "ACCELERATE_SHARED_MEMORY='perhaps' is neither yes nor no"),
            std::string::npos)
      << result.out;
}

TEST(Config, EnvSaysWhetherTrainingProcessesTuneMalloc) {
  auto result = run_command({ACCEL_BIN, "env"}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitized `accel` allocates through the sanitizer's malloc: nothing to tune.
  const std::string expected = "training processes): not applicable (malloc is not glibc's)";
#else
  const std::string expected = "- Malloc tuning (host memory of training processes): on: ";
#endif
  EXPECT_NE(result.out.find(expected), std::string::npos) << result.out;
  auto off = kIsolated;
  off["ACCELERATE_MALLOC_TUNING"] = "false";
  result = run_command({ACCEL_BIN, "env"}, off);
  EXPECT_NE(result.out.find("training processes): off (ACCELERATE_MALLOC_TUNING"),
            std::string::npos)
      << result.out;
  auto theirs = kIsolated;
  theirs["GLIBC_TUNABLES"] = "glibc.malloc.trim_threshold=65536";
  result = run_command({ACCEL_BIN, "env"}, theirs);
  EXPECT_NE(result.out.find("training processes): left to the environment"), std::string::npos)
      << result.out;
}

TEST(Config, EnvSaysWhetherLoadersSplitBatches) {
  auto result = run_command({ACCEL_BIN, "env"}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("- Batches of prepared data loaders: whole: each process gets every "
                            "N-th batch"),
            std::string::npos)
      << result.out;
  auto split = kIsolated;
  split["ACCELERATE_SPLIT_BATCHES"] = "on";
  result = run_command({ACCEL_BIN, "env"}, split);
  EXPECT_NE(result.out.find("loaders: split: each process gets its part of every batch "
                            "(ACCELERATE_SPLIT_BATCHES=on)"),
            std::string::npos)
      << result.out;
  split["ACCELERATE_SPLIT_BATCHES"] = "sometimes";
  result = run_command({ACCEL_BIN, "env"}, split);
  EXPECT_NE(result.out.find("loaders: refused: ACCELERATE_SPLIT_BATCHES='sometimes' is neither "
                            "yes nor no"),
            std::string::npos)
      << result.out;
}

TEST(Config, UnknownKeysAndBadValuesNameFileLineColumnAndKey) {
  const auto dir = accel_test::make_temp_dir("config-errors");
  const auto unknown = write(dir, "unknown.yaml", "num_processes: 2\nnum_procesess: 3\n");
  auto result = run_command({ACCEL_BIN, "launch", "--config_file", unknown, "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(unknown + ":2:1: key 'num_procesess': unknown key"), std::string::npos)
      << result.err;

  const auto bad = write(dir, "bad.yaml", "mixed_precision: no\nnum_processes: two\n");
  result = run_command({ACCEL_BIN, "launch", "--config_file", bad, "true"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(bad + ":2:16: key 'num_processes': expected an integer, got 'two'"),
            std::string::npos)
      << result.err;

  const auto choice = write(dir, "choice.yaml", "distributed_type: DEEPSPEED\n");
  result = run_command({ACCEL_BIN, "env", "--config_file", choice});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(choice + ":1:19: key 'distributed_type': 'DEEPSPEED' is not one of"),
            std::string::npos)
      << result.err;

  const auto broken = write(dir, "broken.yaml", "num_processes: [2\n");
  result = run_command({ACCEL_BIN, "env", "--config_file", broken});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(broken + ":2:1: "), std::string::npos) << result.err;

  result = run_command({ACCEL_BIN, "env", "--config_file", dir + "/missing.yaml"});
  EXPECT_EQ(result.exit_code, 0) << "a missing file is reported as none";
  fs::remove_all(dir);
}

TEST(Config, DefaultWritesAccelerateKeysAndNeverOverwrites) {
  const auto home = accel_test::make_temp_dir("hf-home");
  const std::map<std::string, std::string> env = {{"HF_HOME", home}};
  const auto path = home + "/accelerate/default_config.yaml";
  auto result = run_command({ACCEL_BIN, "config", "default"}, env);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("saved at " + path), std::string::npos) << result.out;
  const auto written = read(path);
  // Quoted, as Accelerate writes them: YAML 1.1 (PyYAML) reads a plain NO or no as false.
  EXPECT_NE(written.find("distributed_type: 'NO'"), std::string::npos) << written;
  EXPECT_NE(written.find("mixed_precision: 'no'"), std::string::npos) << written;
  EXPECT_NE(written.find("compute_environment: LOCAL_MACHINE"), std::string::npos) << written;

  std::ofstream(path, std::ios::app) << "# edited by hand\n";
  const auto edited = read(path);
  result = run_command({ACCEL_BIN, "config", "default"}, env);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("already exists; not overwriting it"), std::string::npos);
  EXPECT_EQ(read(path), edited);

  // The file written is the default the launcher then uses.
  result = run_command({ACCEL_BIN, "launch", "/bin/sh", "-c", "echo $WORLD_SIZE"}, env);
  EXPECT_EQ(result.out, "[rank0] 1\n") << result.err;
  fs::remove_all(home);
}

TEST(Config, DefaultLocationFollowsXdgCacheHomeWithoutHfHome) {
  const auto cache = accel_test::make_temp_dir("xdg");
  auto result = run_command(
      {"/usr/bin/env", "-u", "HF_HOME", "XDG_CACHE_HOME=" + cache, ACCEL_BIN, "config", "default"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(fs::exists(cache + "/huggingface/accelerate/default_config.yaml")) << result.out;
  fs::remove_all(cache);
}

TEST(Config, QuestionsAnsweredFromAPipe) {
  const auto dir = accel_test::make_temp_dir("questions");
  const auto path = dir + "/answers.yaml";
  // multi-CPU, 2 machines, rank 1, main at 127.0.0.1:29600, same network, 4 processes,
  // no debug, bf16.
  const auto result = run_command({"/bin/sh", "-c",
                                   "printf '1\\n2\\n1\\n127.0.0.1\\n29600\\n\\n4\\nno\\n2\\n' | " +
                                       std::string(ACCEL_BIN) + " config --config_file " + path});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto written = read(path);
  for (const char *expected :
       {"distributed_type: MULTI_CPU", "num_machines: 2", "machine_rank: 1",
        "main_process_ip: 127.0.0.1", "main_process_port: 29600", "num_processes: 4",
        "mixed_precision: bf16", "use_cpu: true", "debug: false", "same_network: true"}) {
    EXPECT_NE(written.find(expected), std::string::npos) << expected << "\n" << written;
  }
  // And it loads back.
  EXPECT_EQ(run_command({ACCEL_BIN, "env", "--config_file", path}).exit_code, 0);
  fs::remove_all(dir);
}

// Input that ends before the first answer answered nothing: no config is written (it wrote a
// 2-process config of defaults). One empty line takes the defaults, as a user pressing Enter.
TEST(Config, QuestionsWithNoAnswersWriteNothing) {
  const auto dir = accel_test::make_temp_dir("no-answers");
  const auto path = dir + "/config.yaml";
  auto result = run_command(
      {"/bin/sh", "-c", std::string(ACCEL_BIN) + " config --config_file " + path + " </dev/null"});
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.err.find("accel: error: no answers: the input ended before the first question "
                            "was answered, so no config was written"),
            std::string::npos)
      << result.err;
  EXPECT_FALSE(fs::exists(path));
  result =
      run_command({"/bin/sh", "-c",
                   "printf '\\n' | " + std::string(ACCEL_BIN) + " config --config_file " + path});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(read(path).find("num_processes: 2"), std::string::npos) << read(path);
  fs::remove_all(dir);
}

} // namespace
