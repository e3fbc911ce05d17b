// Mixed precision: the autocast guard, and what the program can ask of fp16 loss scaling. The
// scaling itself is in grad_scaler.cpp; backward and step apply it.
#include "mixed_precision.h"

#include "accelerate/accelerator.h"
#include "runtime.h"

#include <ATen/autocast_mode.h>

namespace accelerate {
namespace detail {

AutocastOff::AutocastOff(c10::DeviceType device_type)
    : device_type_(device_type), previous_enabled_(at::autocast::is_autocast_enabled(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, false);
}

AutocastOff::~AutocastOff() { at::autocast::set_autocast_enabled(device_type_, previous_enabled_); }

} // namespace detail

Accelerator::AutocastGuard::AutocastGuard(Accelerator &accelerator) {
  const auto &rt = accelerator.runtime();
  if (rt.mixed_precision == "no") {
    return;
  }
  active_ = true;
  device_type_ = rt.device.type();
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_,
                                   rt.mixed_precision == "bf16" ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

Accelerator::AutocastGuard::AutocastGuard(AutocastGuard &&other) noexcept
    : active_(other.active_), device_type_(other.device_type_),
      previous_enabled_(other.previous_enabled_), previous_dtype_(other.previous_dtype_) {
  other.active_ = false;
}

Accelerator::AutocastGuard::~AutocastGuard() {
  if (!active_) {
    return;
  }
  // Leaving the outermost autocast region drops the cached low-precision copies of the
  // weights: the optimizer changes the weights before the next forward pass.
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

const std::string &Accelerator::mixed_precision() const { return runtime_->mixed_precision; }

double Accelerator::loss_scale() const {
  return runtime_->scaler ? runtime_->scaler->current_scale() : 1.0;
}

bool Accelerator::optimizer_step_was_skipped() const { return runtime_->step_was_skipped; }

} // namespace accelerate
