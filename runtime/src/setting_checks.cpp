#include "setting_checks.h"

#include "parameter_hooks.h"

#include <cstdio>

namespace accelerate::detail {

std::shared_ptr<SettingChecks> SettingChecks::create(bool main_process, int accumulation_steps,
                                                     MixedPrecision precision) {
  return std::shared_ptr<SettingChecks>(
      new SettingChecks(main_process, accumulation_steps, precision));
}

SettingChecks::SettingChecks(bool main_process, int accumulation_steps, MixedPrecision precision)
    : main_process_(main_process), accumulation_steps_(accumulation_steps), precision_(precision) {}

void SettingChecks::watch(const std::vector<torch::Tensor> &parameters) {
  if (!accumulating() && !mixed()) {
    return; // nothing a bare backward could bypass: no hooks, no cost
  }
  // The parameter's post-accumulate hook runs when a backward pass accumulates into .grad: any
  // backward, whoever started it (not torch::autograd::grad, which leaves .grad alone). One
  // hook per parameter however often it is prepared; the latest Accelerator's checks get it.
  for (const auto &parameter : parameters) {
    if (parameter.requires_grad()) {
      parameter_hooks(parameter).checks = weak_from_this();
    }
  }
}

void SettingChecks::on_parameter_gradient() {
  if (!in_accelerator_backward_.load(std::memory_order_relaxed) &&
      !warned_[BareBackward].load(std::memory_order_relaxed)) {
    warn_once(BareBackward, bare_backward_warning());
  }
}

SettingChecks::Backward::Backward(SettingChecks &checks, bool autocast_enabled) : checks_(checks) {
  if (checks_.accumulating() && checks_.accumulate_guards_ == 0) {
    checks_.warn_once(OutsideAccumulate, checks_.outside_accumulate_warning());
  }
  // The guard may have ended with the forward pass, before backward: what counts is that one
  // was opened for this step (or that autocast is on now, from a guard held across steps).
  if (checks_.mixed() && !autocast_enabled && !checks_.autocast_opened_since_backward_) {
    checks_.warn_once(OutsideAutocast, checks_.outside_autocast_warning());
  }
  checks_.autocast_opened_since_backward_ = false;
  checks_.in_accelerator_backward_ = true;
}

SettingChecks::Backward::~Backward() { checks_.in_accelerator_backward_ = false; }

std::string SettingChecks::accumulation_setting() const {
  return "gradient_accumulation_steps=" + std::to_string(accumulation_steps_);
}

std::string SettingChecks::precision_setting() const {
  return precision_ == MixedPrecision::BF16 ? "mixed_precision=bf16" : "mixed_precision=fp16";
}

std::string SettingChecks::settings_text() const {
  if (accumulating() && mixed()) {
    return accumulation_setting() + " and " + precision_setting();
  }
  return accumulating() ? accumulation_setting() : precision_setting();
}

std::string SettingChecks::bare_backward_warning() const {
  return "accelerate: warning: a backward pass reached a prepared model's parameters without "
         "accelerator.backward, so " +
         settings_text() +
         " did not apply to it; call accelerator.backward(loss) instead of loss.backward() "
         "(accel-rewrite makes this edit)";
}

std::string SettingChecks::outside_accumulate_warning() const {
  return "accelerate: warning: accelerator.backward ran outside an accelerator.accumulate() "
         "guard, so " +
         accumulation_setting() +
         " does not apply to it: every such step synchronises its gradients and the optimizer "
         "steps on them alone; in a training loop, hold "
         "`auto guard = accelerator.accumulate(model);` in the training step, before the forward "
         "pass (accel-rewrite inserts it)";
}

std::string SettingChecks::outside_autocast_warning() const {
  return "accelerate: warning: accelerator.backward ran with no accelerator.autocast() guard "
         "since the previous step, so " +
         precision_setting() +
         " did not apply to the forward pass; hold `auto autocast = accelerator.autocast();` in "
         "the training step, before the forward pass (accel-rewrite inserts it)";
}

void SettingChecks::warn_once(Kind kind, const std::string &message) {
  if (warned_[kind].exchange(true) || !main_process_) {
    return;
  }
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
}

} // namespace accelerate::detail
