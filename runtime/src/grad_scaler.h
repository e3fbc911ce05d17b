// fp16 loss scaling: LibTorch has no C++ GradScaler, so this is one on ATen's own AMP kernels
// (the ones Python's torch.amp.GradScaler calls).
#pragma once

#include "accelerate/options.h"

#include <torch/torch.h>

#include <unordered_map>
#include <vector>

namespace accelerate::detail {

class GradScaler {
public:
  GradScaler(const GradScalerOptions &options, const torch::Device &device);

  /// The loss times the current scale, for backward.
  torch::Tensor scale(const torch::Tensor &loss) const;
  /// Divides the gradients of `parameters` by the scale and notes whether any is inf or NaN.
  /// Each gradient once per step: those unscaled already in this step are left alone.
  void unscale(const std::vector<torch::Tensor> &parameters);
  /// unscale of the optimizer's parameters.
  void unscale(torch::optim::Optimizer &optimizer);
  /// Unscales if not done yet, then steps the optimizer unless its gradients overflowed.
  /// Returns whether it stepped.
  bool step(torch::optim::Optimizer &optimizer);
  /// Ends the step: backs the scale off when any optimizer's gradients overflowed, grows it
  /// after growth_interval clean steps in a row.
  void update();

  double current_scale() const;
  /// The scale and the count of clean steps, for checkpoints.
  void save(torch::serialize::OutputArchive &archive) const;
  void load(torch::serialize::InputArchive &archive);

private:
  GradScalerOptions options_;
  torch::Tensor scale_;          ///< float32, one element, on the training device
  torch::Tensor growth_tracker_; ///< int32, clean steps since the last change of scale
  /// Whether an optimizer's gradients overflowed: the flags of the unscales that covered them.
  torch::Tensor found_inf(torch::optim::Optimizer &optimizer);

  /// This step's unscaled parameters (alive until the step ends), each with the overflow flag
  /// of the unscale that covered it. Kept by parameter, not by optimizer, so that clipping
  /// needs no prepared optimizer (one may have died with its fold).
  std::unordered_map<const c10::TensorImpl *, torch::Tensor> unscaled_;
};

} // namespace accelerate::detail
