// Two machines for real: two network namespaces joined by a veth pair, one launcher in each,
// one job across them. Needs root (ip netns); skips with the reason otherwise.
#include "run_command.h"
#include "worker_group.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace {

using accel_test::run_command;
namespace fs = std::filesystem;

// Our own test hosts: addresses that exist only inside the namespaces this test creates.
constexpr const char *kMainAddress = "10.231.0.1";
constexpr const char *kOtherAddress = "10.231.0.2";

class TwoMachines : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root to create network namespaces";
    }
    const std::string id = std::to_string(getpid() % 100000);
    ns_[0] = "accel0-" + id;
    ns_[1] = "accel1-" + id;
    veth_[0] = "av0-" + id;
    veth_[1] = "av1-" + id;
    const std::string script =
        "set -e; ip netns add " + ns_[0] + "; ip netns add " + ns_[1] + "; ip link add " +
        veth_[0] + " type veth peer name " + veth_[1] + "; ip link set " + veth_[0] + " netns " +
        ns_[0] + "; ip link set " + veth_[1] + " netns " + ns_[1] + "; ip -n " + ns_[0] +
        " addr add " + kMainAddress + "/24 dev " + veth_[0] + "; ip -n " + ns_[1] + " addr add " +
        kOtherAddress + "/24 dev " + veth_[1] + "; for n in " + ns_[0] + " " + ns_[1] +
        "; do ip -n $n link set lo up; done; ip -n " + ns_[0] + " link set " + veth_[0] +
        " up; ip -n " + ns_[1] + " link set " + veth_[1] + " up";
    const auto result = run_command({"/bin/sh", "-c", script});
    if (result.exit_code != 0) {
      TearDown();
      GTEST_SKIP() << "cannot create network namespaces here: " << result.err;
    }
    created_ = true;
  }

  void TearDown() override {
    for (const auto &ns : ns_) {
      if (!ns.empty()) {
        run_command({"/bin/sh", "-c", "ip netns del " + ns + " 2>/dev/null; true"});
      }
    }
  }

  /// `accel launch` for machine `m` of 2, inside its namespace, with `flags` of its own.
  std::vector<std::string> launcher(int m, int port, const std::vector<std::string> &program,
                                    const std::vector<std::string> &flags = {}) {
    std::vector<std::string> argv = {"/usr/sbin/ip",
                                     "netns",
                                     "exec",
                                     ns_[m],
                                     "/usr/bin/env",
                                     "GLOO_SOCKET_IFNAME=" + veth_[m],
                                     "HF_HOME=/nonexistent-accel-test",
                                     ACCEL_BIN,
                                     "launch",
                                     "--num_processes",
                                     "4",
                                     "--num_machines",
                                     "2",
                                     "--machine_rank",
                                     std::to_string(m),
                                     "--main_process_ip",
                                     kMainAddress,
                                     "--main_process_port",
                                     std::to_string(port),
                                     "--rdzv_timeout",
                                     "60",
                                     "-v"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), program.begin(), program.end());
    return argv;
  }

  std::string ns_[2];
  std::string veth_[2];
  bool created_ = false;
};

TEST_F(TwoMachines, OneJobAcrossTwoLaunchersTrainsLikeOneMachine) {
  const auto dir = accel_test::make_temp_dir("two-machines");
  // Each worker records the listening sockets of its machine, then runs the self-test, whose
  // training check compares the 4-process run with one process at the global batch size.
  const std::vector<std::string> program = {"/bin/sh", "-c",
                                            "cat /proc/net/tcp /proc/net/tcp6 > " + dir +
                                                "/tcp-$RANK.txt; exec " ACCEL_SELFTEST_BIN};
  std::vector<accelerate::launch::WorkerSpec> machines(2);
  std::string output[2];
  for (int m = 0; m < 2; ++m) {
    machines[m].argv = launcher(m, 29500, program);
    machines[m].capture_output = true;
  }
  accelerate::launch::WorkerGroup group(
      machines, [&](int m, int, std::string_view chunk) { output[m].append(chunk); });
  for (const auto &exit : group.wait(std::chrono::seconds(180))) {
    EXPECT_TRUE(exit.succeeded()) << "machine " << exit.rank << ": " << output[exit.rank];
  }
  EXPECT_NE(output[0].find("training equivalence (N processes at batch B == 1 process at N*B): ok"),
            std::string::npos)
      << output[0];
  EXPECT_NE(output[0].find("accel self-test on 4 process(es)"), std::string::npos) << output[0];
  // The gradients crossed the veth pair: every process says so (-v), and the self-test too.
  // One kernel and one /dev/shm serve both namespaces, so shared memory would have worked had
  // the runtime taken the namespaces for one machine.
  const std::string network =
      "gradients are summed through gloo (not shared memory: rank 2 runs on another machine "
      "than rank 0)\n";
  for (int rank = 0; rank < 4; ++rank) {
    const std::string line = "accelerate: rank " + std::to_string(rank) + " of 4: " + network;
    EXPECT_NE(output[rank / 2].find(line), std::string::npos) << output[rank / 2];
  }
  EXPECT_NE(output[0].find("[rank0] gradients are summed through: gloo (not shared memory: rank 2 "
                           "runs on another machine than rank 0)"),
            std::string::npos)
      << output[0];
  EXPECT_NE(output[1].find("accel: machine 1 of 2: ranks 2 to 3 of 4, rendezvous at 10.231.0.1:"),
            std::string::npos)
      << output[1];

  // On machine 0 the store's port listens on the given address only (10.231.0.1 in
  // /proc/net/tcp's little-endian hex), never on 0.0.0.0.
  std::ifstream tcp(dir + "/tcp-0.txt");
  int listeners = 0;
  for (std::string line; std::getline(tcp, line);) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == ":733C") {
      ++listeners; // 0x733C = 29500
      EXPECT_EQ(local, "0100E70A:733C") << "the rendezvous listens beyond its address";
    }
  }
  EXPECT_EQ(listeners, 1);
  fs::remove_all(dir);
}

// Machines launched with different settings: the job stops at the rendezvous on both, naming
// the setting and both values, instead of a collective mismatch deep in training.
TEST_F(TwoMachines, DifferentSettingsOnTheMachinesStopTheJobBeforeTraining) {
  std::vector<accelerate::launch::WorkerSpec> machines(2);
  std::string output[2];
  for (int m = 0; m < 2; ++m) {
    machines[m].argv = launcher(m, 29501, {ACCEL_SELFTEST_BIN},
                                {"--gradient_accumulation_steps", m == 0 ? "1" : "2"});
    machines[m].capture_output = true;
  }
  accelerate::launch::WorkerGroup group(
      machines, [&](int m, int, std::string_view chunk) { output[m].append(chunk); });
  const auto exits = group.wait(std::chrono::seconds(120));
  const std::string named = "the processes were started with different settings: "
                            "gradient_accumulation_steps is 1 on rank 0 but 2 on rank 2";
  for (int m = 0; m < 2; ++m) {
    EXPECT_FALSE(exits[m].succeeded()) << output[m];
    EXPECT_NE(output[m].find(named), std::string::npos) << "machine " << m << ":\n" << output[m];
    EXPECT_EQ(output[m].find("training equivalence"), std::string::npos) << output[m];
  }
}

} // namespace
