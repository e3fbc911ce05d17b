// Corpus: validation every epoch through an unsharded loader, early stopping with patience
// (the decision is the same on every process because each sees the whole validation set), the
// best model saved with torch::save inside the loop, Adam with a StepLR per epoch.
//
//   early_stopping BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

// A noisy sine: a wide network fits the noise of 96 training points and validation gets worse.
class NoisySine : public torch::data::datasets::Dataset<NoisySine> {
public:
  NoisySine(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    inputs_ = torch::rand({count, 1}, generator) * 6 - 3;
    targets_ = torch::sin(inputs_) + 0.3 * torch::randn({count, 1}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    return {inputs_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return inputs_.size(0); }

private:
  torch::Tensor inputs_, targets_;
};

struct WideImpl : torch::nn::Module {
  WideImpl()
      : hidden(register_module("hidden", torch::nn::Linear(1, 128))),
        out(register_module("out", torch::nn::Linear(128, 1))) {}
  torch::Tensor forward(const torch::Tensor &x) { return out(torch::relu(hidden(x))); }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(Wide);

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(31);
  torch::Device device(torch::kCPU);
  Wide model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.02));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/15, /*gamma=*/0.5);
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      NoisySine(96, 1).map(torch::data::transforms::Stack<>()), batch_size);
  auto validation_loader =
      torch::data::make_data_loader(NoisySine(64, 2).map(torch::data::transforms::Stack<>()), 64);

  double best = std::numeric_limits<double>::infinity();
  int best_epoch = -1, epoch = 0;
  const int patience = 4;
  for (; epoch < 60 && epoch - best_epoch <= patience; ++epoch) {
    model->train();
    for (auto &batch : *train_loader) {
      auto inputs = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(inputs), targets);
      loss.backward();
      optimizer.step();
    }
    scheduler.step();

    model->eval();
    torch::NoGradGuard no_grad;
    double validation = 0;
    for (auto &batch : *validation_loader) {
      auto inputs = batch.data.to(device), targets = batch.target.to(device);
      validation += torch::mse_loss(model->forward(inputs), targets).item<double>();
    }
    // Improvements under 1e-3 do not count: 1x2B and 2xB differ by float rounding only.
    if (validation < best - 1e-3) {
      best = validation;
      best_epoch = epoch;
      torch::save(model, out_dir + "/model.pt");
    }
  }
  std::printf("metric stopped_after %d\n", epoch);
  std::printf("metric best_epoch %d\n", best_epoch);
  std::printf("metric best_validation %.6f\n", best);
}
