// Corpus: PyTorch-example-style progress. `template <typename Loader> void train_epoch(...)`
// takes the model holder, a `torch::Device device` and the loader, moves each batch to the
// device, and prints "Train Epoch: E [seen/total (pct%)]  Loss: mean" every 4 batches, where
// the loss is the mean of the per-batch losses so far; a 1-D convolutional TORCH_MODULE;
// Adam; the device from cuda::is_available(); test() returns its numbers for main to print.
//
//   device_progress BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl()
      : conv(register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(1, 4, 3)))),
        fc(register_module("fc", torch::nn::Linear(4 * 7, 3))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool1d(torch::relu(conv->forward(x.unsqueeze(1))), 2);
    return fc->forward(x.flatten(1));
  }

  torch::nn::Conv1d conv;
  torch::nn::Linear fc;
};
TORCH_MODULE(ConvNet);

// 16-sample signals: a sine, a square wave or a ramp, each with a random phase, plus noise.
class Signals : public torch::data::datasets::Dataset<Signals> {
public:
  Signals(int64_t count, uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    kinds_ = torch::randint(3, {count}, gen);
    auto phase = torch::rand({count, 1}, gen) * 6.28;
    auto t = torch::linspace(0, 6.28, 16).unsqueeze(0) + phase;
    auto sine = torch::sin(t), square = torch::sign(torch::sin(t)),
         ramp = torch::fmod(t, 3.14) / 1.57 - 1;
    auto kind = kinds_.unsqueeze(1);
    signals_ = torch::where(kind == 0, sine, torch::where(kind == 1, square, ramp)) +
               0.2 * torch::randn({count, 16}, gen);
  }
  torch::data::Example<> get(size_t index) override {
    return {signals_[static_cast<int64_t>(index)], kinds_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return kinds_.size(0); }

private:
  torch::Tensor signals_, kinds_;
};

template <typename Loader>
void train_epoch(int epoch, ConvNet &model, torch::Device device, Loader &loader,
                 torch::optim::Optimizer &optimizer, int64_t dataset_size) {
  model->train();
  int64_t batch_idx = 0, seen = 0;
  double total = 0;
  for (auto &batch : loader) {
    auto data = batch.data.to(device), target = batch.target.to(device);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(data), target);
    loss.backward();
    optimizer.step();
    total += loss.template item<double>();
    seen += data.size(0);
    if (++batch_idx % 4 == 0) {
      std::printf("Train Epoch: %d [%ld/%ld (%.0f%%)]\tLoss: %.6f\n", epoch, seen, dataset_size,
                  100.0 * seen / dataset_size, total / batch_idx);
    }
  }
}

template <typename Loader>
std::pair<double, double> test(ConvNet &model, torch::Device device, Loader &loader) {
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  int64_t correct = 0, count = 0;
  for (const auto &batch : loader) {
    auto data = batch.data.to(device), target = batch.target.to(device);
    auto output = model->forward(data);
    loss_sum += torch::nn::functional::cross_entropy(
                    output, target,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .template item<double>();
    correct += output.argmax(1).eq(target).sum().template item<int64_t>();
    count += target.size(0);
  }
  return {loss_sum / count, static_cast<double>(correct) / count};
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];

  torch::manual_seed(42);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  ConvNet model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));

  auto train_dataset = Signals(256, 100).map(torch::data::transforms::Stack<>());
  const int64_t train_size = static_cast<int64_t>(train_dataset.size().value());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_dataset), batch_size);
  auto test_loader =
      torch::data::make_data_loader(Signals(120, 101).map(torch::data::transforms::Stack<>()), 40);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    train_epoch(epoch, model, device, *train_loader, optimizer, train_size);
    const auto [test_loss, test_accuracy] = test(model, device, *test_loader);
    std::printf("Test set: Average loss: %.4f, Accuracy: %.4f\n", test_loss, test_accuracy);
    std::printf("metric test_loss_%d %.6f\n", epoch, test_loss);
    std::printf("metric test_accuracy_%d %.6f\n", epoch, test_accuracy);
  }
  torch::save(model, out_dir + "/model.pt");
}
