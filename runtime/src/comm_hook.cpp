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
  throw std::invalid_argument("accelerate: comm_hook is '" + text +
                              "'; it must be no, fp16 or bf16 (ACCELERATE_COMM_HOOK, "
                              "accel launch --comm_hook, or Options)");
}

std::optional<c10::ScalarType> wire_dtype(CommHook hook) {
  switch (hook) {
  case CommHook::FP16:
    return c10::ScalarType::Half;
  case CommHook::BF16:
    return c10::ScalarType::BFloat16;
  case CommHook::No:
    break;
  }
  return std::nullopt;
}

} // namespace accelerate::detail
