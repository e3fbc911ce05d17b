// accel-accelerator: `accelerate::Accelerator accelerator;` first in each function that creates
// an optimizer (when the file gets other edits), never twice; helper functions that train,
// print or save get it as their first parameter, and their calls pass it, unless they cannot
// (then a warning says why and what to do).
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags -I%runtime_include \
// RUN:   2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp
//
// A program that names the CPU and no other device stays on the CPU too (the section at the
// end, by DEVICE_CHOICE); one that names a GPU, or a device it reads at run time, does not.
// Each choice is a copy of the input that defines it after the includes, not a -D flag: a
// flag is part of the preamble's key, so each would build a preamble of its own (about 15 s).
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 1\n&/" %t/input.cpp > %t/choice1.cpp
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 2\n&/" %t/input.cpp > %t/choice2.cpp
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 3\n&/" %t/input.cpp > %t/choice3.cpp
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 4\n&/" %t/input.cpp > %t/choice4.cpp
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 5\n&/" %t/input.cpp > %t/choice5.cpp
// RUN: sed "s/^#ifdef DEVICE_CHOICE$/#define DEVICE_CHOICE 6\n&/" %t/input.cpp > %t/choice6.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/choice1.cpp -o %t/cpu1.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=CPU --input-file=%t/cpu1.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/choice2.cpp -o %t/cpu2.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=CPU --input-file=%t/cpu2.cpp
// CPU: void run() { accelerate::Accelerator accelerator(accelerate::Options::on_cpu()); torch::nn::Linear
// RUN: %not %accel-rewrite --check --rules=-training-loop %t/choice1.cpp -- %torch_flags \
// RUN:   -I%runtime_include > %t/cpu1.txt
// RUN: FileCheck %s --check-prefix=SAYS-CPU --input-file=%t/cpu1.txt
// SAYS-CPU: this program names no device but the CPU, so the run stays on the CPU (Options::on_cpu()){{.*}}choose the device as `torch::cuda::is_available() ? torch::kCUDA : torch::kCPU`
// RUN: %accel-rewrite --rules=-training-loop %t/choice3.cpp -o %t/gpu3.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=GPU --input-file=%t/gpu3.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/choice4.cpp -o %t/gpu4.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=GPU --input-file=%t/gpu4.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/choice5.cpp -o %t/gpu5.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=GPU --input-file=%t/gpu5.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/choice6.cpp -o %t/gpu6.cpp -- %torch_flags \
// RUN:   -I%runtime_include
// RUN: FileCheck %s --check-prefix=GPU --input-file=%t/gpu6.cpp
// GPU: void run() { accelerate::Accelerator accelerator; torch::nn::Linear

#include <torch/torch.h>

#include <accelerate/accelerate.h>

#include <cstdio>
#include <vector>

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
// CHECK-FIXES: void run() { accelerate::Accelerator accelerator(accelerate::Options::on_cpu()); torch::nn::Linear model = makeModel();

// Helpers that train: declared first, defined later, the parameter goes on both (`&` placed
// as most of the file places it).
void train_step(torch::nn::Linear& model, torch::optim::Optimizer& optimizer);
// CHECK-FIXES: void train_step(accelerate::Accelerator &accelerator, torch::nn::Linear& model, torch::optim::Optimizer& optimizer);

void train_step(torch::nn::Linear& model, torch::optim::Optimizer& optimizer) {
  optimizer.zero_grad();
  model(torch::randn({2, 4})).sum().backward();
  optimizer.step();
}
// One call is one training step: the step's guards go first in the body.
// CHECK-FIXES: void train_step(accelerate::Accelerator &accelerator, torch::nn::Linear& model, torch::optim::Optimizer& optimizer) {
// CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate();
// CHECK-FIXES-NEXT: auto autocast = accelerator.autocast();
// CHECK-FIXES-NEXT: accelerator.zero_grad(optimizer);
// CHECK-FIXES-NEXT: accelerator.backward(model(torch::randn({2, 4})).sum());
// CHECK-FIXES-NEXT: accelerator.step(optimizer);

