#include "parameter_hooks.h"

#include "gradient_sync.h"
#include "setting_checks.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>

#include <utility>

namespace accelerate::detail {
namespace {

using torch::autograd::variable_list;
using WeakParameter = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

// Before accumulation: a first gradient may go straight into its bucket (GradientSync).
class BeforeAccumulation final : public torch::autograd::FunctionPreHook {
public:
  BeforeAccumulation(std::shared_ptr<ParameterHookTargets> targets, WeakParameter parameter)
      : targets_(std::move(targets)), parameter_(std::move(parameter)) {}
  variable_list operator()(const variable_list &grads) override {
    auto sync = targets_->sync.lock();
    if (!sync) {
      return grads;
    }
    const torch::Tensor parameter(parameter_.lock());
    if (!parameter.defined() || !accumulates_into_grad(parameter)) {
      return grads;
    }
    return sync->place_in_bucket(targets_->slot, grads);
  }
  const std::shared_ptr<ParameterHookTargets> &targets() const { return targets_; }

private:
  std::shared_ptr<ParameterHookTargets> targets_;
  WeakParameter parameter_; // weak: the parameter owns this hook
};

// After accumulation: .grad holds this backward's gradient.
class AfterAccumulation final : public torch::autograd::PostAccumulateGradHook {
public:
  AfterAccumulation(std::shared_ptr<ParameterHookTargets> targets,
                    std::unique_ptr<torch::autograd::PostAccumulateGradHook> previous)
      : targets_(std::move(targets)), previous_(std::move(previous)) {}
  void operator()(const torch::autograd::Variable &parameter) override {
    if (previous_) {
      (*previous_)(parameter); // a hook that was there before ours keeps working
    }
    if (auto checks = targets_->checks.lock()) {
      checks->on_parameter_gradient();
    }
    if (auto sync = targets_->sync.lock()) {
      sync->on_gradient_ready(targets_->slot);
    }
  }
  const std::shared_ptr<ParameterHookTargets> &targets() const { return targets_; }

private:
  std::shared_ptr<ParameterHookTargets> targets_;
  std::unique_ptr<torch::autograd::PostAccumulateGradHook> previous_;
};

} // namespace

ParameterHookTargets &parameter_hooks(const torch::Tensor &parameter) {
  // The post-accumulate hook is the record: nothing but another set_post_acc_grad_hooks
  // replaces it, while Tensor::register_hook clears a leaf's pre-hooks.
  auto &slot = torch::autograd::impl::post_acc_grad_hooks(parameter);
  std::shared_ptr<ParameterHookTargets> targets;
  if (auto *ours = dynamic_cast<AfterAccumulation *>(slot.get())) {
    targets = ours->targets();
  } else {
    targets = std::make_shared<ParameterHookTargets>();
    torch::autograd::impl::set_post_acc_grad_hooks(
        parameter, std::make_unique<AfterAccumulation>(targets, std::move(slot)));
  }
  bool has_pre_hook = false;
  for (const auto &hook : torch::autograd::impl::hooks(parameter)) {
    const auto *before = dynamic_cast<const BeforeAccumulation *>(hook.get());
    has_pre_hook = has_pre_hook || (before != nullptr && before->targets() == targets);
  }
  if (!has_pre_hook) {
    torch::autograd::impl::add_hook(
        parameter,
        std::make_unique<BeforeAccumulation>(targets, WeakParameter(parameter.getIntrusivePtr())));
  }
  return *targets;
}

bool accumulates_into_grad(const torch::Tensor &parameter) {
  // Empty: a plain backward(), which runs every node it reaches (Note [Exec info]).
  const auto *exec_info = torch::autograd::get_current_graph_task_exec_info();
  if (exec_info == nullptr || exec_info->empty()) {
    return true;
  }
  const auto accumulator = torch::autograd::impl::try_get_grad_accumulator(parameter);
  if (!accumulator) {
    return false;
  }
  const auto found = exec_info->find(accumulator.get());
  return found != exec_info->end() && found->second.needed_;
}

} // namespace accelerate::detail
