// A real LibTorch training program parses against the LibTorch headers the tool was built
// with, given no flags at all, and -o writes it back byte for byte (no rules exist yet).
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %accel-rewrite %s -o %t/train.cpp 2>&1 | FileCheck %s --allow-empty --check-prefix=QUIET
// QUIET-NOT: {{.}}
// RUN: diff %s %t/train.cpp

#include <torch/torch.h>

#include <iostream>

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(register_module("fc1", torch::nn::Linear(8, 16))),
              fc2(register_module("fc2", torch::nn::Linear(16, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

int main() {
  torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), /*lr=*/0.01);
  torch::Tensor inputs = torch::randn({64, 8}), targets = torch::randn({64, 1});
  for (int epoch = 0; epoch < 3; ++epoch) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(inputs.to(device)), targets.to(device));
    loss.backward();
    optimizer.step();
    std::cout << "epoch " << epoch << " loss " << loss.item<float>() << "\n";
  }
  torch::save(model, "model.pt");
}
