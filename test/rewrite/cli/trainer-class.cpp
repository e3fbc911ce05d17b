// A trainer class (model and optimizer as members, a method that trains): the method gets the
// accelerator from main and prepares the members first in its body, each call (a prepare
// again is harmless); main prepares the loader it hands over. An optimizer held by a smart
// pointer is prepared through it. A member optimizer whose model cannot be told is declined
// with its loop, and only the call to it is left as written. A member optimizer built from the
// constructor's model parameter trains the model member that parameter initialises; one made by
// a factory function of the file trains the model whose parameters it is given.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;

class Trainer {
public:
  Trainer(double lr, torch::Device device)
      : device_(device), optimizer_(model_->parameters(), torch::optim::SGDOptions(lr)) {
    model_->to(device_);
  }

  template <typename Loader> double train_epoch(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> double train_epoch(accelerate::Accelerator &accelerator, Loader &loader) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(model_, optimizer_);
    double total = 0;
    int64_t batches = 0;
    for (auto &batch : loader) {
      optimizer_.zero_grad();
      // CHECK-FIXES: {{^}}      accelerator.zero_grad(optimizer_);
      torch::Tensor loss = model_->forward(batch.data.to(device_)).pow(2).mean();
      loss.backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(loss);
      optimizer_.step();
      // CHECK-FIXES: {{^}}      accelerator.step(optimizer_);
      total += loss.item<double>();
      ++batches;
    }
    return total / batches;
    // CHECK-FIXES: {{^}}    return accelerator.reduce(total, "mean") / batches;
  }

private:
  torch::Device device_;
  torch::nn::Linear model_{4, 1};
  torch::optim::SGD optimizer_;
};

// The optimizer made in the constructor's body, behind a std::unique_ptr.
class PointerTrainer {
public:
  PointerTrainer() { optimizer_ = std::make_unique<torch::optim::Adam>(net_->parameters()); }
  template <typename Loader> void fit(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> void fit(accelerate::Accelerator &accelerator, Loader &loader) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(net_, *optimizer_);
    for (auto &batch : loader) {
      optimizer_->zero_grad();
      auto loss = net_->forward(batch.data).pow(2).mean();
      loss.backward();
      optimizer_->step();
      // CHECK-FIXES: {{^}}      accelerator.step(*optimizer_);
    }
  }

private:
  torch::nn::Sequential net_{torch::nn::Linear(4, 2), torch::nn::ReLU(), torch::nn::Linear(2, 1)};
  std::unique_ptr<torch::optim::Adam> optimizer_;
};

// Built from the model the constructor takes, which also initialises the model member: a
// holder's copy shares its module, so the optimizer trains model_ (as course code writes it).
class ParameterTrainer {
public:
  ParameterTrainer(torch::nn::Linear model, double lr)
      : model_(model), optimizer_(model->parameters(), torch::optim::SGDOptions(lr)) {}
  template <typename Loader> void fit(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> void fit(accelerate::Accelerator &accelerator, Loader &loader) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(model_, optimizer_);
    for (auto &batch : loader) {
      optimizer_.zero_grad();
      model_->forward(batch.data).pow(2).mean().backward();
      optimizer_.step();
      // CHECK-FIXES: {{^}}      accelerator.step(optimizer_);
    }
  }

private:
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
};

// Built from a list of tensors the caller passes: which model it trains cannot be told.
class ListTrainer {
public:
  ListTrainer(torch::nn::Linear model, std::vector<torch::Tensor> parameters)
      : model_(model), optimizer_(parameters, torch::optim::SGDOptions(0.1)) {}
  template <typename Loader> void fit(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> void fit(Loader &loader) {
    for (auto &batch : loader) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written{{.*}}cannot tell which model optimizer member 'optimizer_' trains{{.*}} [accel-training-loop]
      optimizer_.zero_grad();
      model_->forward(batch.data).pow(2).mean().backward();
      // CHECK-FIXES: {{^}}      model_->forward(batch.data).pow(2).mean().backward();
      optimizer_.step();
    }
  }

private:
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
};

// Made by a factory function of the file from the parameters it is given, chosen by name as
// course code does: the model is the one whose parameters the constructor passes. Trained by a
// method, on a loader it makes, that another method calls once per epoch: both get the
// accelerator, from main through the function between.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string &kind,
                                                        std::vector<torch::Tensor> params) {
  if (kind == "adam") {
    return std::make_unique<torch::optim::Adam>(std::move(params));
  }
  return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(0.1));
}
class FactoryTrainer {
public:
  explicit FactoryTrainer(const std::string &kind)
      : optimizer_(make_optimizer(kind, net_->parameters())) {}
  void fit(int epochs) {
    // CHECK-FIXES: {{^}}  void fit(accelerate::Accelerator &accelerator, int epochs) {
    for (int epoch = 0; epoch < epochs; ++epoch) {
      train_epoch();
      // CHECK-FIXES: {{^}}      train_epoch(accelerator);
    }
  }
  void train_epoch() {
    // CHECK-FIXES: {{^}}  void train_epoch(accelerate::Accelerator &accelerator) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(net_, *optimizer_);
    auto loader = torch::data::make_data_loader(Data(torch::randn({32, 4})).map(Stack()), 8);
    // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(
    for (auto &batch : *loader) {
      optimizer_->zero_grad();
      net_->forward(batch.data).pow(2).mean().backward();
      optimizer_->step();
      // CHECK-FIXES: {{^}}      accelerator.step(*optimizer_);
    }
  }

private:
  torch::nn::Linear net_{4, 1};
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

void experiment(const std::string &kind) {
  // CHECK-FIXES: {{^}}void experiment(accelerate::Accelerator &accelerator, const std::string &kind) {
  FactoryTrainer trainer(kind);
  trainer.fit(2);
  // CHECK-FIXES: {{^}}  trainer.fit(accelerator, 2);
}

int main() {
  // CHECK-FIXES: {{^}}int main() {
  // CHECK-FIXES: {{^}}  accelerate::Accelerator accelerator;
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  auto loader = torch::data::make_data_loader(Data(torch::randn({32, 4})).map(Stack()), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(
  Trainer trainer(0.1, device);
  std::cout << "loss " << trainer.train_epoch(*loader) << "\n";
  // CHECK-FIXES: {{^}}  accelerator.print() << "loss " << trainer.train_epoch(accelerator, *loader) << "\n";
  PointerTrainer second;
  second.fit(*loader);
  // CHECK-FIXES: {{^}}  second.fit(accelerator, *loader);
  torch::nn::Linear other(4, 1);
  auto own = torch::data::make_data_loader(Data(torch::randn({32, 4})).map(Stack()), 8);
  ParameterTrainer fourth(torch::nn::Linear(4, 1), 0.1);
  fourth.fit(*loader);
  // CHECK-FIXES: {{^}}  fourth.fit(accelerator, *loader);
  ListTrainer third(other, other->parameters());
  third.fit(*own);
  // CHECK-FIXES: {{^}}  third.fit(*own);
  experiment("adam");
  // CHECK-FIXES: {{^}}  experiment(accelerator, "adam");
}
