#include "launch_arguments.h"

namespace accel::cli {

LaunchArguments split_launch_arguments(int argc, const char *const *argv) {
  LaunchArguments split;
  split.launcher_argc = argc;
  if (argc > 1 && (std::string(argv[1]) == "launch" || std::string(argv[1]) == "verify")) {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) == "--") {
        split.launcher_argc = i;
        split.after_dashes.emplace(argv + i + 1, argv + argc);
        break;
      }
    }
  }
  return split;
}

std::vector<std::string> launch_command_words(std::vector<std::string> remaining,
                                              const LaunchArguments &split) {
  if (split.after_dashes) {
    // Words left by CLI11 mean PROGRAM came before the `--`: then it is the program's.
    if (!remaining.empty()) {
      remaining.push_back("--");
    }
    remaining.insert(remaining.end(), split.after_dashes->begin(), split.after_dashes->end());
  }
  return remaining;
}

} // namespace accel::cli
