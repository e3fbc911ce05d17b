// The Accelerator goes into main when main prints and calls the functions that set up
// training: main's own lines are printed once, and the setup functions get the accelerator as
// their first parameter. A setup function whose model comes from its caller by reference
// prepares that model itself.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: not grep warning: %t/messages.txt
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <iostream>

struct Net : torch::nn::Module {
  torch::nn::Linear fc = register_module("fc", torch::nn::Linear(4, 1));
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
};

auto make_dataset() {
  return torch::data::datasets::TensorDataset(torch::randn({64, 4}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

double train(int epochs, int64_t batch) {
  // CHECK-FIXES: double train(accelerate::Accelerator &accelerator, int epochs, int64_t batch) {
  // CHECK-FIXES-NOT: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(model, optimizer);
  auto loader = torch::data::make_data_loader(make_dataset(), batch);
  double last = 0;
  for (int e = 0; e < epochs; ++e) {
    double total = 0;
    int n = 0;
    for (auto &b : *loader) {
      optimizer.zero_grad();
      auto loss = model->forward(b.data).pow(2).mean();
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++n;
    }
    last = total / n;
    // CHECK-FIXES: last = accelerator.reduce(total, "mean") / n;
  }
  return last;
}

void fit_given(Net &net, int64_t batch) {
  // CHECK-FIXES: void fit_given(accelerate::Accelerator &accelerator, Net &net, int64_t batch) {
  torch::optim::SGD optimizer(net.parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(net, optimizer);
  auto loader = torch::data::make_data_loader(make_dataset(), batch);
  for (auto &b : *loader) {
    optimizer.zero_grad();
    net.forward(b.data).pow(2).sum().backward();
    // A loss summed over the batch: the averaged gradients must add up to the global batch's.
    // CHECK-FIXES: accelerator.backward(net.forward(b.data).pow(2).sum() * accelerator.num_processes());
    optimizer.step();
  }
}

int main() {
  // CHECK-FIXES: int main() {
  // CHECK-FIXES: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  std::cout << "starting\n";
  // CHECK-FIXES: accelerator.print() << "starting\n";
  double loss = train(2, 8);
  // CHECK-FIXES: double loss = train(accelerator, 2, 8);
  std::cout << "final " << loss << "\n";
  Net net;
  fit_given(net, 8);
  // CHECK-FIXES: fit_given(accelerator, net, 8);
  std::cout << "done\n";
  // CHECK-FIXES: accelerator.print() << "done\n";
}
