// `accel launch` and `accel test`, run as a user runs them.
#include "job_probes.h"
#include "run_command.h"
#include "worker_group.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include <arpa/inet.h>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace {

using accel_test::alive;
using accel_test::read_pids;
using accel_test::run_command;
using accel_test::running;
using accel_test::wait_until;
using accel_test::write_pid;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// No default config from the user's home may leak into these tests.
const std::map<std::string, std::string> kIsolated = {{"HF_HOME", "/nonexistent-accel-test"}};

std::vector<std::string> launch(std::vector<std::string> args) {
  args.insert(args.begin(), {ACCEL_BIN, "launch"});
  return args;
}

TEST(Launch, WorkersGetTheirRanksAndLinesArePrefixed) {
  const auto result =
      run_command(launch({"--num_processes", "2", "/bin/sh", "-c",
                          "echo $RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $GROUP_RANK "
                          "$MASTER_ADDR $OMP_NUM_THREADS $ACCELERATE_MIXED_PRECISION"}),
                  kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank0] 0/2 0/2 0 127.0.0.1 1 no\n"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank1] 1/2 1/2 0 127.0.0.1 1 no\n"), std::string::npos) << result.out;
}

TEST(Launch, ArgumentsPassThroughUntouched) {
  const auto result = run_command(
      launch({"--num-processes", "1", "/bin/echo", "a  b", "$HOME", "--num_processes", "'q'"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] a  b $HOME --num_processes 'q'\n");
}

TEST(Launch, ProgramsAreFoundInPathAndMissingOnesAreAnError) {
  EXPECT_EQ(run_command(launch({"true"}), kIsolated).exit_code, 0);
  const auto missing = run_command(launch({"no-such-program-accel"}), kIsolated);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("cannot run 'no-such-program-accel': not found in PATH"),
            std::string::npos)
      << missing.err;
}

TEST(Launch, LinesAreNeverInterleavedMidLine) {
  // Each worker writes long lines in small pieces; every console line must be one whole line.
  const auto result = run_command(
      launch({"--num_processes", "2", "/bin/sh", "-c",
              "for i in 1 2 3 4 5 6 7 8; do printf 'x%.0s' $(seq 200); printf '\\n'; done"}),
      kIsolated);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::istringstream lines(result.out);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_EQ(line.size(), std::string("[rankN] ").size() + 200) << line;
  }
  EXPECT_EQ(count, 16);
}

