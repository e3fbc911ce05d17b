// Corpus: a program that first checks its gradients: before any optimizer exists it runs one
// loss.backward() on a fixed slice of the data and prints the gradient norm, clears the
// gradients, then trains. CUDA is opted into at compile time (`#ifdef USE_CUDA`:
// `.to(torch::kCUDA)` on the model, `.cuda()` on the data; off in this build). Adagrad; the training loop in main counts the samples seen and the
// correct predictions and prints the epoch's training accuracy (std::cout).
//
//   warmup_gradnorm BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>

struct TwoLayer : torch::nn::Module {
  explicit TwoLayer(int64_t width)
      : l1(register_module("l1", torch::nn::Linear(3, width))),
        l2(register_module("l2", torch::nn::Linear(width, 2))) {}
  torch::Tensor forward(const torch::Tensor &x) { return l2(torch::sigmoid(l1(x))); }
  torch::nn::Linear l1, l2;
};

// Inside or outside a ball of radius 1 in three dimensions.
struct Ball : torch::data::datasets::Dataset<Ball> {
  torch::Tensor points, inside;
  Ball(int64_t n, uint64_t seed) {
    auto g = at::detail::createCPUGenerator(seed);
    points = torch::randn({n, 3}, g) * 0.8;
    inside = (points.norm(2, 1) < 1.0).to(torch::kLong);
  }
  torch::data::Example<> get(size_t i) override {
    return {points[static_cast<int64_t>(i)], inside[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return points.size(0); }
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR\n";
    return 2;
  }
  const long batch = std::atol(argv[1]);
  const std::string out = argv[2];

  torch::manual_seed(99);
  auto model = std::make_shared<TwoLayer>(16);
#ifdef USE_CUDA
  model->to(torch::kCUDA);
#endif

  Ball train_set(256, 7), test_set(128, 8);

  // Sanity check: do gradients flow? One backward on the first 32 examples.
  {
    auto x = train_set.points.slice(0, 0, 32), y = train_set.inside.slice(0, 0, 32);
#ifdef USE_CUDA
    x = x.cuda();
    y = y.cuda();
#endif
    auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    double squared = 0;
    for (const auto &p : model->parameters()) {
      squared += p.grad().pow(2).sum().item<double>();
    }
    std::cout << "initial loss " << loss.item<double>() << ", gradient norm " << std::sqrt(squared)
              << std::endl;
    std::cout << "metric initial_grad_norm " << std::sqrt(squared) << std::endl;
    model->zero_grad();
  }

  torch::optim::Adagrad optimizer(model->parameters(), torch::optim::AdagradOptions(0.5));
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set).map(torch::data::transforms::Stack<>()), batch);

  for (int epoch = 0; epoch < 4; ++epoch) {
    int64_t seen = 0, correct = 0;
    for (auto &b : *train_loader) {
      optimizer.zero_grad();
      auto logits = model->forward(b.data);
      auto loss = torch::nn::functional::cross_entropy(logits, b.target);
      loss.backward();
      optimizer.step();
      correct += logits.argmax(1).eq(b.target).sum().item<int64_t>();
      seen += b.data.size(0);
    }
    std::cout << "epoch " << epoch << ": " << correct << "/" << seen << " correct ("
              << 100.0 * correct / seen << "%)" << std::endl;
    std::cout << "metric train_accuracy_" << epoch << " " << double(correct) / seen << std::endl;
  }

  torch::NoGradGuard no_grad;
  auto predictions = model->forward(test_set.points).argmax(1);
  const double test_accuracy = predictions.eq(test_set.inside).to(torch::kDouble).mean().item<double>();
  std::cout << "test accuracy " << test_accuracy << std::endl;
  std::cout << "metric test_accuracy " << test_accuracy << std::endl;
  torch::save(model, out + "/model.pt");
}
