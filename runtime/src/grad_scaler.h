// fp16 loss scaling: LibTorch has no C++ GradScaler, so this is one on ATen's own AMP kernels
// (the ones Python's torch.amp.GradScaler calls).
#pragma once

#include "accelerate/options.h"

#include <torch/torch.h>

#include <map>

namespace accelerate::detail {

class GradScaler {
public:
  GradScaler(const GradScalerOptions &options, const torch::Device &device);

  /// The loss times the current scale, for backward.
  torch::Tensor scale(const torch::Tensor &loss) const;
  /// Divides the optimizer's gradients by the scale and notes whether any is inf or NaN. Once
  /// per optimizer and step; later calls in the same step do nothing.
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
  /// This step's overflow flag per optimizer, present once its gradients were unscaled.
  std::map<const torch::optim::Optimizer *, torch::Tensor> found_inf_;
};

} // namespace accelerate::detail
