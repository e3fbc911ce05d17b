// Settings of an Accelerator. Each can also come from the environment that `accel launch`
// sets (ACCELERATE_*), which a value given here overrides.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace accelerate {

struct Options {
  /// "gloo", "nccl" or "" (choose: NCCL on CUDA, Gloo on CPU). Env: ACCELERATE_BACKEND.
  std::string backend;
  /// Train on the CPU even when CUDA is available. Env: ACCELERATE_USE_CPU=true.
  std::optional<bool> cpu;
  /// Rendezvous and collective timeout. Env: ACCELERATE_TIMEOUT (seconds). Default 30 min.
  std::optional<std::chrono::milliseconds> timeout;
  /// Steps whose gradients are summed locally before one synchronised optimizer step; see
  /// Accelerator::accumulate. Env: ACCELERATE_GRADIENT_ACCUMULATION_STEPS. Default 1.
  std::optional<int> gradient_accumulation_steps;
  /// Gradient bucket size for the all-reduce (DDP's bucket_cap_mb): larger buckets mean fewer
  /// collectives, smaller ones start communicating earlier in backward.
  double bucket_cap_mb = 25.0;
  /// The first bucket is smaller so that communication starts as early as possible.
  double first_bucket_cap_mb = 1.0;
  /// Prepared loaders give every process the same number of equal-size batches by wrapping
  /// the tail of the dataset around to its start (see gather_for_metrics).
  bool even_batches = true;
};

} // namespace accelerate
