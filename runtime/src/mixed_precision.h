// The mixed-precision setting, and the autocast state of the calling thread, switched on by
// Accelerator::autocast and off for the span of a backward pass.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace accelerate::detail {

/// Options::mixed_precision, parsed.
enum class MixedPrecision { No, BF16, FP16 };

/// "no", "bf16" or "fp16"; anything else throws std::invalid_argument naming it and where the
/// setting comes from.
MixedPrecision parse_mixed_precision(const std::string &text);

/// The dtype autocast computes in (meaningful unless No).
c10::ScalarType autocast_dtype(MixedPrecision precision);

/// Turns autocast off for `device_type` while it lives, restoring what was there after.
class AutocastOff {
public:
  explicit AutocastOff(c10::DeviceType device_type);
  ~AutocastOff();
  AutocastOff(const AutocastOff &) = delete;
  AutocastOff &operator=(const AutocastOff &) = delete;

private:
  c10::DeviceType device_type_;
  bool previous_enabled_;
};

} // namespace accelerate::detail
