// A trainer class in a project header, as many programs write it.
#pragma once
#include <torch/torch.h>

class Trainer {
public:
  explicit Trainer(torch::nn::Linear model) : model_(model), opt_(model->parameters(), 0.1) {}
  double fit(const torch::Tensor &x, const torch::Tensor &y) {
    opt_.zero_grad();
    auto loss = torch::mse_loss(model_->forward(x), y);
    loss.backward();
    opt_.step();
    return loss.item<double>();
  }

private:
  torch::nn::Linear model_;
  torch::optim::SGD opt_;
};
