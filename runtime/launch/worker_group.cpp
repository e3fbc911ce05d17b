#include "worker_group.h"

#include "group_watchdog.h"
#include "job_segments.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char **environ;

namespace accelerate::launch {
namespace {

std::vector<std::string> merged_environment(const std::map<std::string, std::string> &extra) {
  std::map<std::string, std::string> all;
  for (char **entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string::npos) {
      all[text.substr(0, eq)] = text.substr(eq + 1);
    }
  }
  for (const auto &[name, value] : extra) {
    all[name] = value;
  }
  std::vector<std::string> result;
  for (const auto &[name, value] : all) {
    result.push_back(name + "=" + value);
  }
  return result;
}

std::vector<char *> pointers_to(std::vector<std::string> &strings) {
  std::vector<char *> result;
  for (auto &text : strings) {
    result.push_back(text.data());
  }
  result.push_back(nullptr);
  return result;
}

struct StartedWorker {
  pid_t pid = -1;
  int stdout_fd = -1; ///< read ends when output is captured
  int stderr_fd = -1;
};

void close_if_open(int &fd) {
  if (fd >= 0) {
    close(fd);
    fd = -1;
  }
}

StartedWorker start_worker(const WorkerSpec &spec) {
  if (spec.argv.empty() && !spec.function) {
    throw std::runtime_error("accelerate: a worker needs a program or a function to run");
  }
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the parent may have threads).
  std::vector<std::string> argv = spec.argv;
  std::vector<std::string> envp = merged_environment(spec.env);
  auto argv_ptrs = pointers_to(argv);
  auto envp_ptrs = pointers_to(envp);
  int out_fd = -1;
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (!spec.output_path.empty()) {
    // Only the user reads a worker's output: it may hold data or secrets from the program.
    out_fd = open(spec.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out_fd < 0) {
      throw std::runtime_error("accelerate: cannot open worker log " + spec.output_path + ": " +
                               std::strerror(errno));
    }
  } else if (spec.capture_output) {
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
      const int error = errno;
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
        if (fd >= 0) {
          close(fd);
        }
      }
      throw std::runtime_error(std::string("accelerate: pipe failed: ") + std::strerror(error));
    }
  }
  const std::vector<int> inherit = spec.inherit_fds;
  const std::string exec_failure =
      argv.empty() ? std::string() : "accelerate: cannot execute " + argv[0] + ": ";
  const pid_t parent = getpid();
  // Signals stay blocked across fork until the child has reset the parent's handlers: a
  // SIGTERM that arrives in between must not be swallowed by a launcher's handler.
  sigset_t all_signals, previous_mask;
  sigfillset(&all_signals);
  pthread_sigmask(SIG_BLOCK, &all_signals, &previous_mask);
  const pid_t pid = fork();
  if (pid != 0) {
    pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  }
  if (pid < 0) {
    const int error = errno;
    for (int fd : {out_fd, out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) {
        close(fd);
      }
    }
    throw std::runtime_error(std::string("accelerate: fork failed: ") + std::strerror(error));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
      _exit(127); // the parent died before prctl took effect
    }
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    } else if (out_pipe[1] >= 0) {
      dup2(out_pipe[1], STDOUT_FILENO);
      dup2(err_pipe[1], STDERR_FILENO);
    }
    for (int fd : inherit) {
      fcntl(fd, F_SETFD, 0); // keep it open across exec
    }
    // The launcher's signal dispositions are not the worker's.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
    if (spec.function) {
      // A forked copy of the caller: not async-signal-safe territory any more, by design.
      for (const auto &[name, value] : spec.env) {
        setenv(name.c_str(), value.c_str(), 1);
      }
      int code = 1;
      try {
        code = spec.function();
      } catch (...) {
        code = 1;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    execve(argv_ptrs[0], argv_ptrs.data(), envp_ptrs.data());
    const int error = errno;
    const char *reason =
        error == ENOEXEC ? "not an executable format (a script without #!?)"
        : error == ENOENT
            ? "no such file or directory (for a script: the interpreter on its #! line)"
            : strerrordesc_np(error); // a static string: safe here
    for (const char *piece : {exec_failure.c_str(), reason, "\n"}) {
      (void)!write(STDERR_FILENO, piece, std::strlen(piece));
    }
    _exit(127);
  }
  setpgid(pid, pid); // also from the parent, so that signal_all works before the child runs
  close_if_open(out_fd);
  close_if_open(out_pipe[1]);
  close_if_open(err_pipe[1]);
  return StartedWorker{pid, out_pipe[0], err_pipe[0]};
}

