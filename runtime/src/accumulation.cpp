// Gradient accumulation and the optimizer step: Accelerator::accumulate, step, zero_grad,
// clip_grad_norm_. See docs/design.md, "The optimizer step".
#include "accelerate/accelerator.h"

#include "runtime.h"

#include <cmath>
#include <vector>

namespace accelerate {

Accelerator::AccumulateGuard::AccumulateGuard(Accelerator &accelerator)
    : accelerator_(&accelerator) {
  auto &rt = accelerator.runtime();
  rt.setting_checks->accumulate_guard_opened();
  ++rt.gradients.open_accumulate_guards;
  // A cycle ends every N steps and with the last batch of a prepared loader, so no gradient
  // is left unapplied at the end of an epoch.
  auto &gradients = rt.gradients;
  auto &step = gradients.position.accumulation_step;
  if (rt.prepared.loader_context->end_of_dataloader) {
    step = 0;
    gradients.sync_gradients = true;
  } else {
    step = (step + 1) % rt.process.accumulation_steps();
    gradients.sync_gradients = step == 0;
  }
  gradients.optimizer_stepped = false;
  for (auto &sync : gradients.live_syncs()) {
    sync->set_enabled(gradients.communicates());
  }
}

Accelerator::AccumulateGuard::AccumulateGuard(AccumulateGuard &&other) noexcept
    : accelerator_(other.accelerator_) {
  other.accelerator_ = nullptr;
}

Accelerator::AccumulateGuard::~AccumulateGuard() {
  if (accelerator_ == nullptr) {
    return;
  }
  // Outside a guard every backward synchronises again, and every step steps.
  auto &rt = accelerator_->runtime();
  rt.setting_checks->accumulate_guard_closed();
  if (--rt.gradients.open_accumulate_guards == 0) {
    rt.gradients.sync_gradients = true;
  }
  for (auto &sync : rt.gradients.live_syncs()) {
    sync->set_enabled(rt.gradients.communicates());
  }
}

bool Accelerator::sync_gradients() const { return runtime_->gradients.sync_gradients; }

int Accelerator::gradient_accumulation_steps() const {
  return runtime_->process.accumulation_steps();
}

bool Accelerator::step(torch::optim::Optimizer &optimizer) {
  auto &rt = *runtime_;
  if (!rt.gradients.sync_gradients) {
    return false;
  }
  // Applied (or, after an fp16 overflow, discarded): the next zero_grad may clear them.
  rt.gradients.position.unapplied_gradients = false;
  bool stepped = true;
  if (rt.prepared.scaler) {
    stepped = rt.prepared.scaler->step(optimizer);
    rt.prepared.scaler->update();
    rt.gradients.step_was_skipped = !stepped;
    // A skipped step is no step for the scheduler either.
    rt.gradients.optimizer_stepped = rt.gradients.optimizer_stepped || stepped;
  } else {
    optimizer.step();
    rt.gradients.step_was_skipped = false;
    rt.gradients.optimizer_stepped = true;
  }
  // Local SGD for the whole run: the processes' parameters meet every K calls. A step that
  // fp16 skipped on one process only counts too, so that all of them average together.
  if (rt.gradients.local_sgd_run &&
      ++rt.gradients.position.local_sgd_steps_taken % *rt.process.options.local_sgd_steps == 0) {
    detail::average_parameters(rt);
  }
  return stepped;
}

bool Accelerator::step(torch::optim::LRScheduler &scheduler) {
  // Outside accumulate() there is no cycle: the scheduler follows the program's calls, except
  // after an fp16 step skipped for overflow.
  const bool in_cycle = runtime_->process.accumulation_steps() > 1;
  if ((in_cycle && !runtime_->gradients.optimizer_stepped) ||
      runtime_->gradients.step_was_skipped) {
    return false;
  }
  scheduler.step();
  return true;
}

void Accelerator::zero_grad(torch::optim::Optimizer &optimizer, bool set_to_none) {
  // Without accumulation every step is whole: clear as asked. With it, keep the gradients of
  // a cycle until the optimizer has used them, wherever the loop calls zero_grad (first in
  // the step, as LibTorch's examples do, or after the step).
  if (runtime_->process.accumulation_steps() == 1 ||
      !runtime_->gradients.position.unapplied_gradients) {
    optimizer.zero_grad(set_to_none);
  }
}

void Accelerator::zero_grad(torch::nn::Module &module, bool set_to_none) {
  if (runtime_->process.accumulation_steps() == 1 ||
      !runtime_->gradients.position.unapplied_gradients) {
    module.zero_grad(set_to_none);
  }
}

namespace {

// The total norm of the gradients as they are, without clipping.
double gradient_norm(const std::vector<torch::Tensor> &parameters, double norm_type) {
  std::vector<torch::Tensor> norms;
  for (const auto &parameter : parameters) {
    if (parameter.grad().defined()) {
      norms.push_back(parameter.grad().detach().norm(norm_type).to(torch::kDouble).cpu());
    }
  }
  if (norms.empty()) {
    return 0.0;
  }
  const auto all = torch::stack(norms);
  return (std::isinf(norm_type) ? all.max() : all.norm(norm_type)).item<double>();
}

} // namespace

double Accelerator::clip_grad_norm_(const std::vector<torch::Tensor> &parameters, double max_norm,
                                    double norm_type) {
  if (!runtime_->gradients.sync_gradients) {
    // Clipping a cycle's partial sum would change what the cycle adds up to.
    return gradient_norm(parameters, norm_type);
  }
  if (runtime_->prepared.scaler) {
    // Clip the true gradients, not the scaled ones. By parameter: no prepared optimizer is
    // needed (one from a finished fold may be gone); the optimizer's step takes these
    // parameters' overflow into account.
    runtime_->prepared.scaler->unscale(parameters);
  }
  return torch::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<torch::Tensor> &parameters,
                                   double clip_value) {
  if (!runtime_->gradients.sync_gradients) {
    return;
  }
  if (runtime_->prepared.scaler) {
    runtime_->prepared.scaler->unscale(parameters);
  }
  torch::nn::utils::clip_grad_value_(parameters, clip_value);
}

} // namespace accelerate