TEST(Launch, AFailingWorkerStopsTheOthersAndIsNamed) {
  const auto dir = accel_test::make_temp_dir("fail");
  const auto start = std::chrono::steady_clock::now();
  const auto result =
      run_command(launch({"--num_processes", "2", "/bin/sh", "-c",
                          write_pid(dir) + "; if [ $RANK = 1 ]; then echo 'out of cheese' >&2; "
                                           "exit 3; fi; exec sleep 300"}),
                  kIsolated);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("rank 1 exited with code 3"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("| out of cheese"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("rank 0 was"), std::string::npos) << "only the root cause is listed";
  for (pid_t pid : read_pids(dir)) {
    EXPECT_TRUE(wait_until([&] { return !alive(pid); })) << "worker " << pid << " outlived";
  }
  fs::remove_all(dir);
}

TEST(Launch, SignalsToTheLauncherReachEveryWorker) {
  const auto dir = accel_test::make_temp_dir("signal");
  accelerate::launch::WorkerSpec spec;
  spec.argv =
      launch({"--num_processes", "2", "/bin/sh", "-c", write_pid(dir) + "; exec sleep 300"});
  spec.env = kIsolated;
  spec.capture_output = true;
  std::string err;
  accelerate::launch::WorkerGroup launcher({spec}, [&](int, int stream, std::string_view chunk) {
    if (stream == 2) {
      err.append(chunk);
    }
  });
  ASSERT_TRUE(wait_until([&] { return read_pids(dir).size() == 2; }));
  const auto workers = read_pids(dir);
  launcher.signal_all(SIGTERM);
  const auto exit = launcher.wait(60s)[0];
  EXPECT_EQ(exit.exit_code, 128 + SIGTERM) << err;
  for (pid_t pid : workers) {
    EXPECT_TRUE(wait_until([&] { return !alive(pid); })) << "worker " << pid << " outlived";
  }
  fs::remove_all(dir);
}

TEST(Launch, NoWorkerOutlivesAKilledLauncher) {
  const auto dir = accel_test::make_temp_dir("kill");
  accelerate::launch::WorkerSpec spec;
  spec.argv =
      launch({"--num_processes", "2", "/bin/sh", "-c", write_pid(dir) + "; exec sleep 300"});
  spec.env = kIsolated;
  spec.capture_output = true;
  accelerate::launch::WorkerGroup launcher({spec});
  ASSERT_TRUE(wait_until([&] { return read_pids(dir).size() == 2; }));
  const auto workers = read_pids(dir);
  launcher.signal_all(SIGKILL); // no chance to clean up: the kernel must do it
  launcher.wait(60s);
  for (pid_t pid : workers) {
    EXPECT_TRUE(wait_until([&] { return !alive(pid); })) << "worker " << pid << " outlived";
  }
  fs::remove_all(dir);
}

TEST(Launch, NothingAWorkerStartedOutlivesAKilledLauncher) {
  // Each worker starts a child of its own and records its pid, and the launcher's ($PPID).
  const auto dir = accel_test::make_temp_dir("kill-grandchildren");
  accelerate::launch::WorkerSpec spec;
  spec.argv = launch({"--num_processes", "2", "/bin/sh", "-c",
                      "echo $PPID > " + dir + "/launcher; sleep 300 & echo $! > " + dir +
                          "/$RANK.tmp && mv " + dir + "/$RANK.tmp " + dir + "/$RANK.pid; wait"});
  spec.env = kIsolated;
  spec.capture_output = true;
  accelerate::launch::WorkerGroup harness({spec});
  ASSERT_TRUE(wait_until([&] { return read_pids(dir).size() == 2; }));
  const auto children = read_pids(dir);
  pid_t launcher = 0;
  std::ifstream(dir + "/launcher") >> launcher;
  ASSERT_GT(launcher, 0);
  kill(launcher, SIGKILL); // the launcher alone, with no chance to clean up
  harness.wait(60s);
  for (pid_t pid : children) {
    EXPECT_TRUE(wait_until([&] { return !running(pid); }))
        << "a worker's child " << pid << " outlived the launcher";
  }
  fs::remove_all(dir);
}

TEST(Launch, ExecFailuresSayWhy) {
  const auto dir = accel_test::make_temp_dir("exec-failures");
  const auto no_shebang = dir + "/no-shebang";
  std::ofstream(no_shebang) << "echo hello\n";
  const auto missing_interpreter = dir + "/missing-interpreter";
  std::ofstream(missing_interpreter) << "#!/nonexistent/accel-interpreter\necho hello\n";
  fs::permissions(no_shebang, fs::perms::owner_all);
  fs::permissions(missing_interpreter, fs::perms::owner_all);

  auto result = run_command(launch({no_shebang}), kIsolated);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("| accelerate: cannot execute " + no_shebang +
                            ": not an executable format (a script without #!?)"),
            std::string::npos)
      << result.err;
  result = run_command(launch({missing_interpreter}), kIsolated);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("| accelerate: cannot execute " + missing_interpreter +
                            ": no such file or directory (for a script: the interpreter on its "
                            "#! line)"),
            std::string::npos)
      << result.err;
  fs::remove_all(dir);
}

