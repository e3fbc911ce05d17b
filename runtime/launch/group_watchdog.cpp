#include "group_watchdog.h"

#include "job_segments.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace accelerate::launch {
namespace {

/// One message: a process group to watch (watch != 0) or to forget. Smaller than PIPE_BUF, so
/// each is sent whole.
struct Message {
  int32_t group;
  int32_t watch;
};

// The watchdog's whole life, after fork: only async-signal-safe calls (the launcher may have
// threads), and no allocation: `groups` was sized before fork.
[[noreturn]] void watch_until_end_of_file(int fd, pid_t *groups, size_t capacity,
                                          const char *segment_prefix) {
  setpgid(0, 0); // out of the launcher's group: a kill(-launcher_group) must not reach it
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    ::signal(signal, SIG_IGN); // Ctrl-C and the like are the launcher's to handle
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Keep only our end of the socket: an inherited copy of a worker's output pipe or of the
  // terminal would keep whoever reads it waiting for us.
  const int keep = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (keep < 0) {
    _exit(1);
  }
  syscall(SYS_close_range, 0U, static_cast<unsigned>(keep - 1), 0U);
  syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0U, 0U);
  for (size_t i = 0; i < capacity; ++i) {
    groups[i] = 0;
  }
  for (;;) {
    Message message{};
    const ssize_t n = recv(keep, &message, sizeof(message), MSG_WAITALL);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n != static_cast<ssize_t>(sizeof(message))) {
      break; // end of file: the launcher let us go, or it died
    }
    for (size_t i = 0; i < capacity; ++i) {
      if (message.watch != 0 && groups[i] == 0) {
        groups[i] = message.group;
        break;
      }
      if (message.watch == 0 && groups[i] == message.group) {
        groups[i] = 0;
        break;
      }
    }
  }
  for (size_t i = 0; i < capacity; ++i) {
    if (groups[i] > 0) {
      kill(-groups[i], SIGKILL);
    }
  }
  if (*segment_prefix != '\0') {
    // A process in the middle of making a segment finishes that system call before it dies:
    // remove the names once the groups are gone (up to a second), not before.
    for (int tries = 0; tries < 100; ++tries) {
      bool alive = false;
      for (size_t i = 0; i < capacity; ++i) {
        alive = alive || (groups[i] > 0 && kill(-groups[i], 0) == 0);
      }
      if (!alive) {
        break;
      }
      const timespec pause{0, 10'000'000};
      nanosleep(&pause, nullptr);
    }
    remove_segments_with_prefix(segment_prefix);
  }
  _exit(0);
}

} // namespace

GroupWatchdog::GroupWatchdog(size_t capacity, const std::string &segment_prefix) {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    throw std::runtime_error(std::string("accelerate: socketpair failed: ") + std::strerror(errno));
  }
  std::vector<pid_t> groups(capacity == 0 ? 1 : capacity);
  pid_ = fork();
  if (pid_ < 0) {
    const int error = errno;
    close(ends[0]);
    close(ends[1]);
    throw std::runtime_error(std::string("accelerate: fork failed: ") + std::strerror(error));
  }
  if (pid_ == 0) {
    close(ends[0]);
    watch_until_end_of_file(ends[1], groups.data(), groups.size(), segment_prefix.c_str());
  }
  close(ends[1]);
  socket_ = ends[0];
}

GroupWatchdog::~GroupWatchdog() {
  // Everything it watched was forgotten; end of file lets it exit.
  close(socket_);
  while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void GroupWatchdog::watch(pid_t group) { send(group, true); }

void GroupWatchdog::forget(pid_t group) { send(group, false); }

void GroupWatchdog::send(pid_t group, bool watch) {
  const Message message{static_cast<int32_t>(group), watch ? 1 : 0};
  // MSG_NOSIGNAL: a watchdog that is gone must not take the launcher with it (SIGPIPE).
  while (::send(socket_, &message, sizeof(message), MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

} // namespace accelerate::launch
