// Autocast state of the calling thread, switched on by Accelerator::autocast and off for the
// span of a backward pass.
#pragma once

#include <c10/core/DeviceType.h>

namespace accelerate::detail {

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