// A descriptor that becomes readable when process `pid` exits (pidfd_open, Linux 5.3), so that
// an exit is noticed at once however long the monitor interval; -1 where the kernel has none.
int open_exit_fd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); // close-on-exec by definition
#else
  (void)pid;
  return -1;
#endif
}

// This process's pid and a count: unique among the groups alive on this machine.
std::string next_job_id() {
  static std::atomic<unsigned> groups_made{0};
  return std::to_string(getpid()) + "." + std::to_string(groups_made++);
}

} // namespace

std::string WorkerExit::describe() const {
  std::string text = "rank " + std::to_string(rank);
  if (signal != 0) {
    text += std::string(" was killed by signal ") + std::to_string(signal) + " (" +
            strsignal(signal) + ")";
  } else {
    text += " exited with code " + std::to_string(exit_code);
  }
  if (stopped_by_group) {
    text += " after the job was stopped";
  }
  return text;
}

WorkerGroup::WorkerGroup(const std::vector<WorkerSpec> &specs, OutputHandler on_output,
                         OutputTimer on_timer)
    : job_id_(next_job_id()), on_output_(std::move(on_output)), on_timer_(std::move(on_timer)),
      watchdog_(std::make_unique<GroupWatchdog>(specs.size(), job_segment_prefix(job_id_))) {
  try {
    for (auto spec : specs) {
      spec.env.emplace(kJobIdVariable, job_id_); // a spec's own id wins
      const auto started = start_worker(spec);
      watchdog_->watch(started.pid);
      pids_.push_back(started.pid);
      exit_fds_.push_back(open_exit_fd(started.pid));
      stdout_fds_.push_back(started.stdout_fd);
      stderr_fds_.push_back(started.stderr_fd);
      WorkerExit exit;
      exit.rank = static_cast<int>(exits_.size());
      exits_.push_back(exit);
      running_.push_back(true);
    }
  } catch (...) {
    signal_all(SIGKILL);
    wait(std::chrono::milliseconds(0), std::chrono::milliseconds(0));
    throw;
  }
}

WorkerGroup::~WorkerGroup() {
  signal_all(SIGKILL);
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (running_[i]) {
      waitpid(pids_[i], nullptr, 0);
      running_[i] = false;
      kill(-pids_[i], SIGKILL);
      watchdog_->forget(pids_[i]);
    }
    close_if_open(stdout_fds_[i]);
    close_if_open(stderr_fds_[i]);
    close_if_open(exit_fds_[i]);
  }
}

std::chrono::milliseconds WorkerGroup::until_output_due(std::chrono::milliseconds wait_at_most) {
  if (!on_timer_) {
    return wait_at_most;
  }
  const auto due = on_timer_();
  if (due >= wait_at_most) {
    return wait_at_most;
  }
  // At least 1 ms: the timer showed what was due, so the next is never due at once.
  return std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(due));
}