// A template whose training call is dependent, called from another template: both get the
// parameter; the parameters that start on their own line keep their layout.
template <typename Loader>
void train_epoch(
    torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  for (auto &batch : loader) {
    optimizer.zero_grad();
    model(batch.data).sum().backward();
    optimizer.step();
  }
}
// CHECK-FIXES: void train_epoch(
// CHECK-FIXES-NEXT: accelerate::Accelerator &accelerator, torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
// CHECK-FIXES-NEXT: for (auto &batch : loader) {
// CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate();
// CHECK-FIXES-NEXT: auto autocast = accelerator.autocast();
// CHECK-FIXES-NEXT: accelerator.zero_grad(optimizer);
// CHECK-FIXES-NEXT: accelerator.backward(model(batch.data).sum());
// CHECK-FIXES-NEXT: accelerator.step(optimizer);

template <typename Loader>
void fit(torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    train_epoch(model, loader, optimizer);
  }
}
// CHECK-FIXES: void fit(accelerate::Accelerator &accelerator, torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
// CHECK-FIXES: train_epoch(accelerator, model, loader, optimizer);

// A helper that only prints gets the accelerator too, so that it prints once; `(void)` is an
// empty list.
void report(void) { std::printf("done\n"); }
// CHECK-FIXES: void report(accelerate::Accelerator &accelerator) { accelerator.printf("done\n"); }

// A method that trains, called on an object.
struct Trainer {
  void step(torch::nn::Linear &model) {
    model(torch::randn({2, 4})).sum().backward();
  }
  // CHECK-FIXES: void step(accelerate::Accelerator &accelerator, torch::nn::Linear &model) {
  // CHECK-FIXES-NEXT: auto accumulation = accelerator.accumulate();
  // CHECK-FIXES-NEXT: auto autocast = accelerator.autocast();
  // CHECK-FIXES-NEXT: accelerator.backward(model(torch::randn({2, 4})).sum());

  // A virtual one cannot get the parameter: its overrides would not have it.
  virtual void virtual_step(torch::nn::Linear &model) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:16: warning: 'virtual_step' trains, but the accelerator cannot be passed to it: it is virtual, and its overrides would not get the parameter; add a first parameter 'accelerate::Accelerator &accelerator' to it, pass 'accelerator' where it is called, and run accel-rewrite again to rewrite its training step [accel-accelerator]
    model(torch::randn({2, 4})).sum().backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: backward in 'virtual_step', which has no accelerator{{.*}} [accel-backward]
  }
  virtual ~Trainer() = default;
};

// Called through a pointer: the calls through it would not pass the accelerator.
void by_pointer(torch::nn::Linear &model) {
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:6: warning: 'by_pointer' trains, but the accelerator cannot be passed to it: its address is taken on line [[@LINE+11]], {{.*}} [accel-accelerator]
  model(torch::randn({2, 4})).sum().backward();
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: backward in 'by_pointer', which has no accelerator{{.*}} [accel-backward]
}

// An Accelerator already there is used, not duplicated.
int main() {
  accelerate::Accelerator accelerator;
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model(torch::randn({2, 4})).sum().backward();
  void (*train_function)(torch::nn::Linear &) = by_pointer;
  train_function(model);
  run();
  train_step(model, optimizer);
  std::vector<torch::data::Example<>> examples = {{torch::randn({2, 4}), torch::randn({2, 1})}};
  fit(model, examples, optimizer);
  report();
  Trainer trainer;
  trainer.step(model);
  trainer.virtual_step(model);
}
// CHECK-FIXES: int main() {
// CHECK-FIXES-NEXT: accelerate::Accelerator accelerator;
// CHECK-FIXES-NEXT: torch::nn::Linear model(4, 1);
// CHECK-FIXES: accelerator.backward(model(torch::randn({2, 4})).sum());
// CHECK-FIXES: train_step(accelerator, model, optimizer);
// CHECK-FIXES: fit(accelerator, model, examples, optimizer);
// CHECK-FIXES: report(accelerator);
// CHECK-FIXES: trainer.step(accelerator, model);
// CHECK-FIXES: trainer.virtual_step(model);

#ifdef DEVICE_CHOICE
torch::Tensor placed(torch::Tensor x, const char *name) {
#if DEVICE_CHOICE == 1
  torch::Device device(torch::kCPU);
  torch::DeviceType type = torch::DeviceType::CPU;
  return x.to(device).to(type).to(x.device());
#elif DEVICE_CHOICE == 2
  return x.to(torch::Device("cpu"));
#elif DEVICE_CHOICE == 3
  return x.to(torch::Device(name));
#elif DEVICE_CHOICE == 4
  return x.to(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
#elif DEVICE_CHOICE == 5
  return x.cuda();
#else
  return x.to(torch::Device("cuda:0"));
#endif
}
#endif
