// A plain single-process LibTorch training program: an MLP on (Fashion-)MNIST.
// scripts/demo rewrites it with accel-rewrite and runs both versions side by side.
//
//   train DATA_DIR [BATCH_SIZE] [EPOCHS]
//
// DATA_DIR holds the four uncompressed MNIST-format files (train-images-idx3-ubyte, ...).
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

struct NetImpl : torch::nn::Module {
  NetImpl() {
    hidden = register_module("hidden", torch::nn::Linear(784, 128));
    output = register_module("output", torch::nn::Linear(128, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(hidden->forward(x.view({x.size(0), 784})));
    return torch::log_softmax(output->forward(x), 1);
  }
  torch::nn::Linear hidden{nullptr}, output{nullptr};
};
TORCH_MODULE(Net);

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DATA_DIR [BATCH_SIZE] [EPOCHS]\n", argv[0]);
    return 2;
  }
  const std::string data_dir = argv[1];
  const int64_t batch_size = argc > 2 ? std::atoll(argv[2]) : 64;
  const int epochs = argc > 3 ? std::atoi(argv[3]) : 2;

  torch::manual_seed(1);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));

  auto train_set = torch::data::datasets::MNIST(data_dir)
                       .map(torch::data::transforms::Normalize<>(0.2860, 0.3530))
                       .map(torch::data::transforms::Stack<>());
  const size_t train_size = *train_set.size();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set), batch_size);
  auto test_loader = torch::data::make_data_loader(
      torch::data::datasets::MNIST(data_dir, torch::data::datasets::MNIST::Mode::kTest)
          .map(torch::data::transforms::Normalize<>(0.2860, 0.3530))
          .map(torch::data::transforms::Stack<>()),
      1000);

  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    size_t seen = 0;
    int64_t batches = 0;
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(data), targets);
      loss.backward();
      optimizer.step();
      seen += static_cast<size_t>(data.size(0));
      if (++batches % 100 == 0) {
        std::printf("epoch %d [%zu/%zu] loss %.4f\n", epoch, seen, train_size, loss.item<double>());
        std::fflush(stdout);
      }
    }

    model->eval();
    torch::NoGradGuard no_grad;
    int64_t correct = 0, total = 0;
    for (auto &batch : *test_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      auto predicted = model->forward(data).argmax(1);
      correct += predicted.eq(targets).sum().item<int64_t>();
      total += targets.size(0);
    }
    std::printf("epoch %d test accuracy %.4f\n", epoch,
                static_cast<double>(correct) / static_cast<double>(total));
    std::fflush(stdout);
  }
  torch::save(model, "mnist_model.pt");
}
