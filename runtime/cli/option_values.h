// Checks on the values of command-line options whose messages say what is wrong in words
// ("--num_processes: 'two' is not a whole number"), instead of CLI11's generic ones ("Value two
// not in range 0.000000 to 1.79769e+308").
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace accel::cli {

/// "--name,--name-with-hyphens": Accelerate spells its flags with underscores; hyphens are
/// accepted too.
std::string both_spellings(const std::string &name);

/// A whole number from `lowest` to `highest`.
CLI::Validator whole_number(long lowest, long highest);

/// A number of seconds from `lowest` to `highest`.
CLI::Validator seconds_between(double lowest, double highest);

/// --rdzv_timeout (and the ACCELERATE_TIMEOUT it sets): 1 ms, the timeouts' resolution, to 7
/// days (the runtime refuses the same range).
inline constexpr double kMinTimeoutSeconds = 0.001, kMaxTimeoutSeconds = 604800;
/// --monitor_interval: 10 ms (shorter would keep the launcher busy) to an hour.
inline constexpr double kMinMonitorSeconds = 0.01, kMaxMonitorSeconds = 3600;

/// A number from 0 to `highest` (a tolerance, say).
CLI::Validator non_negative_number(double highest);

/// One of `allowed`, spelled exactly; `why` (if any) follows the message about another value.
CLI::Validator one_of(const std::vector<std::string> &allowed, const std::string &why = "");

} // namespace accel::cli
