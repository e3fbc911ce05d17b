// `accel launch`'s command line (runtime/cli/launch_command.cpp, launch_arguments.cpp,
// option_values.cpp): the input is the words after `accel launch`, separated by NUL or newline
// bytes. They take the path accel_main.cpp gives them (the split at `--`, CLI11 with the launch
// options and their checks, run_launch's checks of the settings against the config file) and
// stop before a process starts: PROGRAM is never found. So every input must end in a usage
// error (CLI11's) or a std::runtime_error, never in a started job.
#include "launch_arguments.h"
#include "launch_command.h"
#include "scratch_directory.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// The launcher's environment: no default config file, and a PATH with nothing to run.
struct Environment {
  std::string config_file;
  Environment() {
    const auto &root = accel_fuzz::scratch_directory();
    std::filesystem::create_directories(root / "empty-path");
    ::setenv("HF_HOME", (root / "hf-home").c_str(), 1);
    ::setenv("PATH", (root / "empty-path").c_str(), 1);
    // --config_file names this file whatever the input says: the input's path could name a
    // device or a pipe. Its settings meet the flags' in run_launch's checks.
    config_file = (root / "config.yaml").string();
    std::ofstream(config_file) << "compute_environment: LOCAL_MACHINE\n"
                                  "distributed_type: MULTI_CPU\n"
                                  "num_processes: 4\n"
                                  "num_machines: 2\n"
                                  "machine_rank: 1\n"
                                  "main_process_ip: 10.0.0.1\n"
                                  "mixed_precision: bf16\n";
  }
};

std::vector<std::string> words_of(const uint8_t *data, size_t size) {
  std::vector<std::string> words(1);
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      words.emplace_back();
    } else {
      words.back() += c;
    }
  }
  return words;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Environment environment;
  std::vector<std::string> words = {"accel", "launch"};
  for (auto &word : words_of(data, size)) {
    words.push_back(std::move(word));
  }
  std::vector<const char *> argv;
  for (const auto &word : words) {
    argv.push_back(word.c_str());
  }

  CLI::App app{"accel"};
  app.require_subcommand(1);
  accel::cli::LaunchRequest request;
  auto *launch = accel::cli::add_launch_command(app, request);
  const auto split = accel::cli::split_launch_arguments(static_cast<int>(argv.size()), argv.data());
  try {
    app.parse(split.launcher_argc, argv.data());
  } catch (const CLI::ParseError &) {
    return 0; // a usage error (or --help), as accel prints it
  }
  request.command = accel::cli::launch_command_words(launch->remaining(), split);
  if (request.config_file) {
    request.config_file = environment.config_file;
  }
  // A PROGRAM given by path could exist; one looked up in PATH cannot (PATH is empty).
  if (!request.command.empty() && request.command[0].find('/') != std::string::npos) {
    request.command[0] = (accel_fuzz::scratch_directory() / "no-such-program").string();
  }
  try {
    accel::cli::run_launch(request);
  } catch (const std::runtime_error &) {
    return 0;
  }
  std::fprintf(stderr, "run_launch started a job\n");
  __builtin_trap();
}
