// Corpus: library-style code (issue 31) whose model is held by a std::unique_ptr and whose
// loaders come from a factory function that makes the training loader (shuffled) and the
// evaluation loader alike; Adam, the mean loss over the samples seen, the test accuracy, and
// the weights written through an OutputArchive in a helper.
//
//   factory_unique_lib BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace lib {

class Rings : public torch::data::datasets::Dataset<Rings> {
 public:
  Rings(int64_t count, uint64_t seed) {
    auto gen = at::detail::createCPUGenerator(seed);
    labels_ = torch::randint(2, {count}, gen);
    auto radius = labels_.to(torch::kFloat) * 1.5 + 1 + torch::rand({count}, gen) * 0.4;
    auto angle = torch::rand({count}, gen) * 6.2831853;
    points_ = torch::stack({radius * torch::cos(angle), radius * torch::sin(angle)}, 1);
  }
  torch::data::Example<> get(size_t i) override {
    return {points_[static_cast<int64_t>(i)], labels_[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

 private:
  torch::Tensor points_, labels_;
};

template <typename Sampler>
auto make_loader(int64_t count, uint64_t seed, int64_t batch_size) {
  return torch::data::make_data_loader<Sampler>(
      Rings(count, seed).map(torch::data::transforms::Stack<>()), batch_size);
}

struct Classifier : torch::nn::Module {
  Classifier() {
    hidden = register_module("hidden", torch::nn::Linear(2, 16));
    logits = register_module("logits", torch::nn::Linear(16, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return logits->forward(torch::relu(hidden->forward(x))); }
  torch::nn::Linear hidden{nullptr}, logits{nullptr};
};

void save_weights(const torch::nn::Module& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  model.save(archive);
  archive.save_to(path);
}

}  // namespace lib

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(5);

  auto train_loader = lib::make_loader<torch::data::samplers::RandomSampler>(192, 1, batch_size);
  auto test_loader = lib::make_loader<torch::data::samplers::SequentialSampler>(64, 2, 32);
  std::unique_ptr<lib::Classifier> net = std::make_unique<lib::Classifier>();
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.02));

  for (int epoch = 1; epoch <= 4; ++epoch) {
    net->train();
    double loss_sum = 0.0;
    int64_t seen = 0;
    for (auto& batch : *train_loader) {
      optimizer.zero_grad();
      auto loss = torch::cross_entropy_loss(net->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * batch.data.size(0);
      seen += batch.data.size(0);
    }
    net->eval();
    torch::NoGradGuard no_grad;
    int64_t correct = 0, total = 0;
    for (auto& batch : *test_loader) {
      auto predicted = net->forward(batch.data).argmax(1);
      correct += predicted.eq(batch.target).sum().item<int64_t>();
      total += batch.target.size(0);
    }
    std::printf("metric loss_%d %.6f\n", epoch, loss_sum / seen);
    std::printf("metric test_accuracy_%d %.6f\n", epoch, static_cast<double>(correct) / total);
  }
  lib::save_weights(*net, out_dir + "/model.pt");
}
