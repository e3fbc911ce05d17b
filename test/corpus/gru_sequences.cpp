// Corpus: a recurrent model carrying its hidden state through each sequence step by step (a
// GRUCell in a loop inside the training step), AdamW, gradient clipping, StepLR stepped every
// batch, std::make_shared of a plain Module.
//
//   gru_sequences BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

// Sequences of 12 steps of 3 features; the target is a running sum the model must carry.
class Sequences : public torch::data::datasets::Dataset<Sequences> {
public:
  Sequences() {
    auto generator = at::detail::createCPUGenerator(17);
    inputs_ = torch::randn({80, 12, 3}, generator);
    targets_ = inputs_.sum(1).narrow(1, 0, 2);
  }
  torch::data::Example<> get(size_t index) override {
    return {inputs_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return 80; }

private:
  torch::Tensor inputs_, targets_;
};

struct Recurrent : torch::nn::Module {
  Recurrent()
      : cell(register_module("cell", torch::nn::GRUCell(3, 10))),
        head(register_module("head", torch::nn::Linear(10, 2))) {}
  torch::Tensor forward(const torch::Tensor &sequence, torch::Tensor hidden) {
    for (int64_t step = 0; step < sequence.size(1); ++step) {
      hidden = cell(sequence.select(1, step), hidden);
    }
    return head(hidden);
  }
  torch::nn::GRUCell cell;
  torch::nn::Linear head;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(13);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  auto model = std::make_shared<Recurrent>();
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(5e-3));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/10, /*gamma=*/0.7);
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Sequences().map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 0; epoch < 4; ++epoch) {
    for (auto &batch : *loader) {
      auto sequences = batch.data.to(device), targets = batch.target.to(device);
      auto hidden = torch::zeros({sequences.size(0), 10}).to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(sequences, hidden), targets);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      scheduler.step();
    }
  }

  auto everything =
      torch::data::make_data_loader(Sequences().map(torch::data::transforms::Stack<>()), 40);
  double squared_error = 0;
  torch::NoGradGuard no_grad;
  for (auto &batch : *everything) {
    auto sequences = batch.data.to(device);
    auto hidden = torch::zeros({sequences.size(0), 10}).to(device);
    squared_error +=
        (model->forward(sequences, hidden) - batch.target.to(device)).pow(2).sum().item<double>();
  }
  std::printf("metric mse %.6f\n", squared_error / 80 / 2);
  std::printf("metric lr %.6f\n", optimizer.param_groups()[0].options().get_lr());
  torch::save(model, out_dir + "/model.pt");
}
