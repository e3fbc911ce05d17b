// Corpus: a torch::nn::Linear as the whole model, a loss module with a buffer
// (BCEWithLogitsLoss with pos_weight, moved to the device, never prepared), Adagrad, gradient
// clipping by norm, the device from a DeviceType variable, precision and recall on a test set
// evaluated in chunks under NoGradGuard.
//
//   logistic_bce BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Ten features; positives (about a quarter) lie on one side of a tilted plane.
class Imbalanced : public torch::data::datasets::Dataset<Imbalanced> {
public:
  Imbalanced(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    features_ = torch::randn({count, 10}, generator);
    auto direction = torch::linspace(-1, 1, 10);
    labels_ = (features_.matmul(direction) > 1.0).to(torch::kFloat).unsqueeze(1);
  }
  torch::data::Example<> get(size_t index) override {
    return {features_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }
  torch::Tensor features_, labels_;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(37);
  const torch::DeviceType device_type = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::nn::Linear model(10, 1);
  model->to(device_type);
  torch::nn::BCEWithLogitsLoss criterion(
      torch::nn::BCEWithLogitsLossOptions().pos_weight(torch::tensor({3.0f})));
  criterion->to(device_type);
  torch::optim::Adagrad optimizer(model->parameters(), torch::optim::AdagradOptions(0.2));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Imbalanced(288, 1).map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 0; epoch < 4; ++epoch) {
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = criterion(model(batch.data.to(device_type)), batch.target.to(device_type));
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 2.0);
      optimizer.step();
    }
  }

  Imbalanced test(200, 2);
  torch::NoGradGuard no_grad;
  int64_t true_positive = 0, predicted = 0, actual = 0;
  for (int64_t start = 0; start < 200; start += 50) {
    auto features = test.features_.narrow(0, start, 50).to(device_type);
    auto labels = test.labels_.narrow(0, start, 50).to(device_type);
    auto positive = model(features).gt(0);
    true_positive += positive.logical_and(labels.gt(0.5)).sum().item<int64_t>();
    predicted += positive.sum().item<int64_t>();
    actual += labels.gt(0.5).sum().item<int64_t>();
  }
  std::printf("metric precision %.6f\n", static_cast<double>(true_positive) / predicted);
  std::printf("metric recall %.6f\n", static_cast<double>(true_positive) / actual);
  torch::save(model, out_dir + "/model.pt");
}
