// Starts N worker processes on this machine and watches them as one job: the first failure
// stops the rest, and no worker outlives the group. Shared by the `accel` launcher, the
// self-test and the multi-process test harness.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

namespace accelerate::launch {

struct WorkerSpec {
  std::vector<std::string> argv;             ///< argv[0] is the program path; no shell.
  std::map<std::string, std::string> env;    ///< set on top of this process's environment
  std::string output_path;                   ///< stdout+stderr go here when not empty
};

struct WorkerExit {
  int rank = 0;
  int exit_code = 0;       ///< valid when signal == 0
  int signal = 0;          ///< the signal that ended it, or 0
  bool stopped_by_group = false;  ///< ended because another worker failed or the deadline passed

  bool succeeded() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;
};

class WorkerGroup {
public:
  /// Starts one process per spec; rank i is specs[i]. Each worker runs in its own process group
  /// and receives SIGKILL if this process dies. Throws std::runtime_error when a fork or exec
  /// fails (an exec failure is reported as exit code 127 by wait()).
  explicit WorkerGroup(const std::vector<WorkerSpec>& specs);
  /// Kills and reaps any worker still running.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  /// Waits for every worker. When one fails, or `deadline` passes, the others get SIGTERM and,
  /// after `grace`, SIGKILL. Returns one entry per rank.
  std::vector<WorkerExit> wait(std::chrono::milliseconds deadline,
                               std::chrono::milliseconds grace = std::chrono::seconds(5));

  /// Sends `signal` to every running worker's process group.
  void signal_all(int signal);

private:
  std::vector<pid_t> pids_;
  std::vector<WorkerExit> exits_;
  std::vector<bool> running_;
};

/// A TCP port that is free on 127.0.0.1 right now.
int free_loopback_port();

/// The variables `accel launch` and torchrun give each worker.
std::map<std::string, std::string> rank_environment(int rank, int world_size, int local_rank,
                                                    int local_world_size,
                                                    const std::string& master_addr,
                                                    int master_port);

} // namespace accelerate::launch
