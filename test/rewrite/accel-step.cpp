// accel-step: in a loop that runs a training step, optimizer.step(), scheduler.step(),
// optimizer.zero_grad() and a loop clearing the model's gradients by hand become
// accelerator.step(...) and accelerator.zero_grad(...); a
// scheduler stepped once per epoch and calls outside training loops stay as they are.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=step %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=step %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <memory>

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::StepLR per_batch(optimizer, 100);
  torch::optim::StepLR per_epoch(optimizer, 10);
  auto adam = std::make_unique<torch::optim::Adam>(model->parameters());
  torch::optim::LBFGS lbfgs(model->parameters());
  optimizer.zero_grad();
  // CHECK-FIXES: {{^}}  optimizer.zero_grad();
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int i = 0; i < 4; ++i) {
      optimizer.zero_grad();
      // CHECK-FIXES: accelerator.zero_grad(optimizer);
      adam->zero_grad(/*set_to_none=*/false);
      // CHECK-FIXES: accelerator.zero_grad(*adam, /*set_to_none=*/false);
      model->zero_grad();
      // CHECK-FIXES: accelerator.zero_grad(*model);
      // Cleared by hand in a loop over the model's parameters: the model's zero_grad, keeping
      // the tensors as zero_() did. Any other clearing by hand is said.
      for (auto &p : model->parameters()) {
        if (p.grad().defined()) {
          p.grad().zero_();
        }
      }
      // CHECK-FIXES: {{^}}      accelerator.zero_grad(*model, /*set_to_none=*/false);{{$}}
      // CHECK-FIXES-NOT: p.grad().zero_();
      for (auto &p : model->parameters())
        p.mutable_grad().fill_(0);
      // CHECK-FIXES: {{^}}      accelerator.zero_grad(*model, /*set_to_none=*/false);{{$}}
      auto weights = model->parameters();
      weights[0].grad().zero_();
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: this clears a gradient by hand, every step: under gradient accumulation (accel launch --gradient_accumulation_steps) it would clear the gradients the cycle is accumulating; clear them with optimizer.zero_grad() or model->zero_grad() (accel-rewrite makes them the accelerator's, which keep a cycle's gradients) [accel-step]
      auto loss = model(torch::randn({2, 4})).sum();
      loss.backward();
      optimizer.step();
      // CHECK-FIXES: accelerator.step(optimizer);
      adam->step();
      // CHECK-FIXES: accelerator.step(*adam);
      per_batch.step();
      // CHECK-FIXES: accelerator.step(per_batch);
      lbfgs.step([&] { return model(torch::randn({2, 4})).sum(); });
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: this optimizer step takes a closure, which accelerator.step does not; under gradient accumulation or fp16, step only when accelerator.sync_gradients() and check accelerator.optimizer_step_was_skipped() by hand [accel-step]
    }
    per_epoch.step();
    // CHECK-FIXES: {{^}}    per_epoch.step();
  }
  // After the training loop (here a loop with no backward; usually the step that flushes the
  // last micro-batches of an accumulation written by hand): still the prepared optimizer's
  // gradients, which accelerator.backward scaled under fp16, so the accelerator's step.
  for (int i = 0; i < 2; ++i) {
    optimizer.step();
    // CHECK-FIXES: {{^}}    accelerator.step(optimizer);
  }
}

// No accelerator here and no optimizer created: left to the warning of accel-backward.
void step_elsewhere(torch::optim::Optimizer &optimizer, torch::Tensor loss) {
  while (true) {
    loss.backward();
    optimizer.step();
    // CHECK-FIXES: {{^}}    optimizer.step();
  }
}
