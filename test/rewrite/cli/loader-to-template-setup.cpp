// main makes the model and the loader and hands them to a function template that creates the
// optimizer and trains (`template <typename Loader> void train(model, Loader &loader)`, the
// loader's type deduced): main declares the Accelerator, prepares the loader with it and
// passes it in; the template prepares its model and optimizer. main need not print anything
// for this: the loader alone needs main's Accelerator.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: not grep warning: %t/messages.txt
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

struct Net : torch::nn::Module {
  torch::nn::Linear fc = register_module("fc", torch::nn::Linear(4, 1));
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
};

auto make_dataset() {
  return torch::data::datasets::TensorDataset(torch::randn({64, 4}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

template <typename Loader> void train(std::shared_ptr<Net> model, Loader &loader) {
  // CHECK-FIXES: template <typename Loader> void train(accelerate::Accelerator &accelerator, std::shared_ptr<Net> model, Loader &loader) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(model, optimizer);
  auto it = loader.begin();
  while (it != loader.end()) {
    optimizer.zero_grad();
    model->forward(it->data).mean().backward();
    // CHECK-FIXES: accelerator.backward(model->forward(it->data).mean());
    optimizer.step();
    ++it;
  }
}

int main() {
  // CHECK-FIXES: int main() {
  // CHECK-FIXES: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  auto model = std::make_shared<Net>();
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  train(model, *loader);
  // CHECK-FIXES: train(accelerator, model, *loader);
}
