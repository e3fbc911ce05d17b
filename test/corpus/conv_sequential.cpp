// Corpus: a convolutional torch::nn::Sequential trained by a function whose loader parameter is
// `auto &` (a C++20 abbreviated template) and evaluated by another; AdamW with weight decay;
// gradient clipping by value; the device from `torch::Device device = torch::kCPU;` (a program
// that names only the CPU: the rewrite keeps it there, Options::on_cpu()).
//
//   conv_sequential BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// 8x8 images of four shapes: a horizontal bar, a vertical bar, a square, a cross.
class Shapes : public torch::data::datasets::Dataset<Shapes> {
public:
  Shapes(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    labels_ = torch::randint(4, {count}, generator);
    images_ = torch::randn({count, 1, 8, 8}, generator) * 0.4;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t at = 1 + i % 5;
      auto image = images_[i][0];
      switch (labels_[i].item<int64_t>()) {
      case 0:
        image[at] += 1.0;
        break;
      case 1:
        image.select(1, at) += 1.0;
        break;
      case 2:
        image.narrow(0, at, 3).narrow(1, at, 3) += 1.0;
        break;
      default:
        image[at] += 0.7;
        image.select(1, at) += 0.7;
      }
    }
  }
  torch::data::Example<> get(size_t index) override {
    return {images_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor images_, labels_;
};

void train_epoch(torch::nn::Sequential &model, auto &loader, torch::optim::AdamW &optimizer,
                 torch::Device device) {
  model->train();
  for (auto &batch : loader) {
    auto images = batch.data.to(device), labels = batch.target.to(device);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(images), labels);
    loss.backward();
    torch::nn::utils::clip_grad_value_(model->parameters(), 0.05);
    optimizer.step();
  }
}

double accuracy(torch::nn::Sequential &model, auto &loader, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  int64_t correct = 0, total = 0;
  for (auto &batch : loader) {
    auto images = batch.data.to(device), labels = batch.target.to(device);
    correct += model->forward(images).argmax(1).eq(labels).sum().template item<int64_t>();
    total += labels.size(0);
  }
  return static_cast<double>(correct) / static_cast<double>(total);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(19);
  torch::Device device = torch::kCPU;
  torch::nn::Sequential model(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 3).padding(1)),
                              torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
                              torch::nn::Linear(6 * 4 * 4, 4));
  model->to(device);
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(4e-3).weight_decay(0.05));
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Shapes(256, 8).map(torch::data::transforms::Stack<>()), batch_size);
  auto test_loader =
      torch::data::make_data_loader(Shapes(64, 9).map(torch::data::transforms::Stack<>()), 64);

  for (int epoch = 0; epoch < 3; ++epoch) {
    train_epoch(model, *train_loader, optimizer, device);
    std::printf("metric accuracy_%d %.6f\n", epoch, accuracy(model, *test_loader, device));
  }
  torch::save(model, out_dir + "/model.pt");
}
