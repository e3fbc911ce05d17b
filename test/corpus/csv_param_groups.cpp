// Corpus: a custom Dataset that parses a CSV file (written here first), a model with raw
// parameters (register_parameter, no submodules), SGD with two parameter groups at different
// learning rates, a StepLR over both, the SequentialSampler with drop_last.
//
//   csv_param_groups BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

// "x1,x2,x3,y" rows of y = 2 x1 - x2 + 0.5 x3^2 + 1 plus noise.
void write_csv(const std::string &path, int64_t rows) {
  auto generator = at::detail::createCPUGenerator(41);
  auto x = torch::rand({rows, 3}, generator) * 2 - 1;
  auto y = 2 * x.select(1, 0) - x.select(1, 1) + 0.5 * x.select(1, 2).pow(2) + 1 +
           0.05 * torch::randn({rows}, generator);
  // Written under a name of this process's own, then renamed into place.
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary);
    out << "x1,x2,x3,y\n";
    for (int64_t row = 0; row < rows; ++row) {
      out << x[row][0].item<float>() << ',' << x[row][1].item<float>() << ','
          << x[row][2].item<float>() << ',' << y[row].item<float>() << '\n';
    }
  }
  std::rename(temporary.c_str(), path.c_str());
}

class CsvRows : public torch::data::datasets::Dataset<CsvRows> {
public:
  explicit CsvRows(const std::string &path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line); // the header
    std::vector<float> values;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string field;
      while (std::getline(fields, field, ',')) {
        values.push_back(std::stof(field));
      }
    }
    auto table = torch::tensor(values).view({-1, 4});
    inputs_ = table.narrow(1, 0, 3).clone();
    targets_ = table.narrow(1, 3, 1).clone();
  }
  torch::data::Example<> get(size_t index) override {
    return {inputs_[static_cast<int64_t>(index)], targets_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return inputs_.size(0); }

private:
  torch::Tensor inputs_, targets_;
};

// y = w.x + v.x^2 + b, its parameters registered by hand.
struct QuadraticImpl : torch::nn::Module {
  QuadraticImpl() {
    linear = register_parameter("linear", torch::zeros({3, 1}));
    square = register_parameter("square", torch::zeros({3, 1}));
    bias = register_parameter("bias", torch::zeros({1}));
  }
  torch::Tensor forward(const torch::Tensor &x) {
    return x.matmul(linear) + x.pow(2).matmul(square) + bias;
  }
  torch::Tensor linear, square, bias;
};
TORCH_MODULE(Quadratic);

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  write_csv(out_dir + "/rows.csv", 200);
  torch::manual_seed(43);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Quadratic model;
  model->to(device);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{model->linear, model->bias},
                      std::make_unique<torch::optim::SGDOptions>(0.1));
  groups.emplace_back(std::vector<torch::Tensor>{model->square},
                      std::make_unique<torch::optim::SGDOptions>(0.05));
  torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(0.1));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/3, /*gamma=*/0.5);
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      CsvRows(out_dir + "/rows.csv").map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size).drop_last(true));

  for (int epoch = 0; epoch < 8; ++epoch) {
    for (auto &batch : *loader) {
      auto inputs = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      torch::mse_loss(model->forward(inputs), targets).backward();
      optimizer.step();
    }
    scheduler.step();
  }
  std::printf("metric lr_linear %.6f\n", optimizer.param_groups()[0].options().get_lr());
  std::printf("metric lr_square %.6f\n", optimizer.param_groups()[1].options().get_lr());
  std::printf("metric bias %.6f\n", model->bias.item<double>());
  torch::save(model, out_dir + "/model.pt");
}
