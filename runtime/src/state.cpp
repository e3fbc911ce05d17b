#include "accelerate/state.h"

#include <cstdlib>
#include <stdexcept>

namespace accelerate {
namespace {

int parse_int(const EnvironmentLookup &lookup, const std::string &name, int fallback) {
  const auto text = lookup(name);
  if (!text || text->empty()) {
    return fallback;
  }
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(*text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  // SLURM writes "2(x3)" for per-node task counts; only the leading number matters there.
  const bool trailing_ok = used == text->size() || (used > 0 && (*text)[used] == '(');
  if (used == 0 || !trailing_ok || value < 0) {
    throw std::invalid_argument("accelerate: environment variable " + name + "='" + *text +
                                "' is not a non-negative integer");
  }
  return value;
}

bool is_set(const EnvironmentLookup &lookup, const std::string &name) {
  const auto text = lookup(name);
  return text && !text->empty();
}

// Each launcher names the same four facts differently.
struct LauncherVariables {
  const char *launcher;
  const char *rank;
  const char *world_size;
  const char *local_rank;
  const char *local_world_size;
};

constexpr LauncherVariables kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

void check_consistent(const ProcessInfo &info, const LauncherVariables &vars) {
  const std::string who = std::string(" (from ") + info.launcher + " variables)";
  if (info.world_size < 1) {
    throw std::invalid_argument(std::string("accelerate: ") + vars.world_size + " must be >= 1" +
                                who);
  }
  if (info.rank >= info.world_size) {
    throw std::invalid_argument("accelerate: rank " + std::to_string(info.rank) +
                                " is not below the world size " + std::to_string(info.world_size) +
                                who);
  }
  if (info.local_world_size < 1 || info.local_rank >= info.local_world_size) {
    throw std::invalid_argument("accelerate: local rank " + std::to_string(info.local_rank) +
                                " is not below the local world size " +
                                std::to_string(info.local_world_size) + who);
  }
  if (info.master_port < 1 || info.master_port > 65535) {
    throw std::invalid_argument("accelerate: MASTER_PORT=" + std::to_string(info.master_port) +
                                " is not a TCP port");
  }
}

} // namespace

std::string first_host_of_slurm_nodelist(const std::string &nodelist) {
  std::string host;
  for (size_t i = 0; i < nodelist.size(); ++i) {
    const char c = nodelist[i];
    if (c == ',') {
      break;
    }
    if (c != '[') {
      host += c;
      continue;
    }
    // A bracket holds ranges and single numbers; the first one starts the list.
    const size_t end = nodelist.find_first_of(",-]", i + 1);
    if (end == std::string::npos) {
      throw std::invalid_argument("accelerate: malformed SLURM_JOB_NODELIST '" + nodelist + "'");
    }
    host += nodelist.substr(i + 1, end - i - 1);
    break;
  }
  return host;
}

ProcessInfo detect_process_info(const EnvironmentLookup &lookup) {
  ProcessInfo info;
  for (const auto &vars : kLaunchers) {
    if (!is_set(lookup, vars.rank) || !is_set(lookup, vars.world_size)) {
      continue;
    }
    info.launcher = vars.launcher;
    info.rank = parse_int(lookup, vars.rank, 0);
    info.world_size = parse_int(lookup, vars.world_size, 1);
    info.local_rank = parse_int(lookup, vars.local_rank, info.rank);
    info.local_world_size = parse_int(lookup, vars.local_world_size, info.world_size);
    if (info.launcher == "slurm" && is_set(lookup, "SLURM_JOB_NODELIST")) {
      info.master_addr = first_host_of_slurm_nodelist(*lookup("SLURM_JOB_NODELIST"));
    }
    if (is_set(lookup, "MASTER_ADDR")) {
      info.master_addr = *lookup("MASTER_ADDR");
    }
    info.master_port = parse_int(lookup, "MASTER_PORT", info.master_port);
    check_consistent(info, vars);
    return info;
  }
  return info;
}

ProcessInfo detect_process_info() {
  return detect_process_info([](const std::string &name) -> std::optional<std::string> {
    const char *value = std::getenv(name.c_str());
    if (value == nullptr) {
      return std::nullopt;
    }
    return std::string(value);
  });
}

} // namespace accelerate
