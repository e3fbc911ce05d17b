#include "worker_group.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace accelerate::launch {
namespace {

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> all;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto eq = text.find('=');
    if (eq != std::string::npos) {
      all[text.substr(0, eq)] = text.substr(eq + 1);
    }
  }
  for (const auto& [name, value] : extra) {
    all[name] = value;
  }
  std::vector<std::string> result;
  for (const auto& [name, value] : all) {
    result.push_back(name + "=" + value);
  }
  return result;
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (auto& text : strings) {
    result.push_back(text.data());
  }
  result.push_back(nullptr);
  return result;
}

pid_t start_worker(const WorkerSpec& spec) {
  if (spec.argv.empty()) {
    throw std::runtime_error("accelerate: a worker needs a program to run");
  }
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls are allowed (the parent may have threads).
  std::vector<std::string> argv = spec.argv;
  std::vector<std::string> envp = merged_environment(spec.env);
  auto argv_ptrs = pointers_to(argv);
  auto envp_ptrs = pointers_to(envp);
  int out_fd = -1;
  if (!spec.output_path.empty()) {
    out_fd = open(spec.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      throw std::runtime_error("accelerate: cannot open worker log " + spec.output_path + ": " +
                               std::strerror(errno));
    }
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    if (out_fd >= 0) {
      close(out_fd);
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
    }
    execve(argv_ptrs[0], argv_ptrs.data(), envp_ptrs.data());
    static const char message[] = "accelerate: cannot execute the worker program\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  setpgid(pid, pid); // also from the parent, so that signal_all works before the child runs
  if (out_fd >= 0) {
    close(out_fd);
  }
  return pid;
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

WorkerGroup::WorkerGroup(const std::vector<WorkerSpec>& specs) {
  try {
    for (const auto& spec : specs) {
      pids_.push_back(start_worker(spec));
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
                                          std::chrono::milliseconds grace) {
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
      --left;
      kill(-pids_[i], SIGKILL); // anything the worker itself started
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
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
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
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
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
                                                    const std::string& master_addr,
                                                    int master_port) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world_size)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_world_size)},
          {"MASTER_ADDR", master_addr},
          {"MASTER_PORT", std::to_string(master_port)}};
}

} // namespace accelerate::launch
