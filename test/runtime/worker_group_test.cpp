// The process manager under the launcher and the test harness: exits, signals, and that a
// failure stops the whole job with nothing left running.
#include "worker_group.h"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace {

using namespace accelerate::launch;
using namespace std::chrono_literals;

WorkerSpec shell(const std::string &script) {
  return WorkerSpec{{"/bin/sh", "-c", script}, {}, {}};
}

bool process_exists(pid_t pid) { return kill(pid, 0) == 0; }

TEST(WorkerGroup, ReportsExitCodesAndSignals) {
  // One failure stops the rest, so each outcome is observed in a group of its own.
  WorkerGroup exits_normally({shell("exit 0"), shell("sleep 0.2; exit 3")});
  auto exits = exits_normally.wait(30s, 1s);
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_TRUE(exits[0].succeeded());
  EXPECT_EQ(exits[1].exit_code, 3);
  EXPECT_EQ(exits[1].describe(), "rank 1 exited with code 3");

  WorkerGroup killed({shell("kill -9 $$")});
  exits = killed.wait(30s, 1s);
  EXPECT_EQ(exits[0].signal, SIGKILL);
  EXPECT_NE(exits[0].describe().find("signal 9"), std::string::npos) << exits[0].describe();
}

TEST(WorkerGroup, AFailureStopsTheOthersAndTheirChildren) {
  const auto pid_file =
      std::filesystem::temp_directory_path() / ("accel-worker-group-" + std::to_string(getpid()));
  // Rank 0 starts a grandchild and sleeps; rank 1 fails once the grandchild exists.
  WorkerGroup group(
      {shell("sleep 300 & echo $! > " + pid_file.string() + "; wait"),
       shell("while [ ! -s " + pid_file.string() + " ]; do sleep 0.05; done; exit 7")});
  auto exits = group.wait(60s, 2s);
  EXPECT_EQ(exits[1].exit_code, 7);
  EXPECT_FALSE(exits[1].stopped_by_group);
  EXPECT_TRUE(exits[0].stopped_by_group);
  EXPECT_EQ(exits[0].signal, SIGTERM);

  std::ifstream in(pid_file);
  pid_t grandchild = 0;
  in >> grandchild;
  std::filesystem::remove(pid_file);
  ASSERT_GT(grandchild, 0);
  // The grandchild was in rank 0's process group and got the same signal; allow it to be reaped
  // by init.
  for (int i = 0; i < 100 && process_exists(grandchild); ++i) {
    usleep(20000);
  }
  EXPECT_FALSE(process_exists(grandchild)) << "a worker's child outlived the job";
}

TEST(WorkerGroup, TheDeadlineStopsAHungJob) {
  WorkerGroup group({shell("sleep 300"), shell("exec sleep 300")});
  auto exits = group.wait(500ms, 500ms);
  for (const auto &exit : exits) {
    EXPECT_TRUE(exit.stopped_by_group);
    EXPECT_FALSE(exit.succeeded());
  }
}

TEST(WorkerGroup, AMissingProgramIsExitCode127) {
  WorkerGroup group({WorkerSpec{{"/nonexistent/program"}, {}, {}}});
  auto exits = group.wait(30s);
  EXPECT_EQ(exits[0].exit_code, 127);
}

TEST(WorkerGroup, WorkersSeeTheirEnvironment) {
  const auto out =
      std::filesystem::temp_directory_path() / ("accel-worker-env-" + std::to_string(getpid()));
  WorkerSpec spec = shell("echo $RANK/$WORLD_SIZE@$MASTER_ADDR:$MASTER_PORT");
  spec.env = rank_environment(1, 2, 1, 2, "127.0.0.1", 29511);
  spec.output_path = out.string();
  {
    WorkerGroup group({spec});
    EXPECT_TRUE(group.wait(30s)[0].succeeded());
  }
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  std::filesystem::remove(out);
  EXPECT_EQ(line, "1/2@127.0.0.1:29511");
}

TEST(WorkerGroup, FreeLoopbackPortIsUsable) {
  const int port = free_loopback_port();
  EXPECT_GT(port, 1024);
  EXPECT_LT(port, 65536);
}

} // namespace
