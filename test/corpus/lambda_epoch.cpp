// Corpus: the training epoch and the evaluation are [&] lambdas in main; the device is an
// `auto` DeviceType from cuda::is_available(); per-feature scales are moved with a `.cuda()`
// behind the same test (the rewrite moves them to the accelerator's device); a
// torch::nn::Sequential model; Adam; the SequentialSampler; accuracy after every epoch.
// (Not a class-weighted loss: its mean divides by the batch's total weight, so the average of
// two half-batch means is not the full batch's mean, with this runtime as with PyTorch DDP.)
//
//   lambda_epoch BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Three Gaussian blobs in five dimensions, one per class, the third twice as common.
class Blobs : public torch::data::datasets::Dataset<Blobs> {
public:
  Blobs(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    auto centres = torch::randn({3, 5}, at::detail::createCPUGenerator(99)) * 1.5;
    labels_ = torch::randint(4, {count}, generator).clamp_max(2);
    points_ = centres.index_select(0, labels_) + torch::randn({count, 5}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    return {points_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor points_, labels_;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(7);
  auto device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::nn::Sequential model(torch::nn::Linear(5, 32), torch::nn::Functional(torch::tanh),
                              torch::nn::Linear(32, 3), torch::nn::LogSoftmax(1));
  model->to(device);
  torch::Tensor feature_scales = torch::tensor({1.0f, 0.5f, 2.0f, 1.0f, 0.8f});
  if (torch::cuda::is_available()) {
    feature_scales = feature_scales.cuda();
  }
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Blobs(192, 4).map(torch::data::transforms::Stack<>()), batch_size);
  auto test_loader =
      torch::data::make_data_loader(Blobs(96, 5).map(torch::data::transforms::Stack<>()), 32);

  auto train_epoch = [&]() {
    model->train();
    for (auto &batch : *train_loader) {
      auto points = batch.data.to(device);
      auto labels = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(points * feature_scales), labels);
      loss.backward();
      optimizer.step();
    }
  };
  auto evaluate = [&]() {
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t correct = 0, total = 0;
    for (auto &batch : *test_loader) {
      auto points = batch.data.to(device);
      auto labels = batch.target.to(device);
      correct += model->forward(points * feature_scales).argmax(1).eq(labels).sum().item<int64_t>();
      total += labels.size(0);
    }
    return static_cast<double>(correct) / static_cast<double>(total);
  };

  for (int epoch = 0; epoch < 4; ++epoch) {
    train_epoch();
    std::printf("metric accuracy_%d %.6f\n", epoch, evaluate());
  }
  torch::save(model, out_dir + "/model.pt");
}
