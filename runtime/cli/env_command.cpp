#include "env_command.h"

#include "environment_flag.h"
#include "host_allocator.h"
#include "launch_command.h"

#include <accel/build_info.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <thread>

namespace accel::cli {
namespace {

std::string os_name() {
  std::ifstream in("/etc/os-release");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      auto value = line.substr(12);
      if (value.size() >= 2 && value.front() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      return value;
    }
  }
  return "unknown";
}

std::string memory_total() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemTotal:", 0) == 0) {
      std::istringstream fields(line.substr(9));
      long kib = 0;
      fields >> kib;
      std::ostringstream text;
      text.precision(1);
      text << std::fixed << static_cast<double>(kib) / (1024.0 * 1024.0) << " GiB";
      return text.str();
    }
  }
  return "unknown";
}

// What decides whether CPU processes on this machine sum gradients through shared memory.
std::string shared_memory_state() {
  if (const char *setting = std::getenv("ACCELERATE_SHARED_MEMORY")) {
    const std::string value = setting;
    const auto on = accelerate::launch::parse_switch(value);
    if (!value.empty() && !on) {
      return "refused: ACCELERATE_SHARED_MEMORY='" + value +
             "' is neither yes nor no (training stops at start-up)";
    }
    if (!value.empty() && !*on) {
      return "off (ACCELERATE_SHARED_MEMORY=" + value + ")";
    }
  }
  struct statvfs shm{};
  if (statvfs("/dev/shm", &shm) != 0) {
    return "unavailable (no /dev/shm): gradients go through Gloo";
  }
  std::ostringstream text;
  text.precision(1);
  text << std::fixed << "on, /dev/shm has "
       << static_cast<double>(shm.f_bavail) * static_cast<double>(shm.f_frsize) / (1 << 20)
       << " MiB free (a job needs about 12 MiB for 2 processes, at most about 32)";
  return text.str();
}

// What the runtime's Accelerator will do to malloc in a program started from this environment.
std::string malloc_tuning_state() {
  const char *setting = std::getenv("ACCELERATE_MALLOC_TUNING");
  const auto on = accelerate::launch::parse_switch(setting == nullptr ? "" : setting);
  if (setting != nullptr && *setting != '\0' && !on) {
    return std::string("refused: ACCELERATE_MALLOC_TUNING='") + setting +
           "' is neither yes nor no (training stops at start-up)";
  }
  const bool wanted = setting == nullptr || *setting == '\0' || *on;
  return accelerate::launch::describe(accelerate::launch::plan_host_allocator_tuning(wanted));
}

// How a program started from this environment shards its prepared loaders' batches.
std::string split_batches_state() {
  const char *setting = std::getenv("ACCELERATE_SPLIT_BATCHES");
  const std::string value = setting == nullptr ? "" : setting;
  const auto on = accelerate::launch::parse_switch(value);
  if (!value.empty() && !on) {
    return "refused: ACCELERATE_SPLIT_BATCHES='" + value +
           "' is neither yes nor no (training stops at start-up)";
  }
  if (!value.empty() && *on) {
    return "split: each process gets its part of every batch (ACCELERATE_SPLIT_BATCHES=" + value +
           ")";
  }
  return "whole: each process gets every N-th batch (split_batches off; accel launch "
         "--split_batches turns it on)";
}

} // namespace

int run_env(const std::optional<std::string> &config_file, std::ostream &out) {
  utsname system{};
  uname(&system);
  const auto config_path = config_file.value_or(default_config_path());
  // A directory in the config file's place is no config: the report goes on and says so (a
  // config file with a bad value is an error, as for accel launch).
  std::error_code error;
  const bool directory = std::filesystem::is_directory(config_path, error);
  const bool have_config = !directory && std::filesystem::exists(config_path, error);
  out << "- accel version: " << ACCEL_VERSION << "\n"
      << "- LibTorch version (built with): " << ACCEL_TORCH_VERSION << "\n"
      << "- CUDA / NCCL: " << ACCEL_CUDA_INFO << "\n"
      << "- Gloo: " << ACCEL_GLOO_SOURCE << "\n"
      << "- LLVM version (accel-rewrite): " << ACCEL_LLVM_VERSION << "\n"
      << "- OS: " << os_name() << " (" << system.sysname << " " << system.release << " "
      << system.machine << ")\n"
      << "- CPU cores: " << std::thread::hardware_concurrency() << "\n"
      << "- Memory: " << memory_total() << "\n"
      << "- Shared-memory gradient sum (CPU, one machine): " << shared_memory_state() << "\n"
      << "- Malloc tuning (host memory of training processes): " << malloc_tuning_state() << "\n"
      << "- Batches of prepared data loaders: " << split_batches_state() << "\n"
      << "- Config file: "
      << (have_config ? config_path
                      : config_path + (directory ? " (a directory, not a config file)" : " (none)"))
      << "\n";
  out << "- Config in effect:\n";
  if (!have_config) {
    out << "\tNot found\n"; // as `accelerate env` says it
    return 0;
  }
  const auto config = effective_config(config_path, LaunchConfig{});
  std::istringstream yaml(config_to_yaml(config));
  for (std::string line; std::getline(yaml, line);) {
    if (line != "{}") {
      out << "\t- " << line << "\n";
    }
  }
  return 0;
}

} // namespace accel::cli
