// Corpus: C++17, a `template <class DataLoader> void fit(...)` over a torch::nn::Sequential
// (passed by reference) and a concrete torch::optim::SGD&; progress every 2 batches with
// std::setw-aligned "[  seen/ total]" counters and the running mean of the sample losses;
// an epoch summary at the end of fit; a smooth-L1 regression of a 2-D height map.
//
//   sequential_fit BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <iomanip>
#include <iostream>
#include <string>

class HeightMap : public torch::data::datasets::Dataset<HeightMap> {
 public:
  HeightMap(int64_t samples, uint64_t seed) {
    auto rng = at::detail::createCPUGenerator(seed);
    xy_ = torch::rand({samples, 2}, rng) * 2 - 1;
    auto x = xy_.select(1, 0), y = xy_.select(1, 1);
    height_ = (torch::exp(-(x * x + y * y) * 2) - 0.3 * x * y).unsqueeze(1);
  }
  torch::data::Example<> get(size_t index) override {
    return {xy_[static_cast<int64_t>(index)], height_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return xy_.size(0); }

 private:
  torch::Tensor xy_, height_;
};

template <class DataLoader>
void fit(torch::nn::Sequential& model, torch::optim::SGD& sgd, DataLoader& loader, int epoch,
         int64_t total) {
  model->train();
  double running_loss = 0;
  int64_t seen = 0;
  int64_t batch_index = 0;
  for (auto& batch : loader) {
    torch::Tensor data = batch.data;
    torch::Tensor target = batch.target;
    sgd.zero_grad();
    torch::Tensor loss = torch::smooth_l1_loss(model->forward(data), target);
    loss.backward();
    sgd.step();
    running_loss += loss.item<double>() * data.size(0);
    seen += data.size(0);
    ++batch_index;
    if (batch_index % 2 == 0) {
      std::cout << "epoch " << epoch << " [" << std::setw(4) << seen << "/" << std::setw(4)
                << total << "] loss=" << std::setprecision(4) << running_loss / seen << '\n';
    }
  }
  std::cout << "epoch " << epoch << " done: " << batch_index << " steps, mean loss "
            << std::setprecision(6) << running_loss / seen << std::endl;
  std::cout << "metric train_loss_" << epoch << " " << running_loss / seen << std::endl;
}

int main(int argc, char* argv[]) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR\n";
    return 2;
  }
  const int64_t batch_size = std::stoll(argv[1]);
  const std::string out_dir = argv[2];

  torch::manual_seed(77);
  torch::nn::Sequential model(torch::nn::Linear(2, 32), torch::nn::Tanh(),
                              torch::nn::Linear(32, 32), torch::nn::Tanh(),
                              torch::nn::Linear(32, 1));
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));

  HeightMap train_set(256, 12);
  const int64_t train_size = static_cast<int64_t>(*train_set.size());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_set).map(torch::data::transforms::Stack<>()), batch_size);
  auto grid_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      HeightMap(100, 13).map(torch::data::transforms::Stack<>()), 100);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    fit(model, sgd, *train_loader, epoch, train_size);
    torch::NoGradGuard no_grad;
    model->eval();
    auto grid_batch = grid_loader->begin();
    const double grid_error =
        torch::mse_loss(model->forward(grid_batch->data), grid_batch->target).item<double>();
    std::cout << "epoch " << epoch << " grid mse " << grid_error << std::endl;
    std::cout << "metric grid_mse_" << epoch << " " << grid_error << std::endl;
  }
  torch::save(model, out_dir + "/model.pt");
}
