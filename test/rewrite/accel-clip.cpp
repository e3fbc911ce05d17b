// accel-clip: in a training step, torch::nn::utils::clip_grad_norm_ and clip_grad_value_ on a
// vector of parameters become the accelerator's (true gradients under fp16, the whole gradient
// of an accumulation cycle). A loop with a clipping the accelerator cannot do (one tensor,
// error_if_nonfinite) is left as written with accel-training-loop's warning; clipping outside
// a training step stays as it is.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite --rules=clip,step,training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %expect-exit 6 %accel-rewrite --rules=clip,step,training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <cmath>

using namespace torch::nn::utils;

torch::data::datasets::TensorDataset rows() {
  return torch::data::datasets::TensorDataset(torch::ones({8, 4}));
}

void clipped() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      rows().map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    // CHECK-FIXES: {{^}}    accelerator.clip_grad_norm_(model->parameters(), 1.0);
    auto norm = torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5, 2.0);
    // CHECK-FIXES: {{^}}    auto norm = accelerator.clip_grad_norm_(model->parameters(), 0.5, 2.0);
    if (std::isfinite(norm)) {
      clip_grad_value_(model->parameters(), 0.1);
      // CHECK-FIXES: {{^}}      accelerator.clip_grad_value_(model->parameters(), 0.1);
    }
    optimizer.step();
    // CHECK-FIXES: {{^}}    accelerator.step(optimizer);
  }
  // After training, outside any training step: as written.
  clip_grad_value_(model->parameters(), 0.1);
  // CHECK-FIXES: {{^}}  clip_grad_value_(model->parameters(), 0.1);
}

void fails_on_non_finite() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      rows().map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: :[[@LINE-1]]:3: warning: this training is left as written{{.*}}the gradient clipping on line [[@LINE+4]] of this training loop cannot become the accelerator's: it asks to fail on a non-finite norm (error_if_nonfinite){{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    clip_grad_norm_(model->parameters(), 1.0, 2.0, true);
    // CHECK-FIXES: {{^}}    clip_grad_norm_(model->parameters(), 1.0, 2.0, true);
    optimizer.step();
    // CHECK-FIXES: {{^}}    optimizer.step();
  }
}

void clips_one_tensor() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      rows().map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: :[[@LINE-1]]:3: warning: this training is left as written{{.*}}it clips one tensor or a braced list{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    clip_grad_norm_(model->weight, 1.0);
    // CHECK-FIXES: {{^}}    clip_grad_norm_(model->weight, 1.0);
    optimizer.step();
    // CHECK-FIXES: {{^}}    optimizer.step();
  }
}

int main() {
  clipped();
  fails_on_non_finite();
  clips_one_tensor();
}
