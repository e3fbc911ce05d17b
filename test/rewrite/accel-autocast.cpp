// accel-autocast: `auto autocast = accelerator.autocast();` first in the body of each loop that
// runs a training step, after the accumulation guard, once.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp
// Only this rule:
// RUN: %accel-rewrite --rules=autocast %t/input.cpp -o %t/only.cpp -- %torch_flags 2>/dev/null
// RUN: FileCheck %s --check-prefix=ONLY --input-file=%t/only.cpp
// ONLY: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
// ONLY: for (auto &batch : *loader) {
// ONLY-NEXT: auto autocast = accelerator.autocast();
// ONLY-NEXT: optimizer.zero_grad();

#include <torch/torch.h>

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::randn({8, 4})), 2);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model(batch[0].data).sum();
    loss.backward();
    optimizer.step();
  }
  // CHECK-FIXES: for (auto &batch : *loader) {
  // CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate(model);
  // CHECK-FIXES-NEXT: auto autocast = accelerator.autocast();
  // CHECK-FIXES-NEXT: accelerator.zero_grad(optimizer);
  // CHECK-FIXES-NEXT: auto loss = model(batch[0].data).sum();
  // CHECK-FIXES-NEXT: accelerator.backward(loss * accelerator.num_processes());
  // CHECK-FIXES-NEXT: accelerator.step(optimizer);
}
