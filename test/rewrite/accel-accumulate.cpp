// accel-accumulate: `auto accumulation = accelerator.accumulate(models...);` first in the
// body of each loop that runs a training step (the innermost loop around a backward call),
// once.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=accumulate,backward %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --allow-empty --check-prefix=QUIET --input-file=%t/messages.txt
// QUIET-NOT: warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=accumulate,backward %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

// Accumulation by hand names its own `accumulation`: the guard takes another name rather than
// hide it (the loop would divide by the guard and not compile).
void by_hand() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  const int accumulation = 2;
  for (int i = 0; i < 4; ++i) {
    (model(torch::randn({2, 4})).sum() / accumulation).backward();
    if ((i + 1) % accumulation == 0) {
      optimizer.step();
    }
  }
}
// CHECK-FIXES: for (int i = 0; i < 4; ++i) {
// CHECK-FIXES-NEXT: auto accumulation_guard = accelerator.accumulate(model);
// CHECK-FIXES-NEXT: accelerator.backward(model(torch::randn({2, 4})).sum() / accumulation);

int main() {
  torch::nn::Linear model(4, 1);
  torch::nn::Linear critic(1, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // The epoch loop holds no backward of its own: no guard there.
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 4; ++i) { // one training step
      auto loss = critic(model(torch::randn({2, 4}))).sum();
      loss.backward();
      optimizer.step();
    }
  }
  // CHECK-FIXES: for (int epoch = 0; epoch < 2; ++epoch) {
  // CHECK-FIXES-NEXT: for (int i = 0; i < 4; ++i) { // one training step
  // CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate(model);
  // CHECK-FIXES-NEXT: auto loss = critic(model(torch::randn({2, 4}))).sum();
  int steps = 0;
  while (steps++ < 3) {
    model(torch::randn({2, 4})).sum().backward();
  }
  // CHECK-FIXES: while (steps++ < 3) {
  // CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate(model);
  // CHECK-FIXES-NEXT: accelerator.backward(model(torch::randn({2, 4})).sum());
  // A [&] lambda names the accelerator and the models of the function it is in.
  auto epoch = [&]() {
    for (int i = 0; i < 2; ++i) {
      model(torch::randn({2, 4})).sum().backward();
    }
  };
  epoch();
  // CHECK-FIXES: auto epoch = [&]() {
  // CHECK-FIXES-NEXT: for (int i = 0; i < 2; ++i) {
  // CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate(model);
  // CHECK-FIXES-NEXT: accelerator.backward(model(torch::randn({2, 4})).sum());
  // An evaluation loop: no backward, no guard.
  for (int i = 0; i < 2; ++i) {
    torch::NoGradGuard no_grad;
    model(torch::randn({2, 4}));
  }
  // CHECK-FIXES: for (int i = 0; i < 2; ++i) {
  // CHECK-FIXES-NEXT: torch::NoGradGuard no_grad;
}
