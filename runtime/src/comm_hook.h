// Options::comm_hook: gradient compression for the all-reduce, as DDP's communication hooks.
// fp16/bf16 (fp16_compress_hook, bf16_compress_hook): the averaged gradients of a bucket travel
// in a 16-bit dtype and are widened back when the sum arrives. powersgd (powerSGD_hook): each
// gradient matrix travels as two low-rank factors (power_sgd.h).
#pragma once

#include "accelerate/options.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>

namespace accelerate::detail {

enum class CommHook { No, FP16, BF16, PowerSGD };

/// "no", "fp16", "bf16" or "powersgd"; anything else throws std::invalid_argument naming it and
/// where the setting comes from.
CommHook parse_comm_hook(const std::string &text);

/// PowerSGD's settings once resolved (power_sgd.h; Options::power_sgd names them as DDP does).
struct PowerSgdSettings {
  int rank = 1;                      ///< r, matrix_approximation_rank
  int64_t start_iteration = 1000;    ///< start_powerSGD_iter: steps summed uncompressed first
  double min_compression_rate = 2.0; ///< a matrix is compressed only if it shrinks this much
  bool error_feedback = true;
  bool warm_start = true;
  uint64_t seed = 0; ///< Q's first values; the same on every process
};

/// How a model's gradient buckets are compressed: at most one of the two is set.
struct Compression {
  /// The dtype gradients are summed in (fp16, bf16).
  std::optional<c10::ScalarType> wire_dtype;
  /// Low-rank factors instead of matrices (powersgd).
  std::optional<PowerSgdSettings> power_sgd;
};

/// What `options` (resolved: comm_hook and power_sgd's fields set) ask for.
Compression compression_of(const Options &options);

} // namespace accelerate::detail
