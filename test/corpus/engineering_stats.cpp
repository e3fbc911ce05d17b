// Corpus: project-style code (issue 31, a fourth round of outside programs). A Config struct,
// a Sequential built in a loop over layer widths with push_back, a training function that
// returns its raw sums in a struct (`return EpochStats{loss_sum, seen, correct};`, the caller
// divides), a std::function that prints the batch loss every few steps, the first batch's loss
// tensor printed whole, and a generic lambda that counts accuracy over the loader it is given.
//
//   engineering_stats BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

struct Config {
  int64_t batch_size = 32;
  int64_t epochs = 3;
  double learning_rate = 0.05;
  std::vector<int64_t> widths = {6, 16, 16, 3};
  int64_t report_every = 4;
};

struct EpochStats {
  double loss_sum;
  int64_t seen;
  int64_t correct;
};

// Three classes by which coordinate is largest, plus noise.
class Points : public torch::data::datasets::Dataset<Points> {
public:
  explicit Points(int64_t size) {
    auto generator = at::detail::createCPUGenerator(23);
    x_ = torch::randn({size, 6}, generator);
    y_ = x_.slice(1, 0, 3).argmax(1);
  }
  torch::data::Example<> get(size_t index) override {
    return {x_[static_cast<int64_t>(index)], y_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return x_.size(0); }

private:
  torch::Tensor x_, y_;
};

torch::nn::Sequential build_model(const Config &config) {
  torch::nn::Sequential model;
  for (size_t i = 0; i + 1 < config.widths.size(); ++i) {
    model->push_back(torch::nn::Linear(config.widths[i], config.widths[i + 1]));
    if (i + 2 < config.widths.size()) {
      model->push_back(torch::nn::Tanh());
    }
  }
  return model;
}

template <typename Loader>
EpochStats train_one_epoch(torch::nn::Sequential &model, torch::optim::SGD &optimizer,
                           Loader &loader, const Config &config,
                           const std::function<void(int64_t, double)> &report) {
  model->train();
  double loss_sum = 0;
  int64_t seen = 0;
  int64_t correct = 0;
  int64_t step = 0;
  for (auto &batch : loader) {
    optimizer.zero_grad();
    torch::Tensor logits = model->forward(batch.data);
    torch::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.target);
    loss.backward();
    optimizer.step();
    if (step == 0) {
      std::cout << "first batch loss " << loss << std::endl;
    }
    ++step;
    if (step % config.report_every == 0) {
      report(step, loss.template item<double>());
    }
    loss_sum += loss.template item<double>() * batch.data.size(0);
    seen += batch.data.size(0);
    correct += logits.argmax(1).eq(batch.target).sum().template item<int64_t>();
  }
  return EpochStats{loss_sum, seen, correct};
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR" << std::endl;
    return 2;
  }
  Config config;
  config.batch_size = std::stoll(argv[1]);
  const std::string out_dir = argv[2];

  torch::manual_seed(5);
  torch::nn::Sequential model = build_model(config);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(config.learning_rate));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Points(256).map(torch::data::transforms::Stack<>()), config.batch_size);

  std::cout << std::setprecision(6);
  std::function<void(int64_t, double)> report = [&](int64_t step, double loss) {
    std::cout << "  step " << step << " loss " << loss << std::endl;
  };
  auto accuracy = [&](const std::string &name, auto &data) {
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t right = 0, total = 0;
    for (auto &batch : data) {
      right += model->forward(batch.data).argmax(1).eq(batch.target).sum().template item<int64_t>();
      total += batch.data.size(0);
    }
    std::cout << name << " accuracy " << right << "/" << total << std::endl;
    std::cout << "metric " << name << "_accuracy " << static_cast<double>(right) / total
              << std::endl;
  };

  for (int64_t epoch = 1; epoch <= config.epochs; ++epoch) {
    EpochStats stats = train_one_epoch(model, optimizer, *loader, config, report);
    const double mean_loss = stats.loss_sum / stats.seen;
    std::cout << "epoch " << epoch << " loss " << mean_loss << " seen " << stats.seen
              << " correct " << stats.correct << std::endl;
    std::cout << "metric loss_" << epoch << " " << mean_loss << std::endl;
    std::cout << "metric seen_" << epoch << " " << stats.seen << std::endl;
  }
  accuracy("train", *loader);
  torch::save(model, out_dir + "/model.pt");
}
