// The runtime never silently ignores a setting: with gradient accumulation or mixed precision in
// effect, a training step that bypasses what the setting needs (a plain loss.backward(), or
// accelerator.backward outside the accumulate or autocast guard) would train as if the setting
// were not there. This notices it and warns, once per kind, on the main process.
#pragma once

#include "mixed_precision.h"

#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace accelerate::detail {

class SettingChecks : public std::enable_shared_from_this<SettingChecks> {
public:
  static std::shared_ptr<SettingChecks> create(bool main_process, int accumulation_steps,
                                               MixedPrecision precision);

  /// Watches a prepared model's parameters for a backward pass that reaches them outside
  /// Accelerator::backward. Installs nothing when no setting needs watching.
  void watch(const std::vector<torch::Tensor> &parameters);

  /// Held by Accelerator::backward around its backward pass: checks the guards, and tells the
  /// parameters' hooks that this backward is the accelerator's own.
  class Backward {
  public:
    Backward(SettingChecks &checks, bool autocast_enabled);
    ~Backward();
    Backward(const Backward &) = delete;
    Backward &operator=(const Backward &) = delete;

  private:
    SettingChecks &checks_;
  };

  void accumulate_guard_opened() { ++accumulate_guards_; }
  void accumulate_guard_closed() { --accumulate_guards_; }
  void autocast_guard_opened() { autocast_opened_since_backward_ = true; }
  /// A backward pass accumulated into a watched parameter's .grad (parameter_hooks.h).
  void on_parameter_gradient();

  /// The warnings, for tests and the docs: each starts "accelerate: warning:".
  std::string bare_backward_warning() const;
  std::string outside_accumulate_warning() const;
  std::string outside_autocast_warning() const;

private:
  enum Kind { BareBackward, OutsideAccumulate, OutsideAutocast, KindCount };

  SettingChecks(bool main_process, int accumulation_steps, MixedPrecision precision);
  bool accumulating() const { return accumulation_steps_ > 1; }
  bool mixed() const { return precision_ != MixedPrecision::No; }
  std::string accumulation_setting() const; ///< "gradient_accumulation_steps=2"
  std::string precision_setting() const;    ///< "mixed_precision=bf16"
  /// "gradient_accumulation_steps=2 and mixed_precision=bf16": the settings in effect.
  std::string settings_text() const;
  void warn_once(Kind kind, const std::string &message);

  bool main_process_;
  int accumulation_steps_;
  MixedPrecision precision_;
  /// Set while Accelerator::backward runs; read by hooks, which may run on autograd's threads.
  std::atomic<bool> in_accelerator_backward_{false};
  int accumulate_guards_ = 0;
  bool autocast_opened_since_backward_ = false;
  std::atomic<bool> warned_[KindCount] = {};
};

} // namespace accelerate::detail
