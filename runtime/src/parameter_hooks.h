// The runtime's hooks on a prepared parameter: one before autograd accumulates its gradient
// (the gradient sync writes a first gradient straight into its bucket) and one after (the
// gradient is complete: its bucket may start; the setting checks note a backward).
//
// They live in the parameter's own autograd metadata, as a tensor pre-hook and its
// post-accumulate-grad hook, not on autograd's accumulator node: the node holds the parameter,
// so keeping the node (and hooks on it) alive would keep every prepared parameter alive for
// good. Here the parameter owns its hooks and they hold what they call weakly: a model that
// dies takes its hooks with it, and a sync or an Accelerator that dies leaves hooks that do
// nothing. A parameter has one set of hooks whatever the number of prepares; each prepare
// points them at its sync and checks (the latest wins).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <memory>

namespace accelerate::detail {

class GradientSync;
class SettingChecks;

/// What a parameter's hooks call.
struct ParameterHookTargets {
  std::weak_ptr<GradientSync> sync;
  size_t slot = 0; ///< the parameter's index in `sync`
  std::weak_ptr<SettingChecks> checks;
};

/// The targets of `parameter`'s hooks, installing the hooks on first use (and the pre-hook
/// again if a later Tensor::register_hook cleared it, which LibTorch does to the pre-hooks of
/// a leaf when it installs its own list). Not during a backward pass.
ParameterHookTargets &parameter_hooks(const torch::Tensor &parameter);

/// Whether the backward pass running on this thread accumulates into `parameter`'s .grad:
/// false for torch::autograd::grad and for backward(inputs) that leaves it out, which call a
/// leaf's pre-hooks to hand its gradient back without touching .grad.
bool accumulates_into_grad(const torch::Tensor &parameter);

} // namespace accelerate::detail
