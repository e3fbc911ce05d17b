// accel-prepare: accelerator.prepare(models..., optimizers..., schedulers...) after the last
// of their definitions, before the training loop; warnings where that is not safe.
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <memory>

struct Plain : torch::nn::Module {
  torch::nn::Linear fc = register_module("fc", torch::nn::Linear(4, 1));
};

// A GAN: two models, two optimizers, a scheduler.
void gan() {
  torch::nn::Linear generator(4, 4);
  auto discriminator = std::make_shared<Plain>();
  torch::optim::Adam g_optimizer(generator->parameters());
  torch::optim::Adam d_optimizer(discriminator->parameters()); // trailing comment
  torch::optim::StepLR scheduler(g_optimizer, 10);
  // CHECK-FIXES: torch::optim::Adam d_optimizer(discriminator->parameters()); // trailing comment
  // CHECK-FIXES-NEXT: torch::optim::StepLR scheduler(g_optimizer, 10);
  // CHECK-FIXES-NEXT: accelerator.prepare(generator, discriminator, g_optimizer, d_optimizer, scheduler);
  for (int step = 0; step < 2; ++step) {
    discriminator->fc(generator(torch::randn({2, 4}))).sum().backward();
    g_optimizer.step();
    d_optimizer.step();
    scheduler.step();
  }
}

// Parameter groups gathered first: the model is the one the statements filling them read.
void groups() {
  torch::nn::Linear model(4, 1);
  torch::nn::Linear unrelated(4, 1);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{model->weight},
                      std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(std::vector<torch::Tensor>{model->bias},
                      std::make_unique<torch::optim::SGDOptions>(0.01));
  torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(0.1));
  // CHECK-FIXES: torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(0.1));
  // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
  unrelated(model(torch::randn({2, 4}))).sum().backward();
  optimizer.step();
}

// The model comes from the caller.
void train(torch::nn::Linear &model) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:31: warning: model 'model' is created outside 'train'; call accelerator.prepare(model, optimizer) where both are in scope, before training [accel-prepare]
  model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}

// The optimizer is re-created inside the loop.
void recreated() {
  torch::nn::Linear model(4, 1);
  for (int epoch = 0; epoch < 2; ++epoch) {
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:23: warning: optimizer 'optimizer' is created inside a loop or block of 'recreated'; create it once before the training loop and call accelerator.prepare on it there [accel-prepare]
    model(torch::randn({2, 4})).sum().backward();
    optimizer.step();
  }
}

int main() {
  gan();
  groups();
  torch::nn::Linear model(4, 1);
  train(model);
  recreated();
}
