// A small training job shared by the runtime tests: a model, a dataset, and the loop written
// once with the Accelerator and once as plain LibTorch.
#pragma once

#include <accelerate/accelerate.h>

#include <torch/torch.h>

#include <string>
#include <vector>

namespace accel_test {

/// 48 samples of 8 features with 4 regression targets, the same on every process.
class RegressionDataset : public torch::data::datasets::Dataset<RegressionDataset> {
public:
  RegressionDataset() {
    auto generator = at::detail::createCPUGenerator(7);
    inputs_ = torch::randn({48, 8}, generator);
    targets_ = torch::randn({48, 4}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    return {inputs_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
  }
  std::optional<size_t> size() const override { return 48; }

private:
  torch::Tensor inputs_, targets_;
};

struct NetImpl : torch::nn::Module {
  NetImpl() {
    first = register_module("first", torch::nn::Linear(8, 16));
    second = register_module("second", torch::nn::Linear(16, 4));
    // A buffer that prepare must broadcast like the parameters.
    offset = register_buffer("offset", torch::randn({4}));
  }
  torch::Tensor forward(torch::Tensor x) {
    return second->forward(torch::tanh(first->forward(x))) + offset;
  }
  torch::nn::Linear first{nullptr}, second{nullptr};
  torch::Tensor offset;
};
TORCH_MODULE(Net);

enum class OptimizerKind { SGD, Adam };
enum class SamplerKind { Sequential, Random };

inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind, Net &model) {
  if (kind == OptimizerKind::SGD) {
    return std::make_unique<torch::optim::SGD>(model->parameters(),
                                               torch::optim::SGDOptions(0.05).momentum(0.9));
  }
  return std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(0.01));
}

/// Parameters and buffers, detached copies.
inline std::vector<torch::Tensor> state_of(Net &model) {
  std::vector<torch::Tensor> state;
  for (const auto &p : model->parameters()) {
    state.push_back(p.detach().clone());
  }
  for (const auto &b : model->buffers()) {
    state.push_back(b.detach().clone());
  }
  return state;
}

template <typename Sampler>
std::vector<torch::Tensor> train_with_accelerator(OptimizerKind optimizer_kind, size_t batch_size,
                                                  uint64_t init_seed, int epochs = 3) {
  accelerate::Accelerator accelerator;
  accelerate::set_seed(init_seed);
  Net model;
  auto optimizer = make_optimizer(optimizer_kind, model);
  accelerator.prepare(model, *optimizer);
  auto loader = accelerator.prepare_data_loader<Sampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), batch_size);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto &batch : *loader) {
      optimizer->zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer->step();
    }
  }
  return state_of(model);
}

template <typename Sampler>
std::vector<torch::Tensor> train_plain(OptimizerKind optimizer_kind, size_t batch_size,
                                       uint64_t init_seed, int epochs = 3) {
  torch::manual_seed(init_seed);
  Net model;
  auto optimizer = make_optimizer(optimizer_kind, model);
  auto loader = torch::data::make_data_loader<Sampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), batch_size);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto &batch : *loader) {
      optimizer->zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer->step();
    }
  }
  return state_of(model);
}

} // namespace accel_test
