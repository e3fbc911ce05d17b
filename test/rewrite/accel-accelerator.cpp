// accel-accelerator: `accelerate::Accelerator accelerator;` first in each function that creates
// an optimizer (when the file gets other edits), never twice.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags -I%runtime_include
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: %clangxx -fsyntax-only %torch_flags -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <accelerate/accelerate.h>

// No optimizer here: no Accelerator.
torch::nn::Linear makeModel() { return torch::nn::Linear(4, 1); }
// CHECK-FIXES: torch::nn::Linear makeModel() { return torch::nn::Linear(4, 1); }

// The setup function need not be main.
void run() { torch::nn::Linear model = makeModel();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model(torch::randn({2, 4})).sum().backward();
}
// The first statement shares its line with the brace: the Accelerator goes beside it, since
// the tool does not re-flow the user's lines.
// CHECK-FIXES: void run() { accelerate::Accelerator accelerator; torch::nn::Linear model = makeModel();

// An Accelerator already there is used, not duplicated.
int main() {
  accelerate::Accelerator accelerator;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model(torch::randn({2, 4})).sum().backward();
  run();
}
// CHECK-FIXES: int main() {
// CHECK-FIXES-NEXT: accelerate::Accelerator accelerator;
// CHECK-FIXES-NEXT: torch::nn::Linear model(4, 1);
// CHECK-FIXES: accelerator.backward(model(torch::randn({2, 4})).sum());
