#include "launch_config.h"

#include "atomic_file.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <type_traits>

namespace accel::cli {
namespace {

// Keys Python Accelerate writes that do not apply to a C++ program.
const std::set<std::string> kPythonOnlyKeys = {
    "deepspeed_config",
    "fsdp_config",
    "megatron_lm_config",
    "dynamo_config",
    "ipex_config",
    "mpirun_config",
    "tpu_env",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "tpu_name",
    "tpu_zone",
    "commands",
    "command_file",
    "main_training_function",
    "downcast_bf16",
    "enable_cpu_affinity",
    "use_mps_device",
    "parallelism_config",
    "fp8_config",
    "tpu_vm",
    "dynamo_backend",
    "megatron_lm",
    "fsdp",
    "deepspeed",
    "mpirun_hostfile",
    "ipex",
};

std::string at(const std::string &path, const YAML::Node &node) {
  const auto mark = node.Mark();
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

std::string where(const std::string &path, const YAML::Node &node, const std::string &key) {
  return at(path, node) + "key '" + key + "': ";
}

// A Python-only key with its default value says nothing worth a note.
bool is_default_value(const YAML::Node &value) {
  if (!value || value.IsNull()) {
    return true;
  }
  if (value.IsSequence() || value.IsMap()) {
    return value.size() == 0;
  }
  const auto text = value.as<std::string>();
  return text == "false" || text == "False" || text == "no" || text == "NO" || text == "main" ||
         text.empty();
}

template <typename T>
T scalar(const std::string &path, const YAML::Node &value, const std::string &key,
         const char *expected) {
  if (!value.IsScalar()) {
    throw std::runtime_error(where(path, value, key) + "expected " + expected);
  }
  try {
    return value.as<T>();
  } catch (const YAML::Exception &) {
    throw std::runtime_error(where(path, value, key) + "expected " + expected + ", got '" +
                             value.Scalar() + "'");
  }
}

// YAML text is Unicode: PyYAML refuses a file that is not UTF-8, and yaml-cpp, which reads any
// bytes, would write such a value back changed (config_to_yaml).
bool is_utf8(const std::string &text) {
  static constexpr uint32_t kLowest[] = {0, 0, 0x80, 0x800, 0x10000}; // by length: no overlongs
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t length = 1;
    uint32_t code = lead;
    if (lead >= 0x80) {
      length = (lead & 0xE0) == 0xC0   ? 2
               : (lead & 0xF0) == 0xE0 ? 3
               : (lead & 0xF8) == 0xF0 ? 4
                                       : 0;
      if (length == 0 || i + length > text.size()) {
        return false;
      }
      code = lead & (0x7F >> length);
      for (size_t k = 1; k < length; ++k) {
        const auto next = static_cast<unsigned char>(text[i + k]);
        if ((next & 0xC0) != 0x80) {
          return false;
        }
        code = (code << 6) | (next & 0x3F);
      }
      if (code < kLowest[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
        return false;
      }
    }
    i += length;
  }
  return true;
}

std::string text(const std::string &path, const YAML::Node &value, const std::string &key,
                 const char *expected) {
  auto result = scalar<std::string>(path, value, key, expected);
  if (!is_utf8(result)) {
    throw std::runtime_error(where(path, value, key) + "not UTF-8 text");
  }
  return result;
}

int bounded_int(const std::string &path, const YAML::Node &value, const std::string &key,
                int lowest, int highest) {
  const int number = scalar<int>(path, value, key, "an integer");
  if (number < lowest || number > highest) {
    throw std::runtime_error(where(path, value, key) + std::to_string(number) +
                             " is out of range [" + std::to_string(lowest) + ", " +
                             std::to_string(highest) + "]");
  }
  return number;
}

std::string one_of(const std::string &path, const YAML::Node &value, const std::string &key,
                   const std::vector<std::string> &allowed) {
  auto text = scalar<std::string>(path, value, key, "a string");
  for (const auto &candidate : allowed) {
    if (text == candidate) {
      return text;
    }
  }
  std::string list;
  for (const auto &candidate : allowed) {
    list += (list.empty() ? "" : ", ") + candidate;
  }
  throw std::runtime_error(where(path, value, key) + "'" + text + "' is not one of " + list);
}

// PyYAML, which Python Accelerate reads configs with, follows YAML 1.1: a plain `NO`, `no`, `on`,
// `~` or `0x1f` is a boolean, null or number there. These are its implicit resolvers; a string
// that one of them matches must be quoted, as PyYAML itself quotes it when it writes.
bool yaml11_reads_as_non_string(const std::string &text) {
  static const std::regex resolvers(
      // bool
      "yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
      // null
      "|~|null|Null|NULL|"
      // int
      "|[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
      "|[-+]?[1-9][0-9_]*(:[0-5]?[0-9])+"
      // float
      "|[-+]?([0-9][0-9_]*)\\.[0-9_]*([eE][-+][0-9]+)?|\\.[0-9_]+([eE][-+][0-9]+)?"
      "|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN)");
  return std::regex_match(text, resolvers);
}

// yaml-cpp writes a lone carriage return (and other control characters) unquoted, where a
// reader takes it for a line break: "\r" came back as null (found by the config_file fuzzer).
bool has_control_character(const std::string &text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      return true;
    }
  }
  return false;
}

} // namespace

