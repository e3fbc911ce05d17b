// Corpus: a plain-Module model from its own header made with std::make_shared, Adam, the
// RandomSampler, the device from a DeviceType variable, a separate evaluation loop under
// NoGradGuard reporting accuracy (its loader is left unsharded: every process evaluates all of
// it), InferenceMode for a last prediction, torch::save at the end.
//
//   classifier_adam BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include "models/classifier.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

// 8x8 one-channel "images" of three classes: a bright row, a bright column, or a diagonal.
class Patterns : public torch::data::datasets::Dataset<Patterns> {
public:
  explicit Patterns(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    labels_ = torch::randint(3, {count}, generator);
    images_ = torch::randn({count, 1, 8, 8}, generator) * 0.5;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t label = labels_[i].item<int64_t>();
      const int64_t where = i % 8;
      if (label == 0) {
        images_[i][0][where] += 1.5;
      } else if (label == 1) {
        images_[i][0].select(1, where) += 1.5;
      } else {
        images_[i][0].diagonal() += 1.5;
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

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(5);
  torch::DeviceType device_type = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::Device device(device_type);
  auto model = std::make_shared<Classifier>();
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Patterns(240, 1).map(torch::data::transforms::Stack<>()), batch_size);
  auto test_loader =
      torch::data::make_data_loader(Patterns(90, 2).map(torch::data::transforms::Stack<>()), 30);

  for (int epoch = 0; epoch < 3; ++epoch) {
    model->train();
    for (auto &batch : *train_loader) {
      auto images = batch.data.to(device), labels = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(images), labels);
      loss.backward();
      optimizer.step();
    }
  }

  model->eval();
  int64_t correct = 0, total = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto &batch : *test_loader) {
      auto images = batch.data.to(device), labels = batch.target.to(device);
      correct += model->forward(images).argmax(1).eq(labels).sum().item<int64_t>();
      total += labels.size(0);
    }
  }
  std::printf("metric accuracy %.6f\n", static_cast<double>(correct) / static_cast<double>(total));
  {
    torch::InferenceMode inference;
    auto first = Patterns(1, 3).get(0);
    auto logits = model->forward(first.data.unsqueeze(0).to(device));
    std::printf("metric first_log_probability %.6f\n", logits.max().item<double>());
  }
  torch::save(model, out_dir + "/model.pt");
}
