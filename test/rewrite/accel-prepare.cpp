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
#include <string>

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
  // CHECK-FIXES-NEXT: accelerator.prepare(generator, discriminator, g_optimizer, scheduler, d_optimizer);
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

// Two models' parameters gathered in one vector, the first by the vector's declaration: both
// models are prepared (the one named last alone would leave the other's gradients apart).
void gathered() {
  torch::nn::Linear body(4, 4);
  torch::nn::Linear head(4, 1);
  std::vector<torch::Tensor> params = body->parameters();
  for (auto &p : head->parameters()) params.push_back(p);
  torch::optim::Adam optimizer(params);
  // CHECK-FIXES: torch::optim::Adam optimizer(params);
  // CHECK-FIXES-NEXT: accelerator.prepare(body, head, optimizer);
  head(body(torch::randn({2, 4}))).sum().backward();
  optimizer.step();
}

// Filled by name, comparing with a local string: the string is no source of parameters.
void filtered_by_name() {
  torch::nn::Linear model(4, 1);
  const std::string skip = "bias";
  std::vector<torch::Tensor> weights;
  for (auto &item : model->named_parameters()) {
    if (item.key() != skip) {
      weights.push_back(item.value());
    }
  }
  torch::optim::SGD optimizer(weights, 0.1);
  // CHECK-FIXES: torch::optim::SGD optimizer(weights, 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
  model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}

// Gathered from another vector filled in ways the analysis does not follow: not prepared,
// and said so.
void gathered_from_elsewhere() {
  torch::nn::Linear model(4, 1);
  std::vector<torch::Tensor> base;
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: cannot tell which models the parameters of optimizer 'optimizer' come from: they are gathered from 'base', which accel-rewrite does not follow; call accelerator.prepare with every model whose parameters it holds and the optimizer, before training [accel-prepare]
  for (const auto &p : model->parameters()) {
    base.push_back(p);
  }
  std::vector<torch::Tensor> params;
  params.insert(params.end(), base.begin(), base.end());
  torch::optim::SGD optimizer(params, 0.1);
  model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}

// Two models' parameters joined through a local list taken whole from one of them (the
// usual way: two calls of parameters() would be two different vectors): both prepared.
void joined_parameters() {
  torch::nn::Linear encoder(4, 2), decoder(2, 1);
  std::vector<torch::Tensor> params = encoder->parameters();
  auto decoder_params = decoder->parameters();
  params.insert(params.end(), decoder_params.begin(), decoder_params.end());
  torch::optim::Adam optimizer(params, 0.01);
  // CHECK-FIXES: torch::optim::Adam optimizer(params, 0.01);
  // CHECK-FIXES-NEXT: accelerator.prepare(encoder, decoder, optimizer);
  decoder(encoder(torch::randn({2, 4}))).sum().backward();
  optimizer.step();
}

// An optimizer held by a smart pointer (made by std::make_unique or a factory): prepared as
// *optimizer, with the scheduler that names it.
void held_by_pointer() {
  torch::nn::Linear model(4, 1);
  auto optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), 0.1);
  torch::optim::StepLR scheduler(*optimizer, 10);
  // CHECK-FIXES: torch::optim::StepLR scheduler(*optimizer, 10);
  // CHECK-FIXES-NEXT: accelerator.prepare(model, *optimizer, scheduler);
  for (int step = 0; step < 2; ++step) {
    model(torch::randn({2, 4})).sum().backward();
    optimizer->step();
    // CHECK-FIXES: accelerator.step(*optimizer);
    scheduler.step();
  }
}

