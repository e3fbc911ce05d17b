// Corpus: a ModuleHolder MLP on a custom regression Dataset, SGD with momentum, the
// SequentialSampler, a StepLR stepped once per epoch, gradient clipping, the device chosen from
// cuda::is_available(), torch::save at the end.
//
//   regression_sgd BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

class Samples : public torch::data::datasets::Dataset<Samples> {
public:
  Samples() {
    auto generator = at::detail::createCPUGenerator(11);
    inputs_ = torch::randn({96, 6}, generator);
    targets_ = inputs_.matmul(torch::randn({6, 2}, generator)).tanh();
  }
  torch::data::Example<> get(size_t index) override {
    return {inputs_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return 96; }

private:
  torch::Tensor inputs_, targets_;
};

struct MlpImpl : torch::nn::Module {
  MlpImpl()
      : hidden(register_module("hidden", torch::nn::Linear(6, 24))),
        out(register_module("out", torch::nn::Linear(24, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return out(torch::relu(hidden(x))); }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(Mlp);

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(3);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Mlp model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Samples().map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 0; epoch < 4; ++epoch) {
    for (auto &batch : *loader) {
      auto inputs = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(inputs), targets);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
      optimizer.step();
    }
    scheduler.step();
  }
  std::printf("metric lr %.6f\n", optimizer.param_groups()[0].options().get_lr());
  // The error over the whole training set, through a loader of its own (left unsharded).
  auto everything =
      torch::data::make_data_loader(Samples().map(torch::data::transforms::Stack<>()), 32);
  double squared_error = 0;
  torch::NoGradGuard no_grad;
  for (auto &batch : *everything) {
    auto inputs = batch.data.to(device), targets = batch.target.to(device);
    squared_error += (model->forward(inputs) - targets).pow(2).sum().item<double>();
  }
  std::printf("metric train_mse %.6f\n", squared_error / 96 / 2);
  torch::save(model, out_dir + "/model.pt");
}
