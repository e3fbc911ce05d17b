// A training program whose include block is precompiled by preamble-cache.test.
#include "model.h"

#include <torch/torch.h>

int main() {
  Net model;
#if TRAIN_ON_GPU
  model->to(torch::kCUDA);
#endif
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 10; ++step) {
    torch::Tensor x = torch::randn({8, 4});
    optimizer.zero_grad();
    torch::Tensor loss = model->forward(x).pow(2).mean();
    loss.backward();
    optimizer.step();
  }
}
