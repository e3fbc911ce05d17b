// Runs a command to completion and keeps what it printed.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace accel_test {

struct CommandResult {
  int exit_code = -1; ///< 128 + signal when it was killed
  std::string out;
  std::string err;
};

/// Runs argv (no shell) with `env` added to this process's environment; gives up after
/// `timeout_s` seconds.
CommandResult run_command(const std::vector<std::string> &argv,
                          const std::map<std::string, std::string> &env = {}, int timeout_s = 120);

/// A fresh empty directory under the temporary directory.
std::string make_temp_dir(const std::string &name);

} // namespace accel_test
