// Starts N worker processes on this machine and watches them as one job: the first failure
// stops the rest, and no worker outlives the group. Shared by the `accel` launcher, the
// self-test and the multi-process test harness.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace accelerate::launch {

class GroupWatchdog;

struct WorkerSpec {
  std::vector<std::string> argv; ///< argv[0] is the program path; no shell.
  /// Instead of argv: run this in the forked child and exit with its result (in-process
  /// launching; the child is a copy of this process, with `env` set).
  std::function<int()> function;
  std::map<std::string, std::string> env; ///< set on top of this process's environment
  std::string output_path;                ///< stdout+stderr go here when not empty
  bool capture_output = false;            ///< stdout+stderr go to the group's OutputHandler
  std::vector<int> inherit_fds;           ///< descriptors the worker keeps open across exec
};

/// Receives a worker's output as it arrives: `stream` is 1 (stdout) or 2 (stderr); chunks are
/// not split at line ends.
using OutputHandler = std::function<void(int rank, int stream, std::string_view chunk)>;
/// Called between waits for output; returns how long it may be until the next call (the time
/// until held output is due: WorkerOutput::flush_due).
using OutputTimer = std::function<std::chrono::steady_clock::duration()>;

struct WorkerExit {
  int rank = 0;
  int exit_code = 0;             ///< valid when signal == 0
  int signal = 0;                ///< the signal that ended it, or 0
  bool stopped_by_group = false; ///< ended because another worker failed or the deadline passed

  bool succeeded() const { return signal == 0 && exit_code == 0; }
  std::string describe() const;
};

class WorkerGroup {
public:
  /// Starts one process per spec; rank i is specs[i]. Each worker runs in its own process group,
  /// which is SIGKILLed if this process dies, however it dies (the worker by the kernel,
  /// PR_SET_PDEATHSIG; what the worker started by a GroupWatchdog). Workers get the group's
  /// job id (unless their spec sets one), and the shared-memory segments named after it are
  /// removed when the group ends or this process dies. Throws std::runtime_error
  /// when a fork fails; an exec failure is reported as exit code 127 by wait(), with the
  /// reason on the worker's stderr.
  explicit WorkerGroup(const std::vector<WorkerSpec> &specs, OutputHandler on_output = {},
                       OutputTimer on_timer = {});
  /// Kills and reaps any worker still running.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup &) = delete;
  WorkerGroup &operator=(const WorkerGroup &) = delete;

  /// Waits for every worker, passing captured output on as it comes. When one fails, the
  /// `deadline` passes, or `stop_signal` becomes non-zero (the launcher got SIGINT/SIGTERM), the
  /// others get that signal (SIGTERM by default) and, after `grace`, SIGKILL. Returns one entry
  /// per rank. Exits are checked every `monitor_interval`, and at once when output arrives or
  /// a worker's output closes; the output timer is called at least as often as it asks.
  std::vector<WorkerExit>
  wait(std::chrono::milliseconds deadline,
       std::chrono::milliseconds grace = std::chrono::seconds(5),
       const std::atomic<int> *stop_signal = nullptr,
       std::chrono::milliseconds monitor_interval = std::chrono::milliseconds(5));

  /// Sends `signal` to every running worker's process group.
  void signal_all(int signal);

  /// This group's ACCELERATE_JOB_ID (job_segments.h), unique on this machine while it lives.
  const std::string &job_id() const { return job_id_; }

private:
  void pump_output(std::chrono::milliseconds wait_at_most);
  /// `wait_at_most`, shortened to when the output timer asks to be called.
  std::chrono::milliseconds until_output_due(std::chrono::milliseconds wait_at_most);

  std::string job_id_;
  OutputHandler on_output_;
  OutputTimer on_timer_;
  std::unique_ptr<GroupWatchdog> watchdog_;
  std::vector<pid_t> pids_;
  std::vector<int> stdout_fds_; ///< read ends of captured output, -1 when closed or none
  std::vector<int> stderr_fds_;
  std::vector<int> exit_fds_; ///< pidfds of the workers still running, -1 once reaped or none
  std::vector<WorkerExit> exits_;
  std::vector<bool> running_;
};

/// A TCP port that is free on 127.0.0.1 right now.
int free_loopback_port();

/// The variables `accel launch` and torchrun give each worker.
std::map<std::string, std::string> rank_environment(int rank, int world_size, int local_rank,
                                                    int local_world_size,
                                                    const std::string &master_addr,
                                                    int master_port);

} // namespace accelerate::launch
