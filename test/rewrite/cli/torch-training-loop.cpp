// A realistic MNIST-like training program is rewritten with no flags at all (the LibTorch
// headers the tool was built with), the result compiles against the accel runtime, and a
// second run, also with no flags (the runtime headers are found too), changes nothing.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t
// RUN: %accel-rewrite %s -o %t/train.cpp 2>&1 | FileCheck %s --allow-empty --check-prefix=QUIET
// QUIET-NOT: {{.}}
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/train.cpp
// RUN: %accel-rewrite %t/train.cpp -o %t/again.cpp
// RUN: diff %t/train.cpp %t/again.cpp
// RUN: %not diff -u %s %t/train.cpp | FileCheck %s --check-prefix=DIFF
// DIFF: +#include <accelerate/accelerate.h>
// DIFF: +{{.*}}accelerate::Accelerator accelerator;
// DIFF: -{{.*}}torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
// DIFF: +{{.*}}torch::Device device = accelerator.device();
// DIFF: -{{.*}}model->to(device);
// DIFF: +{{.*}}accelerator.prepare(model, optimizer);
// DIFF: -{{.*}}torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
// DIFF: +{{.*}}accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
// DIFF: -{{.*}}auto data = batch.data.to(device), targets = batch.target.to(device);
// DIFF: +{{.*}}auto data = batch.data, targets = batch.target;
// DIFF: -{{.*}}loss.backward();
// DIFF: +{{.*}}accelerator.backward(loss);
// DIFF: -{{.*}}torch::save(model, "model.pt");
// DIFF: +{{.*}}accelerator.save(model, "model.pt");

#include <torch/torch.h>

#include <cstdio>
#include <iostream>

/// 28x28 "images" with a label each, like MNIST.
class SyntheticMnist : public torch::data::datasets::Dataset<SyntheticMnist> {
public:
  explicit SyntheticMnist(int64_t size)
      : images_(torch::rand({size, 1, 28, 28})), labels_(torch::randint(10, {size})) {}
  torch::data::Example<> get(size_t index) override {
    return {images_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return images_.size(0); }

private:
  torch::Tensor images_, labels_;
};

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(1, 8, 5))),
        fc(register_module("fc", torch::nn::Linear(8 * 24 * 24, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv(x));
    return torch::log_softmax(fc(x.flatten(1)), /*dim=*/1);
  }
  torch::nn::Conv2d conv;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 64;
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));

  auto train_set = SyntheticMnist(256).map(torch::data::transforms::Stack<>());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set), batch_size);
  auto test_loader =
      torch::data::make_data_loader(SyntheticMnist(64).map(torch::data::transforms::Stack<>()), 64);

  for (int epoch = 1; epoch <= 2; ++epoch) {
    model->train();
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(data), targets);
      loss.backward();
      optimizer.step();
    }
    model->eval();
    torch::NoGradGuard no_grad;
    int64_t correct = 0;
    for (const auto &batch : *test_loader) {
      auto output = model->forward(batch.data.to(device));
      correct += output.argmax(1).eq(batch.target.to(device)).sum().item<int64_t>();
    }
    std::printf("epoch %d accuracy %.3f\n", epoch, static_cast<double>(correct) / 64);
  }
  torch::save(model, "model.pt");
}
