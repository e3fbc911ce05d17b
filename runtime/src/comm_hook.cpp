#include "comm_hook.h"

#include <stdexcept>

namespace accelerate::detail {

CommHook parse_comm_hook(const std::string &text) {
  if (text == "no") {
    return CommHook::No;
  }
  if (text == "fp16") {
    return CommHook::FP16;
  }
  if (text == "bf16") {
    return CommHook::BF16;
  }
  if (text == "powersgd") {
    return CommHook::PowerSGD;
  }
  throw std::invalid_argument("accelerate: comm_hook is '" + text +
                              "'; it must be no, fp16, bf16 or powersgd (ACCELERATE_COMM_HOOK, "
                              "accel launch --comm_hook, or Options)");
}

Compression compression_of(const Options &options) {
  Compression compression;
  switch (parse_comm_hook(options.comm_hook)) {
  case CommHook::FP16:
    compression.wire_dtype = c10::ScalarType::Half;
    break;
  case CommHook::BF16:
    compression.wire_dtype = c10::ScalarType::BFloat16;
    break;
  case CommHook::PowerSGD: {
    const auto &chosen = options.power_sgd;
    PowerSgdSettings settings;
    settings.rank = chosen.matrix_approximation_rank.value_or(settings.rank);
    settings.start_iteration = chosen.start_powersgd_iter.value_or(settings.start_iteration);
    settings.min_compression_rate = chosen.min_compression_rate;
    settings.error_feedback = chosen.use_error_feedback;
    settings.warm_start = chosen.warm_start;
    settings.seed = chosen.random_seed;
    compression.power_sgd = settings;
    break;
  }
  case CommHook::No:
    break;
  }
  return compression;
}

} // namespace accelerate::detail
