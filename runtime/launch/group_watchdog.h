// Kills the workers' process groups when the launcher dies, however it dies. A worker gets
// SIGKILL from the kernel when the launcher dies (PR_SET_PDEATHSIG), but what the worker itself
// started does not: after a SIGKILLed launcher, a `sleep` or a data-loading helper of a worker
// would live on under init. The watchdog is a small process of its own, in a process group of
// its own (a signal to the launcher's group does not reach it), that the launcher tells about
// each worker's process group over a socket; when the socket reports end of file (the launcher
// closed it, or died), it SIGKILLs every group still listed, removes the job's shared-memory
// segments that are left (job_segments.h) and exits.
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>
#include <vector>

namespace accelerate::launch {

class GroupWatchdog {
public:
  /// Starts the watchdog for up to `capacity` process groups; at the end it removes the
  /// /dev/shm entries whose names start with `segment_prefix` (none when empty). Throws
  /// std::runtime_error when it cannot be started.
  GroupWatchdog(size_t capacity, const std::string &segment_prefix);
  /// Lets the watchdog go without killing anything still listed, and reaps it.
  ~GroupWatchdog();
  GroupWatchdog(const GroupWatchdog &) = delete;
  GroupWatchdog &operator=(const GroupWatchdog &) = delete;

  /// Process group `group` is to be killed if the launcher dies.
  void watch(pid_t group);
  /// Process group `group` is over (its leader was reaped and the group killed): forget it,
  /// since its number may be given to another group.
  void forget(pid_t group);

private:
  void send(pid_t group, bool watch);

  int socket_ = -1; ///< the launcher's end
  pid_t pid_ = -1;  ///< the watchdog process
};

} // namespace accelerate::launch
