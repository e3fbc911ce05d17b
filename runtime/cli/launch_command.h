// `accel launch [options] PROGRAM [ARGS...]`: starts the workers of one machine's share of a
// job and watches them.
#pragma once

#include "launch_config.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel::cli {

/// What `accel launch` was asked, before the config file fills the gaps.
struct LaunchRequest {
  std::optional<std::string> config_file;
  LaunchConfig flags; ///< settings given as flags
  bool cpu = false;
  bool multi_gpu = false;     ///< --multi_gpu: distributed_type MULTI_GPU, not on the CPU
  bool python_module = false; ///< -m/--module: meaningless for a native program; an error
  bool no_python = false;     ///< --no_python: accepted; PROGRAM never runs under Python
  bool same_network = false;
  bool debug = false;
  /// --split_batches: ACCELERATE_SPLIT_BATCHES=true for the workers. accel's own flag, and no
  /// config key: Python Accelerate's config loader refuses keys it does not know.
  bool split_batches = false;
  /// --local_sgd_steps K: ACCELERATE_LOCAL_SGD_STEPS=K for the workers (Local SGD for the whole
  /// run). accel's own flag, like --split_batches; 0 leaves the environment as it is.
  int local_sgd_steps = 0;
  bool verbose = false; ///< -v: log the plan and each process's gradient transport
  int max_restarts = 0;
  double monitor_interval = 0.1; ///< seconds between checks on the workers
  double rdzv_timeout = 900;     ///< seconds the rendezvous may take (ACCELERATE_TIMEOUT)
  int tee = 3;
  std::string log_dir;
  bool no_prefix = false;
  int only_rank = -1;
  std::vector<std::string> command; ///< PROGRAM ARGS...

  // Set by commands that run jobs through launch (accel verify), never by a flag.
  std::string job_name = "the job"; ///< in the launcher's messages: "the job failed"
  bool default_config = true; ///< without config_file: Accelerate's default file, if it exists
  std::map<std::string, std::string> environment; ///< for every worker, over the launcher's
  /// When set, the workers' stdout comes here (global rank, a chunk as it arrives) instead of
  /// the console; their stderr is shown as usual.
  std::function<void(int rank, std::string_view chunk)> capture_stdout;
};

/// Adds the `launch` subcommand's options, storing into `request`.
CLI::App *add_launch_command(CLI::App &app, LaunchRequest &request);

/// The settings in effect: flags over the config file (--config_file, or with `default_file`
/// the default file if it exists) over defaults. Prints notes about ignored keys to stderr.
LaunchConfig effective_config(const std::optional<std::string> &config_file,
                              const LaunchConfig &flags, bool default_file = true);

/// PROGRAM as execve needs it: a path, looked up in PATH when it has no slash. Throws
/// std::runtime_error ("cannot run 'x': not found in PATH") when there is none to run.
std::string resolve_program(const std::string &program);

/// The request's flags as config settings (--cpu, --multi_gpu, --debug, --same_network folded
/// in); throws std::runtime_error for flags that contradict each other or do not apply.
LaunchConfig flag_settings(const LaunchRequest &request);

/// Runs the job; returns the launcher's exit code (0 when every worker succeeded).
int run_launch(const LaunchRequest &request);

} // namespace accel::cli
