// The names of a job's shared-memory segments. The runtime removes its segment's name from
// /dev/shm as soon as every process has mapped it; a process killed in the few milliseconds
// before that would leave a fully allocated segment until reboot. So each WorkerGroup gives its
// workers a job id (ACCELERATE_JOB_ID), the runtime names segments after it, and the group's
// watchdog removes whatever is left under that name once the workers are gone, however the
// job ended (the launcher killed included).
#pragma once

#include <string>
#include <string_view>

namespace accelerate::launch {

/// The variable a WorkerGroup sets for its workers.
inline constexpr const char *kJobIdVariable = "ACCELERATE_JOB_ID";

/// "accel-job<id>-": the start of every segment name of job `id` in /dev/shm.
std::string job_segment_prefix(std::string_view job_id);

/// Removes the entries of /dev/shm whose names start with `prefix` and that this user owns.
/// Only system calls, no allocation: safe in a forked child of a threaded process. Returns the
/// number removed.
int remove_segments_with_prefix(const char *prefix);

} // namespace accelerate::launch
