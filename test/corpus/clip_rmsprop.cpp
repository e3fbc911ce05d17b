// Blog-tutorial style: regress a noisy sine with a small MLP, RMSprop + StepLR,
// gradients clipped by norm and by value every step (2-space indent, std::cout).
//
// Corpus: shape 6 of issue 31 (direct clipping, accel-clip) and a statistic normalised in
// place after the loop (`epoch_loss /= num_batches`).
//
//   clip_rmsprop BATCH OUT_DIR   prints each epoch's loss and grad norm, "metric" lines, and
//                                writes OUT_DIR/model.pt
#include <torch/torch.h>
#include <iostream>
#include <iomanip>
#include <memory>
#include <string>

struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(1, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 32));
    out = register_module("out", torch::nn::Linear(32, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::tanh(fc1->forward(x));
    x = torch::tanh(fc2->forward(x));
    return out->forward(x);
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, out{nullptr};
};

class SineDataset : public torch::data::datasets::Dataset<SineDataset> {
 public:
  explicit SineDataset(int64_t n) {
    x_ = torch::linspace(-3.0, 3.0, n).unsqueeze(1);
    y_ = torch::sin(x_) + 0.1 * torch::randn({n, 1});
  }
  torch::data::Example<> get(size_t index) override {
    return {x_[index], y_[index]};
  }
  torch::optional<size_t> size() const override { return x_.size(0); }
 private:
  torch::Tensor x_, y_;
};

int main(int argc, char* argv[]) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR" << std::endl;
    return 1;
  }
  int batch_size = std::stoi(argv[1]);
  std::string out_dir = argv[2];
  torch::manual_seed(42);

  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  std::cout << "Training on " << (device.is_cuda() ? "GPU" : "CPU") << std::endl;

  auto model = std::make_shared<Net>();
  model->to(device);

  auto dataset = SineDataset(256).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), batch_size);

  torch::optim::RMSprop optimizer(model->parameters(), torch::optim::RMSpropOptions(0.002));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.7);

  double epoch_loss = 0.0;
  double last_norm = 0.0;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    epoch_loss = 0.0;
    int num_batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto pred = model->forward(x);
      auto loss = torch::mse_loss(pred, y);
      loss.backward();
      last_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      torch::nn::utils::clip_grad_value_(model->parameters(), 0.5);
      optimizer.step();
      epoch_loss += loss.item<double>();
      num_batches++;
    }
    scheduler.step();
    epoch_loss /= num_batches;
    std::cout << "Epoch " << epoch << " | loss: " << std::setprecision(6) << epoch_loss
              << " | grad norm: " << last_norm << std::endl;
  }

  std::cout << "metric final_loss " << epoch_loss << std::endl;
  std::cout << "metric last_grad_norm " << last_norm << std::endl;
  torch::save(model, out_dir + "/model.pt");
  return 0;
}
