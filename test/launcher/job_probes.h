// What the launcher tests look at from outside a job: the pids its workers wrote, whether they
// still run, and what a job left in /dev/shm.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace accel_test {

/// Shell words that make a worker write its pid to DIR/$RANK.pid, whole or not at all (a
/// worker stopped mid-write must not leave an empty file: pid 0 would be "alive" forever).
std::string write_pid(const std::string &dir);

/// The pids in DIR/*.pid.
std::vector<pid_t> read_pids(const std::string &dir);

/// kill(pid, 0) succeeds: running, or a zombie not yet reaped.
bool alive(pid_t pid);

/// Alive and not a zombie: an orphan's zombie waits for whatever reaps orphans here.
bool running(pid_t pid);

/// Polls `condition` every 20 ms until it holds or `limit` passes; its last answer.
bool wait_until(const std::function<bool()> &condition,
                std::chrono::seconds limit = std::chrono::seconds(30));

/// The pids of the processes whose environment has NAME=VALUE.
std::vector<pid_t> processes_with_variable(const std::string &name, const std::string &value);

/// The /dev/shm entries whose names start with `prefix`.
std::vector<std::string> shared_memory_entries(const std::string &prefix);

} // namespace accel_test