// Fine-tuning a head: the optimizer holds a submodule's parameters. The model is the local that
// owns it (its forward is what trains the head), prepared with the optimizer.
struct Tuned : torch::nn::Module {
  torch::nn::Linear body = register_module("body", torch::nn::Linear(4, 4));
  torch::nn::Linear head = register_module("head", torch::nn::Linear(4, 1));
  torch::Tensor forward(torch::Tensor x) { return head(body(x)); }
};
void submodule_only() {
  auto tuned = std::make_shared<Tuned>();
  for (auto &parameter : tuned->body->parameters()) {
    parameter.requires_grad_(false);
  }
  torch::optim::SGD head_optimizer(tuned->head->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD head_optimizer(tuned->head->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(tuned, head_optimizer);
  for (int step = 0; step < 2; ++step) {
    tuned->forward(torch::randn({2, 4})).sum().backward();
    head_optimizer.step();
  }
}

// Parameters joining the optimizer later through add_param_group: not followed, so no model
// is guessed, with a warning.
void param_group_added() {
  torch::nn::Linear encoder(4, 4), head(4, 1);
  torch::optim::SGD optimizer(encoder->parameters(), 0.1);
  optimizer.add_param_group(torch::optim::OptimizerParamGroup(head->parameters()));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: optimizer 'optimizer' gets more parameters from add_param_group, and accel-rewrite does not follow which models they come from{{.*}} [accel-prepare]
  // CHECK-FIXES: {{^}}  optimizer.add_param_group(torch::optim::OptimizerParamGroup(head->parameters()));
  // CHECK-FIXES-NOT: accelerator.prepare(encoder
  for (int step = 0; step < 2; ++step) {
    head(encoder(torch::randn({2, 4}))).sum().backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(head(encoder(torch::randn({2, 4}))).sum());
    optimizer.step();
  }
}

// The model comes from the caller, by reference: it is the caller's model, prepared here.
void train(torch::nn::Linear &model) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: void train(torch::nn::Linear &model) {
  // CHECK-FIXES: torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
  model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}

// A model at namespace scope that nothing replaces, or that only this function sets before
// the optimizer: prepared here. One set again after the optimizer, or set in another function
// too, may hold another model when it trains: not prepared, with a warning. A model held by a
// std::unique_ptr is said by name.
torch::nn::Linear global_model(4, 1);
std::shared_ptr<Plain> global_net;
std::shared_ptr<Plain> replaced_net;
void train_global() {
  torch::optim::SGD optimizer(global_model->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD optimizer(global_model->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(global_model, optimizer);
  global_model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}
void set_in_this_function() {
  global_net = std::make_shared<Plain>();
  torch::optim::SGD optimizer(global_net->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD optimizer(global_net->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(global_net, optimizer);
  global_net->fc(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}
void replaced_after() {
  replaced_net = std::make_shared<Plain>();
  torch::optim::SGD optimizer(replaced_net->parameters(), 0.1);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:31: warning: model 'replaced_net' is a global variable that is set or passed on outside 'replaced_after' or after optimizer 'optimizer' is created, so it may hold another model by the time it trains; call accelerator.prepare(replaced_net, optimizer) where both are in scope, before training [accel-prepare]
  replaced_net = std::make_shared<Plain>();
  replaced_net->fc(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}
void held_uniquely() {
  auto net = std::make_unique<Plain>();
  torch::optim::SGD optimizer(net->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD optimizer(net->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(net, optimizer);
  net->fc(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}

// The optimizer is re-created inside the loop: each pass prepares its own (the runtime makes
// the new optimizer replace the old one, and preparing the model again is harmless).
void recreated() {
  torch::nn::Linear model(4, 1);
  for (int epoch = 0; epoch < 2; ++epoch) {
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES: void recreated() {
    // CHECK-FIXES: torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
    model(torch::randn({2, 4})).sum().backward();
    optimizer.step();
  }
}

// k-fold: a model, optimizer and scheduler per fold, prepared in the fold's body, before its
// training loop.
void kfold() {
  for (int fold = 0; fold < 3; ++fold) {
    auto model = std::make_shared<Plain>();
    torch::optim::Adam optimizer(model->parameters());
    torch::optim::StepLR scheduler(optimizer, 10);
    // CHECK-FIXES: torch::optim::StepLR scheduler(optimizer, 10);
    // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer, scheduler);
    for (int epoch = 0; epoch < 2; ++epoch) {
      model->fc(torch::randn({2, 4})).sum().backward();
      optimizer.step();
    }
  }
}

// Two models trained one after the other: each is prepared before its own loop (not both
// after the second's definition, which the first loop runs before).
void one_after_the_other() {
  torch::nn::Linear first(4, 1);
  torch::optim::SGD first_optimizer(first->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD first_optimizer(first->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(first, first_optimizer);
  for (int step = 0; step < 2; ++step) {
    // CHECK-FIXES: auto accumulation = accelerator.accumulate(first);
    first(torch::randn({2, 4})).sum().backward();
    first_optimizer.step();
  }
  torch::nn::Linear second(4, 1);
  torch::optim::Adam second_optimizer(second->parameters());
  // CHECK-FIXES: torch::optim::Adam second_optimizer(second->parameters());
  // CHECK-FIXES-NEXT: accelerator.prepare(second, second_optimizer);
  for (int step = 0; step < 2; ++step) {
    // CHECK-FIXES: auto accumulation = accelerator.accumulate(second);
    second(torch::randn({2, 4})).sum().backward();
    second_optimizer.step();
  }
}

// One model, two optimizers one after the other (a first phase, then fine-tuning): the
// model is named in both prepares.
void two_phases() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD warmup(model->parameters(), 0.01);
  // CHECK-FIXES: torch::optim::SGD warmup(model->parameters(), 0.01);
  // CHECK-FIXES-NEXT: accelerator.prepare(model, warmup);
  model(torch::randn({2, 4})).sum().backward();
  warmup.step();
  torch::optim::Adam finetune(model->parameters());
  // CHECK-FIXES: torch::optim::Adam finetune(model->parameters());
  // CHECK-FIXES-NEXT: accelerator.prepare(model, finetune);
  for (int step = 0; step < 2; ++step) {
    model(torch::randn({2, 4})).sum().backward();
    finetune.step();
  }
}

// Training in a helper, called once per model: each model is prepared before its call.
void fit(torch::nn::Linear &model, torch::optim::Optimizer &optimizer) {
  for (int step = 0; step < 2; ++step) {
    model(torch::randn({2, 4})).sum().backward();
    optimizer.step();
  }
}
void helper_per_model() {
  torch::nn::Linear small(4, 1);
  torch::optim::SGD small_optimizer(small->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD small_optimizer(small->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(small, small_optimizer);
  fit(small, small_optimizer);
  torch::nn::Linear large(4, 1);
  torch::optim::SGD large_optimizer(large->parameters(), 0.1);
  // CHECK-FIXES: torch::optim::SGD large_optimizer(large->parameters(), 0.1);
  // CHECK-FIXES-NEXT: accelerator.prepare(large, large_optimizer);
  fit(large, large_optimizer);
}

// Raw tensors trained by an optimizer: no model to prepare; the warning says what to write.
void raw_tensors() {
  auto w = torch::zeros({1, 4}, torch::requires_grad());
  auto b = torch::zeros({1}, torch::requires_grad());
  torch::optim::Adagrad opt({w, b}, torch::optim::AdagradOptions(0.2));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: optimizer 'opt' trains tensors of no model ('w', 'b'), and accelerator.prepare synchronises the gradients of a model's parameters; hold them in a torch::nn::Module (register_parameter) and prepare it with the optimizer [accel-prepare]
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    (torch::ones({2, 4}).matmul(w.t()) + b).sum().backward();
    opt.step();
  }
}

int main() {
  gan();
  raw_tensors();
  groups();
  gathered();
  gathered_from_elsewhere();
  joined_parameters();
  filtered_by_name();
  held_by_pointer();
  submodule_only();
  param_group_added();
  torch::nn::Linear model(4, 1);
  train(model);
  train_global();
  set_in_this_function();
  replaced_after();
  held_uniquely();
  recreated();
  kfold();
  one_after_the_other();
  two_phases();
  helper_per_model();
}