void LaunchConfig::override_with(const LaunchConfig &over) {
  auto take = [](auto &mine, const auto &theirs) {
    if (theirs) {
      mine = theirs;
    }
  };
  take(compute_environment, over.compute_environment);
  take(distributed_type, over.distributed_type);
  take(mixed_precision, over.mixed_precision);
  take(use_cpu, over.use_cpu);
  take(num_processes, over.num_processes);
  take(num_machines, over.num_machines);
  take(machine_rank, over.machine_rank);
  take(main_process_ip, over.main_process_ip);
  take(main_process_port, over.main_process_port);
  take(gpu_ids, over.gpu_ids);
  take(rdzv_backend, over.rdzv_backend);
  take(same_network, over.same_network);
  take(debug, over.debug);
  take(gradient_accumulation_steps, over.gradient_accumulation_steps);
  take(num_cpu_threads_per_process, over.num_cpu_threads_per_process);
  take(comm_hook, over.comm_hook);
  take(powersgd_rank, over.powersgd_rank);
  take(powersgd_start_iter, over.powersgd_start_iter);
}

std::string default_config_path() {
  namespace fs = std::filesystem;
  fs::path cache;
  if (const char *hf_home = std::getenv("HF_HOME"); hf_home && *hf_home) {
    cache = hf_home;
  } else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    cache = fs::path(xdg) / "huggingface";
  } else {
    const char *home = std::getenv("HOME");
    cache = fs::path(home && *home ? home : ".") / ".cache" / "huggingface";
  }
  return (cache / "accelerate" / "default_config.yaml").string();
}

