// Where this process sits in a distributed job, read from the launcher's environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace accelerate {

/// This process's place in the job. With no launcher variables it is the single process of a
/// one-process job, and the runtime adds nothing to the training step.
struct ProcessInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// Which variables were read: "none", "torchrun" (also accel launch), "mpi" (OpenMPI),
  /// "pmi" (MPICH, Intel MPI) or "slurm".
  std::string launcher = "none";

  bool distributed() const { return world_size > 1; }
};

/// Looks an environment variable up; returns nothing when it is unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string &)>;

/// Reads the process's place from the real environment.
ProcessInfo detect_process_info();

/// Reads the process's place through `lookup`, in this order: RANK/WORLD_SIZE (accel launch,
/// torchrun), OMPI_COMM_WORLD_* (OpenMPI), PMI_* (MPICH), SLURM_* (srun). Throws
/// std::invalid_argument naming the variable when a value is malformed or inconsistent.
ProcessInfo detect_process_info(const EnvironmentLookup &lookup);

/// The first host of a SLURM node list: "node[03-05,9],gpu1" gives "node03".
std::string first_host_of_slurm_nodelist(const std::string &nodelist);

} // namespace accelerate
