// `accel launch [OPTIONS] -- PROGRAM [ARGS...]`: CLI11 does not hand what follows `--` to a
// prefix command, so the words after the first `--` are split off before parsing and joined
// to what CLI11 left over afterwards. A `--` after PROGRAM is the program's.
// `accel verify [OPTIONS] ORIGINAL REWRITTEN -- ARGS...` is split the same way: ARGS, which go
// to both programs, are never the verifier's options.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accel::cli {

struct LaunchArguments {
  int launcher_argc = 0; ///< the words CLI11 parses: argv[0, launcher_argc)
  std::optional<std::vector<std::string>> after_dashes; ///< the words after `--`, if any
};

/// Splits `accel launch ...` and `accel verify ...` at the first `--`; any other command is
/// left whole.
LaunchArguments split_launch_arguments(int argc, const char *const *argv);

/// PROGRAM [ARGS...]: the words CLI11 left (`remaining`), then those after `--`.
std::vector<std::string> launch_command_words(std::vector<std::string> remaining,
                                              const LaunchArguments &split);

} // namespace accel::cli
