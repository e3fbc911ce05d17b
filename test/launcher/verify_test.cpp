// `accel verify`, run as a user runs it: the real binary on real programs in real processes
// (docs/launcher.md, "accel verify"). The LibTorch programs are test/runtime/programs/
// verify_classifier*.cpp; shell one-liners stand in where only what is printed matters.
#include "job_probes.h"
#include "run_command.h"
#include "worker_group.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

namespace {

using accel_test::alive;
using accel_test::read_pids;
using accel_test::run_command;
using accel_test::wait_until;
using accel_test::write_pid;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// No default config from the user's home may leak into these tests.
const std::map<std::string, std::string> kIsolated = {{"HF_HOME", "/nonexistent-accel-test"}};

std::vector<std::string> verify(std::vector<std::string> args) {
  args.insert(args.begin(), {ACCEL_BIN, "verify"});
  return args;
}

// Two shell programs: the original runs `original`, the rewrite `rewrite` (sh -c words).
std::vector<std::string> verify_shell(const std::string &original, const std::string &rewrite,
                                      std::vector<std::string> options = {}) {
  options.insert(options.end(), {"--original_args", "-c '" + original + "'", "--rewritten_args",
                                 "-c '" + rewrite + "'", "/bin/sh", "/bin/sh"});
  return verify(options);
}

std::string describe(const accel_test::CommandResult &result) {
  return "exit " + std::to_string(result.exit_code) + "\nstdout:\n" + result.out + "\nstderr:\n" +
         result.err;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(Verify, ACorrectRewriteAgreesWithSplitBatchesAndTheSameArguments) {
  const auto result = run_command(verify({VERIFY_ORIGINAL, VERIFY_REWRITE, "--", "16"}), kIsolated);
  ASSERT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_EQ(result.out, "accel verify: 3 lines agree (rtol 0.001, atol 1e-06), original on 1 "
                        "process, rewrite on 2 with split_batches\n");
  EXPECT_FALSE(contains(result.err, "other processes printed")) << result.err;
}

TEST(Verify, ALastBatchPaddedByEvenBatchesShowsAsADifference) {
  // 96 samples in global batches of 20: the last batch of 16 is filled to 20 from the epoch's
  // start, so the rewrite trains on 100 samples (docs/launcher.md, "where it cannot be exact").
  const auto result = run_command(verify({VERIFY_ORIGINAL, VERIFY_REWRITE, "--", "20"}), kIsolated);
  ASSERT_EQ(result.exit_code, 1) << describe(result);
  EXPECT_TRUE(contains(result.out, "samples 96")) << result.out;
  EXPECT_TRUE(contains(result.out, "samples 100")) << result.out;
}

TEST(Verify, ARewriteThatStopsIsNamedWithItsMessage) {
  // split_batches needs a batch size the processes can share: the runtime stops the rewrite.
  const auto result = run_command(verify({VERIFY_ORIGINAL, VERIFY_REWRITE, "--", "15"}), kIsolated);
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  EXPECT_TRUE(contains(result.err, "accel: the rewrite (2 processes) failed")) << result.err;
  EXPECT_TRUE(contains(result.err, "    |   what():  accelerate: prepare_data_loader: "
                                   "split_batches gives each of the 2 processes an equal part"))
      << result.err;
  EXPECT_TRUE(contains(result.err, "accel verify: nothing was compared: the rewrite (2 "
                                   "processes) failed"))
      << result.err;
  EXPECT_EQ(result.out, "");
}

TEST(Verify, ACorrectRewriteAgreesShardedWhenTheOriginalGetsNTimesTheBatch) {
  const auto result =
      run_command(verify({"--no_split_batches", "--original_args", "16", "--rewritten_args", "8",
                          VERIFY_ORIGINAL, VERIFY_REWRITE}),
                  kIsolated);
  ASSERT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_EQ(result.out, "accel verify: 3 lines agree (rtol 0.001, atol 1e-06), original on 1 "
                        "process, rewrite on 2 with sharded batches\n");
  // The rewrite prints on its main process only.
  EXPECT_FALSE(contains(result.err, "other processes printed")) << result.err;
}

TEST(Verify, AStatisticCombinedWronglyIsCaughtAndMarked) {
  // In both loader modes.
  const auto split =
      run_command(verify({VERIFY_ORIGINAL, VERIFY_UNREDUCED_REWRITE, "--", "16"}), kIsolated);
  EXPECT_EQ(split.exit_code, 1) << describe(split);
  const auto result =
      run_command(verify({"--no_split_batches", "--original_args", "16", "--rewritten_args", "8",
                          VERIFY_ORIGINAL, VERIFY_UNREDUCED_REWRITE}),
                  kIsolated);
  ASSERT_EQ(result.exit_code, 1) << describe(result);
  EXPECT_TRUE(contains(result.out, "accel verify: the outputs differ in 3 of 3 lines; the first "
                                   "difference is marked.\n"))
      << result.out;
  EXPECT_TRUE(contains(result.out, "\n> 1 epoch 1 loss ")) << result.out;
  EXPECT_TRUE(contains(result.out, "| > 1 epoch 1 loss ")) << result.out;
  // The loss is the second number of the line; the epoch, the first, agrees.
  EXPECT_TRUE(contains(result.out, "Line 1, number 2 on the line: the original printed "))
      << result.out;
  EXPECT_TRUE(contains(result.out, "allowed: ")) << result.out;
}

TEST(Verify, ShardedWithTheSameArgumentsTheGlobalBatchDiffersAndANoteSaysSo) {
  const auto result = run_command(
      verify({"--no_split_batches", VERIFY_ORIGINAL, VERIFY_REWRITE, "--", "16"}), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
  EXPECT_TRUE(contains(result.err, "accel verify: note: with --no_split_batches each of the 2 "
                                   "processes takes whole batches"))
      << result.err;
}

TEST(Verify, OnlyTheMainProcessStdoutIsCompared) {
  // Every rank prints the line; stderr differs by rank and is not compared.
  const auto result = run_command(verify({"/bin/sh", "/bin/sh", "--", "-c",
                                          "echo loss 0.5; echo rank $RANK of $WORLD_SIZE >&2"}),
                                  kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_EQ(result.out, "accel verify: 1 line agrees (rtol 0.001, atol 1e-06), original on 1 "
                        "process, rewrite on 2 with split_batches\n");
  EXPECT_TRUE(contains(result.err, "accel verify: note: the rewrite's other processes printed 1 "
                                   "line(s) to stdout as well (not compared)"))
      << result.err;
}

TEST(Verify, TheRewriteSplitsBatchesUnlessToldNotToWhateverTheEnvironmentSays) {
  const std::string shown = "echo split=$ACCELERATE_SPLIT_BATCHES";
  auto environment = kIsolated;
  environment["ACCELERATE_SPLIT_BATCHES"] = "false";
  auto result = run_command(verify_shell("echo split=true", shown), environment);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  environment["ACCELERATE_SPLIT_BATCHES"] = "true";
  result =
      run_command(verify_shell("echo split=false", shown, {"--no_split_batches"}), environment);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  result =
      run_command(verify_shell("echo split=false", shown, {"--split_batches=false"}), environment);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  // And a check that can fail: the default is not "false".
  result = run_command(verify_shell("echo split=false", shown), environment);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
}

TEST(Verify, LaunchSettingsReachTheRewrite) {
  const auto result = run_command(
      verify_shell("echo 3 bf16 4 true [] 1", // what the rewrite's main process must see
                   "echo $WORLD_SIZE $ACCELERATE_MIXED_PRECISION "
                   "$ACCELERATE_GRADIENT_ACCUMULATION_STEPS $ACCELERATE_USE_CPU "
                   "[$CUDA_VISIBLE_DEVICES] $OMP_NUM_THREADS",
                   {"--num_processes", "3", "--mixed_precision", "bf16",
                    "--gradient_accumulation_steps", "4", "--cpu", "--num_cpu_threads_per_process",
                    "1"}),
      [] {
        auto environment = kIsolated;
        environment["CUDA_VISIBLE_DEVICES"] = "0"; // --cpu hides it from both sides
        return environment;
      }());
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_TRUE(contains(result.out, "rewrite on 3 with split_batches")) << result.out;
}

TEST(Verify, CpuHidesTheGpusFromTheOriginalToo) {
  auto environment = kIsolated;
  environment["CUDA_VISIBLE_DEVICES"] = "0";
  const std::string original = "echo gpus=[$CUDA_VISIBLE_DEVICES]";
  auto result = run_command(verify_shell(original, "echo gpus=[]", {"--cpu"}), environment);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  result = run_command(verify_shell(original, "echo gpus=[]"), environment);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
}

TEST(Verify, OnlyANamedConfigFileIsRead) {
  const auto dir = accel_test::make_temp_dir("verify-config");
  fs::create_directories(dir + "/accelerate");
  std::ofstream(dir + "/accelerate/default_config.yaml") << "mixed_precision: fp16\n";
  const std::string shown = "echo $ACCELERATE_MIXED_PRECISION";
  // Accelerate's default file (here under HF_HOME) does not change what verify checks...
  auto result = run_command(verify_shell("echo no", shown), {{"HF_HOME", dir}});
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  // ... a file named on the command line does.
  result = run_command(
      verify_shell("echo fp16", shown, {"--config_file", dir + "/accelerate/default_config.yaml"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  fs::remove_all(dir);
}

TEST(Verify, LinesMustBeAsMany) {
  const auto result =
      run_command(verify_shell("echo a; echo b; echo c", "echo a; echo b"), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
  EXPECT_TRUE(contains(result.out, "The original printed 3 lines, the rewrite 2.\n")) << result.out;
  EXPECT_TRUE(contains(result.out, "> 3 c")) << result.out;
  EXPECT_TRUE(contains(result.out, "| >   (its output ends here)")) << result.out;
}

TEST(Verify, IgnoreDropsMatchingLinesOnBothSides) {
  const std::string original = "echo loss 0.5; echo took 5 ms";
  const std::string rewrite = "echo took 9 ms; echo loss 0.5; echo took 3 ms";
  auto result = run_command(verify_shell(original, rewrite), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
  result =
      run_command(verify_shell(original, rewrite, {"--ignore", "^took [0-9]+ ms$"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  EXPECT_TRUE(contains(result.out, "1 line agrees (rtol 0.001, atol 1e-06), original on 1 "
                                   "process, rewrite on 2 with split_batches; --ignore dropped 1 "
                                   "line of the original, 2 of the rewrite"))
      << result.out;
  // Repeatable: each pattern drops its own lines.
  result = run_command(verify_shell("echo a; echo t 1; echo u 1", "echo a; echo t 2; echo u 2",
                                    {"--ignore", "^t ", "--ignore=^u "}),
                       kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
}

TEST(Verify, NumbersAgreeWithinTheToleranceAndNoFurther) {
  // loss 1.000000: allowed 1e-6 + 1e-3 x 1 + 1e-6 (the last printed digit) = 0.001002.
  const std::string original = "echo loss 1.000000";
  auto result = run_command(verify_shell(original, "echo loss 1.001000"), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  result = run_command(verify_shell(original, "echo loss 1.001100"), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
  EXPECT_TRUE(contains(result.out, "They differ by 0.0011; allowed: 0.001 = atol 1e-06 + rtol "
                                   "0.001 x 1.000000\n  + 1e-06 (one unit of the last digit "
                                   "printed)."))
      << result.out;
  result = run_command(verify_shell(original, "echo loss 1.001100", {"--rtol", "2e-3"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  // Near zero the absolute tolerance decides.
  const std::string zero = "echo grad 0.000000000";
  result = run_command(verify_shell(zero, "echo grad 0.000001500"), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
  result = run_command(verify_shell(zero, "echo grad 0.000001500", {"--atol", "2e-6"}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  // Whole numbers get no allowance for rounding.
  result = run_command(verify_shell("echo batches 3", "echo batches 4"), kIsolated);
  EXPECT_EQ(result.exit_code, 1) << describe(result);
}

TEST(Verify, ASideThatFailsExits2AndIsNamedWithItsStderr) {
  const auto dir = accel_test::make_temp_dir("verify-fail");
  // The original fails: the rewrite never runs.
  auto result = run_command(
      verify_shell("echo bad input >&2; exit 3", "echo ran > " + dir + "/rewrite-ran"), kIsolated);
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  EXPECT_TRUE(contains(result.err, "accel: the original (1 process) failed")) << result.err;
  EXPECT_TRUE(contains(result.err, "  rank 0 exited with code 3\n    | bad input\n")) << result.err;
  EXPECT_TRUE(contains(result.err, "accel verify: nothing was compared: the original (1 process) "
                                   "failed"))
      << result.err;
  EXPECT_FALSE(fs::exists(dir + "/rewrite-ran"));
  EXPECT_EQ(result.out, "");

  // The rewrite crashes on rank 1.
  result = run_command(
      verify_shell("echo x", "echo x; [ $RANK = 1 ] && echo segfault coming >&2 && kill -SEGV $$; "
                             "sleep 30"),
      kIsolated);
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  EXPECT_TRUE(contains(result.err, "accel: the rewrite (2 processes) failed")) << result.err;
  EXPECT_TRUE(contains(result.err, "rank 1 was killed by signal 11")) << result.err;
  EXPECT_TRUE(contains(result.err, "    | segfault coming")) << result.err;
  EXPECT_TRUE(contains(result.err, "nothing was compared: the rewrite (2 processes) failed"))
      << result.err;

  // A program that cannot start.
  const auto no_shebang = dir + "/no-shebang";
  std::ofstream(no_shebang) << "echo hello\n";
  fs::permissions(no_shebang, fs::perms::owner_all);
  result = run_command(verify({"/bin/echo", no_shebang, "--", "x"}), kIsolated);
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  EXPECT_TRUE(contains(result.err, "not an executable format (a script without #!?)"))
      << result.err;
  EXPECT_TRUE(contains(result.err, "the rewrite (2 processes) failed")) << result.err;

  // One that is not there stops verify before either side runs.
  result = run_command(
      verify({"/bin/sh", dir + "/missing", "--", "-c", "echo ran > " + dir + "/original-ran"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  EXPECT_TRUE(contains(result.err,
                       "accel: error: REWRITTEN: cannot run '" + dir + "/missing': no such file"))
      << result.err;
  EXPECT_FALSE(fs::exists(dir + "/original-ran"));
  fs::remove_all(dir);
}

TEST(Verify, BadUsageExits2WithAClearMessage) {
  const std::string sh = "/bin/sh";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "ORIGINAL is required"},
      {{sh}, "REWRITTEN is required"},
      {{"--bogus", sh, sh},
       "unknown option '--bogus' (accel verify --help lists the options; the programs' "
       "arguments go after --)"},
      {{sh, sh, "-c"}, "unknown option '-c'"},
      {{sh, sh, "x"},
       "'x' after ORIGINAL and REWRITTEN: the programs' arguments go after -- (accel verify "
       "ORIGINAL REWRITTEN -- ARGS...)"},
      {{"--rtol", "lots", sh, sh}, "--rtol: 'lots' is not a number"},
      {{"--atol=-1", sh, sh}, "--atol: '-1' is out of range (0 to 1e+300)"},
      {{"--num_processes", "0", sh, sh}, "--num_processes: '0' is out of range (1 to any)"},
      {{"--mixed_precision", "fp32", sh, sh},
       "--mixed_precision: 'fp32' is not one of no, fp16, bf16"},
      {{"--ignore", "(", sh, sh}, "--ignore: '(' is not a regular expression (ECMAScript)"},
      {{"--original_args", "'open", sh, sh}, "--original_args: a ' is not closed"},
      {{"--original_args", "1", "--rewritten_args", "2", sh, sh, "--", "x"},
       "ARGS after -- would go to neither program: --original_args and --rewritten_args replace "
       "them"},
      {{"/bin/true", "/bin/true"},
       "neither program printed a line to stdout: there is nothing to compare"},
      {{"--ignore", ".", sh, sh, "--", "-c", "echo x"},
       "neither program printed a line to stdout that --ignore kept"},
  };
  for (const auto &[args, message] : cases) {
    const auto result = run_command(verify(args), kIsolated);
    EXPECT_EQ(result.exit_code, 2) << message << "\n" << describe(result);
    EXPECT_TRUE(contains(result.err, message)) << describe(result);
    EXPECT_EQ(result.out, "") << message;
  }
}

TEST(Verify, WritesNothingWhereItRuns) {
  const auto dir = accel_test::make_temp_dir("verify-cwd");
  const auto result = run_command({"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" verify \"$2\" \"$3\"",
                                   dir, ACCEL_BIN, VERIFY_ORIGINAL, VERIFY_REWRITE},
                                  kIsolated);
  // Both programs print their usage and exit 2: verify stops, and still leaves nothing behind.
  EXPECT_EQ(result.exit_code, 2) << describe(result);
  const auto agreed = run_command(
      {"/bin/sh", "-c", "cd \"$0\" && exec \"$1\" verify /bin/echo /bin/echo -- a", dir, ACCEL_BIN},
      kIsolated);
  EXPECT_EQ(agreed.exit_code, 0) << describe(agreed);
  EXPECT_TRUE(fs::is_empty(dir)) << "verify left files in " << dir;
  fs::remove_all(dir);
}

TEST(Verify, InterruptingVerifyStopsTheRunningSideAndLeavesNoProcess) {
  const auto dir = accel_test::make_temp_dir("verify-interrupt");
  accelerate::launch::WorkerSpec spec;
  spec.argv = verify({"/bin/sh", "/bin/sh", "--", "-c", write_pid(dir) + "; exec sleep 300"});
  spec.env = kIsolated;
  spec.capture_output = true;
  std::string out, err;
  accelerate::launch::WorkerGroup verifier({spec}, [&](int, int stream, std::string_view chunk) {
    (stream == 1 ? out : err).append(chunk);
  });
  ASSERT_TRUE(wait_until([&] { return read_pids(dir).size() == 1; })); // the original runs
  const auto original = read_pids(dir);
  verifier.signal_all(SIGINT); // Ctrl-C
  const auto exit = verifier.wait(60s)[0];
  EXPECT_EQ(exit.exit_code, 128 + SIGINT) << err;
  EXPECT_TRUE(contains(err, "accel: stopped by signal 2")) << err;
  EXPECT_EQ(out, ""); // nothing compared, and the rewrite never started
  for (pid_t pid : original) {
    EXPECT_TRUE(wait_until([&] { return !alive(pid); })) << "the original " << pid << " outlived";
  }
  EXPECT_EQ(read_pids(dir).size(), 1u);
  fs::remove_all(dir);
}

} // namespace
