// accel-device: the device variable comes from accelerator.device(); .to(device) on prepared
// models and on a prepared loader's batches is dropped (a dtype is kept); .cuda() and
// .to(<a fixed CUDA device>) move to accelerator.device() instead; other uses stay. A
// DeviceType variable that only fed the device is marked [[maybe_unused]], and a device
// variable whose every use is dropped goes (no new warning).
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

using Data = torch::data::datasets::TensorDataset;

void evaluate(torch::nn::Linear model) {
  torch::Device device(torch::kCUDA);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: device chosen in 'evaluate', which has no accelerator: with several processes it must be the accelerator's device; pass accelerator.device() in [accel-device]
  (void)model;
}

torch::Tensor ones_on(torch::Device device) { return torch::ones({4}).to(device); }

torch::Tensor helper_ones() {
  return torch::ones({4}).cuda();
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:10: warning: moves to a fixed device in 'helper_ones', which has no accelerator: with several processes each has its own device; pass accelerator.device() in and move to that [accel-device]
}

// Every use of the device is taken out: the variable goes too (no "unused variable"), and a
// comment after the move goes with it.
void only_placement() {
  torch::Device device(torch::kCPU);
  torch::nn::Linear model(4, 1);
  model->to(device);  // the weights to the GPU
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model(torch::randn({2, 4})).sum().backward();
}
// CHECK-FIXES: void only_placement() {
// CHECK-FIXES-NEXT: accelerate::Accelerator accelerator;
// CHECK-FIXES-NEXT: torch::nn::Linear model(4, 1);
// CHECK-FIXES-NEXT: torch::optim::SGD optimizer(model->parameters(), 0.1);
// CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);

// A device chosen again later (a GPU id from the command line) is the accelerator's too; a
// model used before its prepare (a demonstration forward) keeps its move, so that use sees it
// where its inputs are.
void chosen_again(int gpu_id) {
  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA, gpu_id);
    // CHECK-FIXES: {{^}}    device = accelerator.device();
  }
  torch::nn::Linear model(4, 1);
  model->to(device);
  // CHECK-FIXES: {{^}}  model->to(device);
  auto before = model(torch::ones({1, 4}).to(device));
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(model, optimizer);
  model(torch::randn({2, 4}).to(device)).sum().backward();
  (void)before;
}

int main() {
  auto device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  // CHECK-FIXES: int main() {
  // CHECK-FIXES-NEXT: accelerate::Accelerator accelerator;
  // CHECK-FIXES-NEXT: torch::Device device = accelerator.device();
  const torch::Device other(device);
  // CHECK-FIXES: const torch::Device other = accelerator.device();
  torch::DeviceType chosen;
  if (torch::cuda::is_available()) {
    chosen = torch::kCUDA;
  } else {
    chosen = torch::kCPU;
  }
  torch::Device from_chosen(chosen);
  // CHECK-FIXES: {{\[\[maybe_unused\]\]}} torch::DeviceType chosen;
  // CHECK-FIXES: torch::Device from_chosen = accelerator.device();
  torch::nn::Linear model(4, 1);
  torch::nn::Linear frozen(4, 4);
  model->to(device);
  model->to(device, torch::kDouble);
  frozen->to(device);
  // CHECK-FIXES: torch::nn::Linear model(4, 1);
  // CHECK-FIXES-NEXT: torch::nn::Linear frozen(4, 4);
  // CHECK-FIXES-NEXT: model->to(torch::kDouble);
  // CHECK-FIXES-NEXT: frozen->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      Data(torch::randn({8, 4})).map(torch::data::transforms::Stack<torch::data::TensorExample>()),
      2);
  torch::Tensor extra = torch::ones({4}).to(device);
  // CHECK-FIXES: torch::Tensor extra = torch::ones({4}).to(device);
  torch::DeviceType device_type = torch::kCPU;
  if (torch::cuda::is_available()) {
    device_type = torch::kCUDA;
    torch::Tensor on_gpu = torch::ones({4}).cuda();
    // CHECK-FIXES: torch::Tensor on_gpu = torch::ones({4}).to(accelerator.device());
    torch::Tensor fixed = torch::ones({4}).to(torch::kCUDA, /*non_blocking=*/true);
    // CHECK-FIXES: torch::Tensor fixed = torch::ones({4}).to(accelerator.device(), /*non_blocking=*/true);
    frozen->to(torch::Device("cuda:0"));
    // CHECK-FIXES: frozen->to(accelerator.device());
  }
  torch::Tensor by_type = torch::ones({4}).to(device_type, torch::kDouble);
  // CHECK-FIXES: torch::Tensor by_type = torch::ones({4}).to(accelerator.device(), torch::kDouble);
  torch::Tensor back = extra.to(torch::kCPU) + extra.to(torch::Device("cpu")) + ones_on(device);
  // CHECK-FIXES: torch::Tensor back = extra.to(torch::kCPU) + extra.to(torch::Device("cpu")) + ones_on(device);
  for (auto &batch : *loader) {
    auto data = batch.data.to(device);
    // CHECK-FIXES: auto data = batch.data;
    auto twice = batch.data.to(device, torch::kDouble, /*non_blocking=*/true);
    // CHECK-FIXES: auto twice = batch.data.to(torch::kDouble, /*non_blocking=*/true);
    auto gpu = batch.data.cuda();
    // CHECK-FIXES: auto gpu = batch.data;
    model(frozen(data + extra)).sum().backward();
    optimizer.step();
  }
  evaluate(model);
  helper_ones();
  only_placement();
  chosen_again(0);
}
