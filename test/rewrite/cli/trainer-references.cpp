// A trainer class that holds references to a model and an optimizer its caller made
// (`Trainer(Net &net, torch::optim::Optimizer &opt) : net_(net), opt_(opt)`), and a class
// template holding `Model model_; Optimizer &opt_;`: the method prepares the members, which
// are the caller's objects, once it is known from every construction of the class that the
// optimizer bound is built from the model bound (main prepares them too, which is harmless).
// Where a construction binds anything else the loop is declined, and the optimizer handed to
// it is not prepared.
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
#include <utility>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;

struct Net : torch::nn::Module {
  Net() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};

class Trainer {
public:
  Trainer(Net &net, torch::optim::Optimizer &opt) : net_(net), opt_(opt) {}

  template <typename Loader> double train_epoch(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> double train_epoch(accelerate::Accelerator &accelerator, Loader &loader) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(net_, opt_);
    double total = 0;
    int64_t seen = 0;
    for (auto &batch : loader) {
      opt_.zero_grad();
      torch::Tensor loss = net_.forward(batch.data).pow(2).sum();
      // A sum over the batch, seen as one in the member template's instantiation only: the
      // pattern gets the same edit.
      loss.backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(loss * accelerator.num_processes());
      opt_.step();
      // CHECK-FIXES: {{^}}      accelerator.step(opt_);
      total += loss.item<double>();
      seen += batch.data.size(0);
    }
    return total / seen;
    // CHECK-FIXES: {{^}}    return accelerator.reduce(total, "sum") / accelerator.reduce(seen, "sum");
  }

private:
  Net &net_;
  torch::optim::Optimizer &opt_;
};

// A class template: the steps on `opt_` are calls only in its instantiations. The model is a
// holder moved into the member, which shares the caller's module.
template <typename Model, typename Optimizer> class Fitter {
public:
  Fitter(Model model, Optimizer &opt) : model_(std::move(model)), opt_(opt) {}

  template <typename Loader> void fit(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> void fit(accelerate::Accelerator &accelerator, Loader &loader) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(model_, opt_);
    for (auto &batch : loader) {
      auto loss = model_->forward(batch.data).pow(2).mean();
      opt_.zero_grad();
      loss.backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(loss);
      opt_.step();
      // CHECK-FIXES: {{^}}      accelerator.step(opt_);
    }
  }

private:
  Model model_;
  Optimizer &opt_;
};

// Bound to an optimizer of another model than the one bound to the model member: declined.
class Mismatched {
public:
  Mismatched(Net &net, torch::optim::Optimizer &opt) : net_(net), opt_(opt) {}
  template <typename Loader> void fit(Loader &loader) {
    // CHECK-FIXES: {{^}}  template <typename Loader> void fit(Loader &loader) {
    for (auto &batch : loader) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written{{.*}}optimizer member 'opt_' is a reference to an optimizer of 'other', and no member of the class is set from that model{{.*}} [accel-training-loop]
      opt_.zero_grad();
      net_.forward(batch.data).sum().backward();
      // CHECK-FIXES: {{^}}      net_.forward(batch.data).sum().backward();
      opt_.step();
    }
  }

private:
  Net &net_;
  torch::optim::Optimizer &opt_;
};

int main() {
  // CHECK-FIXES: {{^}}int main() {
  // CHECK-FIXES: {{^}}  accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  auto loader = torch::data::make_data_loader(Data(torch::randn({32, 4})).map(Stack()), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(
  Net net;
  torch::optim::SGD sgd(net.parameters(), 0.1);
  // CHECK-FIXES: {{^}}  accelerator.prepare(net, sgd);
  Trainer trainer(net, sgd);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::cout << "loss " << trainer.train_epoch(*loader) << "\n";
    // CHECK-FIXES: {{^}}    accelerator.print() << "loss " << trainer.train_epoch(accelerator, *loader) << "\n";
  }
  torch::nn::Linear linear(4, 1);
  torch::optim::Adam adam(linear->parameters());
  Fitter<torch::nn::Linear, torch::optim::Adam> fitter(linear, adam);
  fitter.fit(*loader);
  // CHECK-FIXES: {{^}}  fitter.fit(accelerator, *loader);
  Net first, other;
  torch::optim::SGD other_sgd(other.parameters(), 0.1);
  // Handed only to a trainer whose training is left as written: not prepared either.
  // CHECK-FIXES: {{^}}  torch::optim::SGD other_sgd(other.parameters(), 0.1);
  // CHECK-FIXES-NOT: prepare(
  auto own = torch::data::make_data_loader(Data(torch::randn({32, 4})).map(Stack()), 8);
  // CHECK-FIXES: {{^}}  auto own = torch::data::make_data_loader(
  Mismatched mismatched(first, other_sgd);
  mismatched.fit(*own);
  // CHECK-FIXES: {{^}}  mismatched.fit(*own);
}
