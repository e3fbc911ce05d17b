#pragma once
#include <torch/torch.h>

namespace proj {
inline void step(torch::optim::Optimizer &optimizer, torch::Tensor loss) {
  optimizer.zero_grad();
  torch::autograd::backward({loss});
  optimizer.step();
}
} // namespace proj