TEST(Launch, MaxRestartsRestartsTheWholeJob) {
  const auto result = run_command(
      launch({"--num_processes", "2", "--max_restarts", "2", "/bin/sh", "-c",
              "echo attempt $ACCELERATE_RESTART_COUNT; [ $ACCELERATE_RESTART_COUNT = 1 ]"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("restarting every worker (restart 1 of 2)"), std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("[rank1] attempt 1"), std::string::npos) << result.out;
  // Without restarts left, the failure stands.
  EXPECT_EQ(run_command(launch({"--max_restarts", "1", "false"}), kIsolated).exit_code, 1);
}

TEST(Launch, LogDirKeepsOneLogPerRankAndOnlyRankFilters) {
  const auto dir = accel_test::make_temp_dir("logs");
  const auto result = run_command(launch({"--num_processes", "2", "--log_dir", dir, "--only_rank",
                                          "0", "/bin/sh", "-c", "echo hello from $RANK"}),
                                  kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] hello from 0\n");
  for (int rank : {0, 1}) {
    const auto log = dir + "/rank" + std::to_string(rank) + ".log";
    std::ifstream in(log);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "hello from " + std::to_string(rank));
    // Only the user may read what the program printed.
    EXPECT_EQ(fs::status(log).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write)
        << log;
  }
  fs::remove_all(dir);
}

// --log_dir problems are named with the option and the path, before any worker starts; a log
// is never written through a symbolic link (one left there could point anywhere).
TEST(Launch, LogDirProblemsAreNamedAndLinksAreNotFollowed) {
  const auto dir = accel_test::make_temp_dir("log-dir-problems");
  const auto file = dir + "/a-file";
  std::ofstream(file) << "not a directory\n";
  auto result = run_command(
      launch({"--log_dir", file, "/bin/sh", "-c", "echo started > " + dir + "/started"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("accel: error: --log_dir " + file + ": cannot create the directory: "),
            std::string::npos)
      << result.err;

  const auto logs = dir + "/logs";
  fs::create_directories(logs);
  const auto target = dir + "/precious";
  std::ofstream(target) << "keep me\n";
  fs::create_symlink(target, logs + "/rank0.log");
  result = run_command(
      launch({"--log_dir", logs, "/bin/sh", "-c", "echo started > " + dir + "/started"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("accel: error: --log_dir: cannot write the log " + logs +
                            "/rank0.log: it is a symbolic link"),
            std::string::npos)
      << result.err;
  std::ifstream in(target);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");
  EXPECT_FALSE(fs::exists(dir + "/started")) << "a worker started";
  fs::remove_all(dir);
}

// A worker's exit is noticed when it happens, not at the next check: with --monitor_interval
// 3600 a worker that closed its output and then exited kept the launcher waiting an hour.
TEST(Launch, AnExitIsNoticedAtOnceWhateverTheMonitorInterval) {
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_command(
      launch({"--monitor_interval", "3600", "/bin/sh", "-c", "exec >/dev/null 2>&1; sleep 1"}),
      kIsolated, /*timeout_s=*/60);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
}

// A rank the job does not have would show nothing: an error before anything starts.
TEST(Launch, OnlyRankMustBeARankOfTheJob) {
  auto result = run_command(
      launch({"--num_processes", "2", "--only_rank", "5", "/bin/sh", "-c", "echo started"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.out, "");
  EXPECT_NE(result.err.find("accel: error: --only_rank 5 is not a rank of this job (ranks 0 to 1)"),
            std::string::npos)
      << result.err;
  result = run_command(
      launch({"--num_processes", "2", "--only_rank", "1", "/bin/sh", "-c", "echo rank $RANK"}),
      kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank1] rank 1\n");
}

// Holds a port on 127.0.0.1 for the test's duration.
struct BusyPort {
  BusyPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
    listen(fd, 1);
    socklen_t length = sizeof(address);
    getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~BusyPort() { close(fd); }
  int fd;
  int port;
};

TEST(Launch, ABusyPortIsReplacedOnOneMachine) {
  BusyPort busy;
  const auto result = run_command(launch({"--num_processes", "2", "--main_process_port",
                                          std::to_string(busy.port), ACCEL_SELFTEST_BIN}),
                                  kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("port " + std::to_string(busy.port) + " is busy; using port"),
            std::string::npos)
      << result.err;
  EXPECT_NE(result.out.find("[rank0] training equivalence (N processes at batch B == 1 process "
                            "at N*B): ok"),
            std::string::npos)
      << result.out;
}

// A training helper that makes its own Accelerator, called three times: each call after the
// first shares the process group of the first (a second rendezvous would need the listening
// socket rank 0 inherited from `accel launch`, which closed with the first store).
TEST(Launch, AcceleratorsMadeOneAfterAnotherShareTheJob) {
  const auto result =
      run_command(launch({"--num_processes", "2", HELPER_PER_CALL_PROGRAM}), kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  for (const char *lr : {"lr 0.01", "lr 0.02", "lr 0.05"}) {
    EXPECT_NE(result.out.find(std::string("[rank0] ") + lr + ": weight "), std::string::npos)
        << result.out;
  }
  EXPECT_NE(result.out.find("on all 2 processes"), std::string::npos) << result.out;
}

TEST(Launch, ABusyPortIsAnErrorAcrossMachines) {
  BusyPort busy;
  const auto result =
      run_command(launch({"--num_processes", "2", "--num_machines", "2", "--machine_rank", "0",
                          "--main_process_ip", "127.0.0.1", "--main_process_port",
                          std::to_string(busy.port), "true"}),
                  kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("choose another --main_process_port"), std::string::npos) << result.err;
}

// Machine 0 hosts the rendezvous, so --main_process_ip must be one of its addresses: another
// is named as such (it was told to choose another port).
TEST(Launch, AMainAddressOfAnotherMachineIsNamedOnMachine0) {
  std::ifstream nonlocal("/proc/sys/net/ipv4/ip_nonlocal_bind");
  if (int allowed = 0; nonlocal >> allowed && allowed != 0) {
    GTEST_SKIP() << "net.ipv4.ip_nonlocal_bind is on: any address binds here";
  }
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): documentation only, no machine's address.
  const auto result =
      run_command(launch({"--num_processes", "2", "--num_machines", "2", "--machine_rank", "0",
                          "--main_process_ip", "192.0.2.1", "--rdzv_timeout", "5", "true"}),
                  kIsolated);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--main_process_ip 192.0.2.1 is not an address of this machine"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("choose another --main_process_port"), std::string::npos) << result.err;
}

TEST(Launch, AMissingMachineTimesOutNamingTheRanks) {
  // Machine 0 of 2, and machine 1 never starts: ranks 2 and 3 never arrive.
  const auto result =
      run_command(launch({"--num_processes", "4", "--num_machines", "2", "--machine_rank", "0",
                          "--main_process_ip", "127.0.0.1", "--main_process_port",
                          std::to_string(accelerate::launch::free_loopback_port()),
                          "--rdzv_timeout", "3", ACCEL_SELFTEST_BIN}),
                  kIsolated);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("never arrived: rank(s) 2, 3"), std::string::npos) << result.err;
}

TEST(Launch, AForeignServiceOnTheMainPortFailsWithinTheTimeout) {
  // Something else owns the main port: it accepts connections and never answers (as an HTTP
  // server does with bytes that are not a request). Machine 1's workers must give up after
  // --rdzv_timeout, naming the address, instead of waiting forever.
  BusyPort foreign;
  const auto start = std::chrono::steady_clock::now();
  const auto result =
      run_command(launch({"--num_processes", "2", "--num_machines", "2", "--machine_rank", "1",
                          "--main_process_ip", "127.0.0.1", "--main_process_port",
                          std::to_string(foreign.port), "--rdzv_timeout", "3", ACCEL_SELFTEST_BIN}),
                  kIsolated, 60);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("| accelerate: rank 1 could not reach the rendezvous store at "
                            "127.0.0.1:" +
                            std::to_string(foreign.port) +
                            " within 3.0 s: something accepts "
                            "connections there but does not answer"),
            std::string::npos)
      << result.err;
}

TEST(Launch, NothingListeningOnTheMainPortIsReportedInTheSummary) {
  // The runtime's own message, not a C++ backtrace, is what the failure summary shows.
  const int port = accelerate::launch::free_loopback_port();
  const auto result =
      run_command(launch({"--num_processes", "2", "--num_machines", "2", "--machine_rank", "1",
                          "--main_process_ip", "127.0.0.1", "--main_process_port",
                          std::to_string(port), "--rdzv_timeout", "2", ACCEL_SELFTEST_BIN}),
                  kIsolated, 60);
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const auto failed = result.err.find("accel: the job failed");
  ASSERT_NE(failed, std::string::npos) << result.err;
  const auto summary = result.err.substr(failed);
  EXPECT_NE(summary.find("| accelerate: rank 1 could not reach the rendezvous store at 127.0.0.1:" +
                         std::to_string(port) + " within 2.0 s"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(summary.find("frame #"), std::string::npos) << "a backtrace in the summary:\n"
                                                        << summary;
}

TEST(Launch, TwoLaunchersFormOneJob) {
  // Two "machines" on loopback: each launcher starts its half of a 4-process job.
  const int port = accelerate::launch::free_loopback_port();
  std::vector<accelerate::launch::WorkerSpec> machines(2);
  std::string outputs[2];
  for (int m = 0; m < 2; ++m) {
    machines[m].argv = launch({"--num_processes", "4", "--num_machines", "2", "--machine_rank",
                               std::to_string(m), "--main_process_ip", "127.0.0.1",
                               "--main_process_port", std::to_string(port), ACCEL_SELFTEST_BIN});
    machines[m].env = kIsolated;
    machines[m].capture_output = true;
  }
  accelerate::launch::WorkerGroup group(
      machines, [&](int m, int, std::string_view chunk) { outputs[m].append(chunk); });
  for (const auto &exit : group.wait(120s)) {
    EXPECT_TRUE(exit.succeeded()) << outputs[0] << outputs[1];
  }
  EXPECT_NE(outputs[0].find("[rank0] accel self-test on 4 process(es)"), std::string::npos)
      << outputs[0];
  EXPECT_NE(outputs[0].find("[rank0] training equivalence"), std::string::npos) << outputs[0];
}

// The same binary under other launchers: their variables, set by hand as mpirun and srun
// would, with no accel launch involved.
void expect_selftest_job(const std::vector<std::map<std::string, std::string>> &environments) {
  std::vector<accelerate::launch::WorkerSpec> specs;
  for (const auto &env : environments) {
    accelerate::launch::WorkerSpec spec;
    spec.argv = {ACCEL_SELFTEST_BIN};
    spec.env = env;
    spec.capture_output = true;
    specs.push_back(spec);
  }
  std::string output[2];
  accelerate::launch::WorkerGroup group(
      specs, [&](int rank, int, std::string_view chunk) { output[rank].append(chunk); });
  for (const auto &exit : group.wait(120s)) {
    EXPECT_TRUE(exit.succeeded()) << output[exit.rank];
  }
  EXPECT_NE(output[0].find("accel self-test on 2 process(es)"), std::string::npos) << output[0];
  EXPECT_NE(output[0].find("training equivalence (N processes at batch B == 1 process at N*B): ok"),
            std::string::npos)
      << output[0];
}

TEST(OtherLaunchers, OpenMpiVariables) {
  const auto port = std::to_string(accelerate::launch::free_loopback_port());
  std::vector<std::map<std::string, std::string>> environments;
  for (int rank = 0; rank < 2; ++rank) {
    environments.push_back({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                            {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"MASTER_PORT", port}});
  }
  expect_selftest_job(environments);
}

TEST(OtherLaunchers, SlurmVariables) {
  const auto port = std::to_string(accelerate::launch::free_loopback_port());
  std::vector<std::map<std::string, std::string>> environments;
  for (int rank = 0; rank < 2; ++rank) {
    environments.push_back({{"SLURM_PROCID", std::to_string(rank)},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_LOCALID", std::to_string(rank)},
                            {"SLURM_NTASKS_PER_NODE", "2"},
                            {"SLURM_JOB_NODELIST", "127.0.0.[1]"},
                            {"MASTER_PORT", port}});
  }
  expect_selftest_job(environments);
}

TEST(AccelTest, ReportsSuccessAndTheGradientTransport) {
  auto result = run_command({ACCEL_BIN, "test", "--num_processes", "2"}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("Test is a success!"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("[rank0] gradients are summed through: shared memory\n"),
            std::string::npos)
      << result.out;

  auto gloo = kIsolated;
  gloo["ACCELERATE_SHARED_MEMORY"] = "false";
  result = run_command({ACCEL_BIN, "test", "--num_processes", "2"}, gloo);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank0] gradients are summed through: gloo (not shared memory: "),
            std::string::npos)
      << result.out;
}

// Every valid setting trains correctly: the self-test trains as a program written for accel
// does (accumulate, autocast, accelerator.step) and compares with one process trained alike.
class AccelTestSettings : public ::testing::TestWithParam<const char *> {};

TEST_P(AccelTestSettings, Pass) {
  const auto dir = accel_test::make_temp_dir("selftest-settings");
  const auto config = dir + "/config.yaml";
  std::ofstream(config) << GetParam() << "\n";
  const auto result =
      run_command({ACCEL_BIN, "test", "--num_processes", "2", "--config_file", config}, kIsolated);
  EXPECT_EQ(result.exit_code, 0) << GetParam() << "\n" << result.out << result.err;
  EXPECT_NE(result.out.find("[rank0] training equivalence (N processes at batch B == 1 process "
                            "at N*B): ok"),
            std::string::npos)
      << result.out;
  // The settings line names the comm hook; under PowerSGD the self-test also makes it compress
  // (check_training's few steps run before start_powersgd_iter, so they are exact).
  const std::string settings = GetParam();
  const auto hook = settings.find("comm_hook: ");
  if (hook != std::string::npos) {
    const auto value = settings.substr(hook + 11, settings.find('\n', hook) - hook - 11);
    EXPECT_NE(result.out.find(", comm hook " + value + "\n"), std::string::npos) << result.out;
  }
  if (settings.find("powersgd") != std::string::npos) {
    EXPECT_NE(result.out.find("[rank0] PowerSGD (compressed from the first step, processes agree, "
                              "loss falls): ok"),
              std::string::npos)
        << result.out;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Launch, AccelTestSettings,
    ::testing::Values("mixed_precision: fp16", "mixed_precision: bf16",
                      "gradient_accumulation_steps: 2", "gradient_accumulation_steps: 4",
                      "mixed_precision: fp16\ngradient_accumulation_steps: 4",
                      "mixed_precision: bf16\ngradient_accumulation_steps: 2", "comm_hook: fp16",
                      "comm_hook: bf16", "comm_hook: powersgd",
                      "comm_hook: powersgd\npowersgd_rank: 4\nmixed_precision: bf16"),
    // "fp16", "accumulation4", "fp16_accumulation4", "hook_powersgd_rank4_bf16": names fit for
    // test reports.
    [](const ::testing::TestParamInfo<const char *> &info) {
      std::string name;
      std::istringstream lines(info.param);
      for (std::string line; std::getline(lines, line);) {
        const auto value = line.substr(line.find(": ") + 2);
        const auto key = line.substr(0, line.find(':'));
        name += (name.empty() ? "" : "_") + (key == "mixed_precision" ? value
                                             : key == "gradient_accumulation_steps"
                                                 ? "accumulation" + value
                                             : key == "comm_hook" ? "hook_" + value
                                                                  : "rank" + value);
      }
      return name;
    });

TEST(AccelCli, VersionAndUsageErrors) {
  const auto version = run_command({ACCEL_BIN, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("accel 0.1.0\nLibTorch ", 0), 0u) << version.out;
  EXPECT_NE(run_command({ACCEL_BIN, "launch", "--num_processes", "zero", "true"}).exit_code, 0);
  EXPECT_NE(run_command({ACCEL_BIN, "launch"}).exit_code, 0);
  const auto uneven = run_command(launch({"--num_processes", "3", "--num_machines", "2",
                                          "--main_process_ip", "127.0.0.1", "true"}),
                                  kIsolated);
  EXPECT_EQ(uneven.exit_code, 2);
  EXPECT_NE(uneven.err.find("is not a multiple of --num_machines"), std::string::npos);
}

} // namespace