LaunchConfig load_config_file(const std::string &path, std::vector<std::string> *notes) {
  // A directory opens as a stream and fails at the first read, with the standard library's
  // words ("basic_filebuf::underflow error") and no path.
  if (std::error_code error; std::filesystem::is_directory(path, error)) {
    throw std::runtime_error(path + ": is a directory, not a config file");
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile &) {
    throw std::runtime_error(path + ": cannot read the config file");
  } catch (const YAML::ParserException &error) {
    throw std::runtime_error(path + ":" + std::to_string(error.mark.line + 1) + ":" +
                             std::to_string(error.mark.column + 1) + ": " + error.msg);
  } catch (const std::ios_base::failure &error) {
    throw std::runtime_error(path + ": cannot read the config file: " + error.what());
  }
  LaunchConfig config;
  if (root.IsNull()) {
    return config; // an empty file sets nothing
  }
  if (!root.IsMap()) {
    throw std::runtime_error(path + ": the config file must be a mapping of keys to values");
  }
  for (const auto &entry : root) {
    if (!entry.first.IsScalar()) {
      // YAML allows a list or a mapping as a key; as<std::string> would throw without a place.
      throw std::runtime_error(at(path, entry.first) + "a key must be a name, not " +
                               (entry.first.IsMap()        ? "a mapping"
                                : entry.first.IsSequence() ? "a list"
                                                           : "empty"));
    }
    const auto key = entry.first.as<std::string>();
    const auto &value = entry.second;
    if (kPythonOnlyKeys.count(key)) {
      if (notes && !is_default_value(value)) {
        notes->push_back("ignoring '" + key + "' from " + path +
                         ": it configures Python Accelerate only");
      }
      continue;
    }
    if (value.IsNull()) {
      continue; // Accelerate writes null for settings that do not apply
    }
    if (key == "compute_environment") {
      config.compute_environment = one_of(path, value, key, {"LOCAL_MACHINE"});
    } else if (key == "distributed_type") {
      config.distributed_type = one_of(path, value, key, {"NO", "MULTI_CPU", "MULTI_GPU"});
    } else if (key == "mixed_precision") {
      config.mixed_precision = one_of(path, value, key, {"no", "fp16", "bf16"});
    } else if (key == "use_cpu") {
      config.use_cpu = scalar<bool>(path, value, key, "true or false");
    } else if (key == "num_processes") {
      config.num_processes = bounded_int(path, value, key, 1, 65536);
    } else if (key == "num_machines") {
      config.num_machines = bounded_int(path, value, key, 1, 65536);
    } else if (key == "machine_rank") {
      config.machine_rank = bounded_int(path, value, key, 0, 65535);
    } else if (key == "main_process_ip") {
      config.main_process_ip = text(path, value, key, "an address");
    } else if (key == "main_process_port") {
      config.main_process_port = bounded_int(path, value, key, 1, 65535);
    } else if (key == "gpu_ids") {
      config.gpu_ids = text(path, value, key, "'all' or a list like 0,1");
    } else if (key == "rdzv_backend") {
      config.rdzv_backend = one_of(path, value, key, {"static"});
    } else if (key == "same_network") {
      config.same_network = scalar<bool>(path, value, key, "true or false");
    } else if (key == "debug") {
      config.debug = scalar<bool>(path, value, key, "true or false");
    } else if (key == "gradient_accumulation_steps") {
      config.gradient_accumulation_steps = bounded_int(path, value, key, 1, 1 << 20);
    } else if (key == "num_cpu_threads_per_process") {
      config.num_cpu_threads_per_process = bounded_int(path, value, key, 1, 4096);
    } else if (key == "comm_hook") {
      config.comm_hook = one_of(path, value, key, {"no", "fp16", "bf16", "powersgd"});
    } else if (key == "powersgd_rank") {
      config.powersgd_rank = bounded_int(path, value, key, 1, kMaxPowerSgdRank);
    } else if (key == "powersgd_start_iter") {
      config.powersgd_start_iter = bounded_int(path, value, key, 0, kMaxPowerSgdStartIter);
    } else {
      throw std::runtime_error(where(path, entry.first, key) + "unknown key");
    }
  }
  if (config.machine_rank && config.num_machines && *config.machine_rank >= *config.num_machines) {
    throw std::runtime_error(path + ": machine_rank " + std::to_string(*config.machine_rank) +
                             " is not below num_machines " + std::to_string(*config.num_machines));
  }
  return config;
}

std::string config_to_yaml(const LaunchConfig &config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  auto put = [&out](const char *key, const auto &value) {
    if (!value) {
      return;
    }
    out << YAML::Key << key << YAML::Value;
    if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, std::string>) {
      if (has_control_character(*value)) {
        out << YAML::DoubleQuoted; // the only style that escapes them
      } else if (yaml11_reads_as_non_string(*value)) {
        out << YAML::SingleQuoted;
      }
    }
    out << *value;
  };
  put("compute_environment", config.compute_environment);
  put("debug", config.debug);
  put("distributed_type", config.distributed_type);
  put("gpu_ids", config.gpu_ids);
  put("machine_rank", config.machine_rank);
  put("main_process_ip", config.main_process_ip);
  put("main_process_port", config.main_process_port);
  put("mixed_precision", config.mixed_precision);
  put("num_machines", config.num_machines);
  put("num_processes", config.num_processes);
  put("rdzv_backend", config.rdzv_backend);
  put("same_network", config.same_network);
  put("use_cpu", config.use_cpu);
  put("gradient_accumulation_steps", config.gradient_accumulation_steps);
  put("num_cpu_threads_per_process", config.num_cpu_threads_per_process);
  put("comm_hook", config.comm_hook);
  put("powersgd_rank", config.powersgd_rank);
  put("powersgd_start_iter", config.powersgd_start_iter);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void write_file_atomically(const std::string &path, const std::string &text, bool overwrite) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (!overwrite && fs::exists(target)) {
    throw std::runtime_error(path + " already exists; not overwriting it");
  }
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path());
  }
  accelerate::detail::write_atomically(
      target,
      [&](const std::string &temporary) {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << text;
        out.flush();
        if (!out) {
          throw std::system_error(errno, std::generic_category());
        }
      },
      overwrite ? accelerate::detail::IfExists::Replace : accelerate::detail::IfExists::Fail);
}

} // namespace accel::cli
