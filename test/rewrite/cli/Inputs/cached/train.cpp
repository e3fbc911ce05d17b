// A training program whose include block is precompiled by preamble-cache.test.
#include "model.h"

#include <torch/torch.h>

int main() {
  Net model;
#if TRAIN_ON_GPU
  model->to(torch::kCUDA);
#endif
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(torch::data::datasets::TensorDataset(torch::randn({80, 4})).map(torch::data::transforms::Stack<torch::data::TensorExample>()), 8);
  for (auto &batch : *loader) {
    torch::Tensor x = batch.data;
    optimizer.zero_grad();
    torch::Tensor loss = model->forward(x).pow(2).mean();
    loss.backward();
    optimizer.step();
  }
}
