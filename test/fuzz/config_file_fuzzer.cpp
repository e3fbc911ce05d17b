// The launcher's config file (runtime/cli/launch_config.cpp): any text must either load or be
// refused with a std::runtime_error that names the file, and what loads must survive being
// written back (config_to_yaml, as `accel config` writes it) and read again unchanged.
#include "launch_config.h"
#include "scratch_directory.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using accel::cli::LaunchConfig;

bool same(const LaunchConfig &a, const LaunchConfig &b) {
  return a.compute_environment == b.compute_environment &&
         a.distributed_type == b.distributed_type && a.mixed_precision == b.mixed_precision &&
         a.use_cpu == b.use_cpu && a.num_processes == b.num_processes &&
         a.num_machines == b.num_machines && a.machine_rank == b.machine_rank &&
         a.main_process_ip == b.main_process_ip && a.main_process_port == b.main_process_port &&
         a.gpu_ids == b.gpu_ids && a.rdzv_backend == b.rdzv_backend &&
         a.same_network == b.same_network && a.debug == b.debug &&
         a.gradient_accumulation_steps == b.gradient_accumulation_steps &&
         a.num_cpu_threads_per_process == b.num_cpu_threads_per_process;
}

void write(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Loads `path`; a refusal must say which file it is about, as the launcher prints it alone.
std::optional<LaunchConfig> load(const std::string &path) {
  std::vector<std::string> notes;
  try {
    return accel::cli::load_config_file(path, &notes);
  } catch (const std::runtime_error &error) {
    if (std::string(error.what()).rfind(path, 0) != 0) {
      std::fprintf(stderr, "refusal without the file name: %s\n", error.what());
      __builtin_trap();
    }
    return std::nullopt;
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = (accel_fuzz::scratch_directory() / "config.yaml").string();
  static const std::string again = (accel_fuzz::scratch_directory() / "written.yaml").string();
  write(path, std::string(reinterpret_cast<const char *>(data), size));
  const auto config = load(path);
  if (!config) {
    return 0;
  }
  write(again, accel::cli::config_to_yaml(*config));
  const auto reread = load(again);
  if (!reread || !same(*config, *reread)) {
    std::fprintf(stderr, "config_to_yaml wrote what does not read back the same:\n%s\n",
                 accel::cli::config_to_yaml(*config).c_str());
    __builtin_trap();
  }
  return 0;
}
