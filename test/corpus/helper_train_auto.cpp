// Corpus: training lives in `void train(Net &net, torch::optim::Optimizer &optimizer,
// auto &loader, ...)` (a plain function apart from its C++20 `auto &` loader), called from main
// once per epoch; it reports the epoch's loss and accuracy as sums over the epoch divided by the
// dataset size (printf in the helper). A plain-Module net (`Net net;`), SGD with weight decay,
// a test pass in main over an unsharded loader.
//
//   helper_train_auto BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

struct Net : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(12, 20));
    fc2 = register_module("fc2", torch::nn::Linear(20, 3));
  }

  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
};

// A bump of width 3 in a 12-sample signal: where it sits (left, middle, right) is the class.
struct Bumps : torch::data::datasets::Dataset<Bumps> {
  torch::Tensor signals, classes;

  Bumps(int64_t n, uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    classes = torch::randint(3, {n}, gen);
    auto offsets = classes * 4 + torch::randint(2, {n}, gen);
    auto positions = torch::arange(12).unsqueeze(0);
    auto inside = (positions >= offsets.unsqueeze(1)) & (positions < offsets.unsqueeze(1) + 3);
    signals = inside.to(torch::kFloat) + 0.3 * torch::randn({n, 12}, gen);
  }

  torch::data::Example<> get(size_t i) override {
    return {signals[static_cast<int64_t>(i)], classes[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(classes.size(0)); }
};

void train(Net &net, torch::optim::Optimizer &optimizer, auto &loader, size_t dataset_size,
           int epoch) {
  net.train();
  double running_loss = 0.0;
  int64_t correct = 0;
  for (auto &batch : loader) {
    torch::Tensor data = batch.data, target = batch.target;
    optimizer.zero_grad();
    torch::Tensor output = net.forward(data);
    torch::Tensor loss = torch::cross_entropy_loss(output, target);
    loss.backward();
    optimizer.step();

    running_loss += loss.item<double>() * data.size(0);
    torch::Tensor pred = output.argmax(1);
    correct += pred.eq(target).sum().item<int64_t>();
  }
  std::printf("[epoch %d] train loss %.4f acc %.4f\n", epoch, running_loss / dataset_size,
              double(correct) / dataset_size);
  std::printf("metric train_loss_%d %.6f\n", epoch, running_loss / dataset_size);
  std::printf("metric train_accuracy_%d %.6f\n", epoch, double(correct) / dataset_size);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];

  torch::manual_seed(3);
  Net net;
  torch::optim::SGD optimizer(net.parameters(),
                              torch::optim::SGDOptions(0.1).momentum(0.8).weight_decay(1e-4));

  auto train_set = Bumps(256, 17).map(torch::data::transforms::Stack<>());
  const size_t train_size = *train_set.size();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set), batch_size);
  auto test_loader =
      torch::data::make_data_loader(Bumps(96, 18).map(torch::data::transforms::Stack<>()), 96);

  for (int epoch = 1; epoch <= 4; ++epoch) {
    train(net, optimizer, *train_loader, train_size, epoch);

    torch::NoGradGuard no_grad;
    net.eval();
    for (auto &batch : *test_loader) {
      auto accuracy = net.forward(batch.data).argmax(1).eq(batch.target).to(torch::kFloat).mean();
      std::printf("[epoch %d] test accuracy %.4f\n", epoch, accuracy.item<double>());
      std::printf("metric test_accuracy_%d %.6f\n", epoch, accuracy.item<double>());
    }
  }
  torch::save(net.parameters(), out_dir + "/model.pt");
}
