// The launch settings Hugging Face Accelerate keeps in default_config.yaml, read and written
// with its keys so that one file serves both.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace accel::cli {

/// The largest powersgd_rank and powersgd_start_iter, in a config file and on the command line.
inline constexpr int kMaxPowerSgdRank = 1 << 20, kMaxPowerSgdStartIter = 1 << 30;

/// Every field is optional: a value missing from the file (or the command line) falls back to
/// the next source, then to the default.
struct LaunchConfig {
  std::optional<std::string> compute_environment;
  std::optional<std::string> distributed_type; ///< NO, MULTI_CPU, MULTI_GPU
  std::optional<std::string> mixed_precision;  ///< no, fp16, bf16
  std::optional<bool> use_cpu;
  std::optional<int> num_processes; ///< in total, across machines
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;
  std::optional<std::string> gpu_ids;      ///< "all" or "0,1"
  std::optional<std::string> rdzv_backend; ///< only "static" is supported
  std::optional<bool> same_network;
  std::optional<bool> debug;
  std::optional<int> gradient_accumulation_steps;
  std::optional<int> num_cpu_threads_per_process;
  /// no, fp16, bf16, powersgd: gradient compression (accel's own key; Python Accelerate sets it
  /// in code, DistributedDataParallelKwargs(comm_hook=...), and its config files have no such
  /// key).
  std::optional<std::string> comm_hook;
  /// PowerSGD's matrix_approximation_rank and start_powerSGD_iter (accel's own keys, as
  /// comm_hook; Accelerate's comm_state_option).
  std::optional<int> powersgd_rank;
  std::optional<int> powersgd_start_iter;

  /// Fields set in `over` replace those here.
  void override_with(const LaunchConfig &over);
};

/// Where Accelerate looks for its default file: $HF_HOME/accelerate/default_config.yaml, else
/// $XDG_CACHE_HOME/huggingface/accelerate/..., else ~/.cache/huggingface/accelerate/....
std::string default_config_path();

/// Reads a config file. Keys that only matter to Python Accelerate (deepspeed, fsdp, dynamo…)
/// are accepted; those with a non-default value are listed in `notes`. Unknown keys and bad
/// values throw std::runtime_error as "FILE:LINE:COLUMN: key 'K': what is wrong".
LaunchConfig load_config_file(const std::string &path, std::vector<std::string> *notes);

/// YAML text with Accelerate's keys, in Accelerate's order, for the fields that are set.
std::string config_to_yaml(const LaunchConfig &config);

/// Writes `text` to `path` atomically (temporary file + rename), creating parent directories.
/// With `overwrite` false an existing file is an error and is left untouched.
void write_file_atomically(const std::string &path, const std::string &text, bool overwrite);

} // namespace accel::cli