void WorkerGroup::pump_output(std::chrono::milliseconds wait_at_most) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, int>> owners; // (rank, stream)
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (stdout_fds_[i] >= 0) {
      fds.push_back({stdout_fds_[i], POLLIN, 0});
      owners.emplace_back(i, 1);
    }
    if (stderr_fds_[i] >= 0) {
      fds.push_back({stderr_fds_[i], POLLIN, 0});
      owners.emplace_back(i, 2);
    }
  }
  // A running worker's exit wakes the poll too (its output may have closed long before).
  const size_t outputs = fds.size();
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (!running_[i]) {
      continue;
    }
    if (exit_fds_[i] >= 0) {
      fds.push_back({exit_fds_[i], POLLIN, 0});
    } else {
      // No exit descriptor (an old kernel): look again soon, as before them.
      wait_at_most = std::min(wait_at_most, std::chrono::milliseconds(100));
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(wait_at_most);
    return;
  }
  if (poll(fds.data(), fds.size(), static_cast<int>(wait_at_most.count())) <= 0) {
    return;
  }
  char buffer[65536];
  for (size_t k = 0; k < outputs; ++k) {
    if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
      continue;
    }
    const auto [rank, stream] = owners[k];
    int &fd = stream == 1 ? stdout_fds_[rank] : stderr_fds_[rank];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      if (on_output_) {
        on_output_(static_cast<int>(rank), stream, std::string_view(buffer, n));
      }
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      close_if_open(fd); // end of the worker's output
    }
  }
}

void WorkerGroup::signal_all(int signal) {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (running_[i]) {
      kill(-pids_[i], signal); // the worker's whole process group
    }
  }
}

std::vector<WorkerExit> WorkerGroup::wait(std::chrono::milliseconds deadline,
                                          std::chrono::milliseconds grace,
                                          const std::atomic<int> *stop_signal,
                                          std::chrono::milliseconds monitor_interval) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto stop_at = start + deadline;
  bool stopping = false;
  size_t left = 0;
  for (bool running : running_) {
    left += running ? 1 : 0;
  }
  while (left > 0) {
    bool reaped = false;
    for (size_t i = 0; i < pids_.size(); ++i) {
      int status = 0;
      // Only our own workers: a caller's other children are not ours to reap.
      if (!running_[i] || waitpid(pids_[i], &status, WNOHANG) != pids_[i]) {
        continue;
      }
      reaped = true;
      running_[i] = false;
      close_if_open(exit_fds_[i]); // readable from now on: it would wake every poll
      --left;
      kill(-pids_[i], SIGKILL); // anything the worker itself started
      watchdog_->forget(pids_[i]);
      exits_[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      exits_[i].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      exits_[i].stopped_by_group = stopping;
      if (!exits_[i].succeeded() && !stopping) {
        stopping = true;
        signal_all(SIGTERM);
        stop_at = Clock::now() + grace;
      }
    }
    if (reaped) {
      continue;
    }
    if (!stopping && stop_signal != nullptr && stop_signal->load() != 0) {
      stopping = true;
      signal_all(stop_signal->load());
      stop_at = Clock::now() + grace;
      for (size_t i = 0; i < pids_.size(); ++i) {
        exits_[i].stopped_by_group = exits_[i].stopped_by_group || running_[i];
      }
      continue;
    }
    if (Clock::now() >= stop_at) {
      if (!stopping) {
        stopping = true;
        signal_all(SIGTERM);
        stop_at = Clock::now() + grace;
      } else {
        signal_all(SIGKILL);
        stop_at = Clock::now() + std::chrono::hours(1);
      }
      for (size_t i = 0; i < pids_.size(); ++i) {
        exits_[i].stopped_by_group = exits_[i].stopped_by_group || running_[i];
      }
      continue;
    }
    pump_output(until_output_due(monitor_interval));
  }
  // What the workers wrote just before they exited; bounded, since a descendant that left the
  // worker's process group could hold a pipe open forever.
  const auto drain_until = Clock::now() + std::chrono::seconds(2);
  for (bool open = true; open && Clock::now() < drain_until;) {
    pump_output(until_output_due(std::chrono::milliseconds(10)));
    open = false;
    for (size_t i = 0; i < pids_.size(); ++i) {
      open = open || stdout_fds_[i] >= 0 || stderr_fds_[i] >= 0;
    }
  }
  return exits_;
}

int free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) {
      close(fd);
    }
    throw std::runtime_error("accelerate: no free port on 127.0.0.1: " + error);
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::map<std::string, std::string> rank_environment(int rank, int world_size, int local_rank,
                                                    int local_world_size,
                                                    const std::string &master_addr,
                                                    int master_port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world_size)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", std::to_string(master_port)}};
}

} // namespace accelerate::launch
