// Mixed precision: the autocast guard, and what the program can ask of fp16 loss scaling. The
// scaling itself is in grad_scaler.cpp; backward and step apply it.
#include "mixed_precision.h"

#include "accelerate/accelerator.h"
#include "runtime.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

namespace accelerate {
namespace detail {

MixedPrecision parse_mixed_precision(const std::string &text) {
  if (text == "no") {
    return MixedPrecision::No;
  }
  if (text == "bf16") {
    return MixedPrecision::BF16;
  }
  if (text == "fp16") {
    return MixedPrecision::FP16;
  }
  throw std::invalid_argument("accelerate: mixed_precision is '" + text +
                              "'; it must be no, bf16 or fp16 (ACCELERATE_MIXED_PRECISION or "
                              "Options)");
}

c10::ScalarType autocast_dtype(MixedPrecision precision) {
  return precision == MixedPrecision::FP16 ? at::kHalf : at::kBFloat16;
}

AutocastOff::AutocastOff(c10::DeviceType device_type)
    : device_type_(device_type), previous_enabled_(at::autocast::is_autocast_enabled(device_type)) {
  at::autocast::set_autocast_enabled(device_type_, false);
}

AutocastOff::~AutocastOff() { at::autocast::set_autocast_enabled(device_type_, previous_enabled_); }

} // namespace detail

Accelerator::AutocastGuard::AutocastGuard(Accelerator &accelerator) {
  auto &rt = accelerator.runtime();
  const auto precision = rt.process.mixed_precision();
  if (precision == detail::MixedPrecision::No) {
    return;
  }
  rt.setting_checks->autocast_guard_opened();
  active_ = true;
  device_type_ = rt.process.device.type();
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, detail::autocast_dtype(precision));
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

const std::string &Accelerator::mixed_precision() const {
  return runtime_->process.options.mixed_precision;
}

double Accelerator::loss_scale() const {
  return runtime_->prepared.scaler ? runtime_->prepared.scaler->current_scale() : 1.0;
}

bool Accelerator::optimizer_step_was_skipped() const {
  return runtime_->gradients.step_was_skipped;
}

} // namespace accelerate
