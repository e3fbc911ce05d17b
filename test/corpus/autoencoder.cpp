// Corpus: a plain-Module autoencoder held in a std::shared_ptr from std::make_shared, the loss
// reduced through torch::autograd::backward({loss}), SGD with Nesterov momentum, the
// reconstruction error measured under InferenceMode after every epoch.
//
//   autoencoder BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

// 16-dimensional points on a 3-dimensional subspace, plus a little noise.
class Subspace : public torch::data::datasets::Dataset<Subspace> {
public:
  Subspace(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    auto basis = torch::randn({3, 16}, at::detail::createCPUGenerator(5));
    points_ = torch::randn({count, 3}, generator).matmul(basis) +
              0.05 * torch::randn({count, 16}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    auto point = points_[static_cast<int64_t>(index)];
    return {point, point};
  }
  torch::optional<size_t> size() const override { return points_.size(0); }

private:
  torch::Tensor points_;
};

struct AutoEncoder : torch::nn::Module {
  AutoEncoder(int64_t width, int64_t code)
      : encoder(register_module("encoder", torch::nn::Linear(width, code))),
        decoder(register_module("decoder", torch::nn::Linear(code, width))) {}
  torch::Tensor forward(const torch::Tensor &x) { return decoder(torch::tanh(encoder(x))); }
  torch::nn::Linear encoder, decoder;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(29);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  std::shared_ptr<AutoEncoder> model = std::make_shared<AutoEncoder>(16, 4);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(0.02).momentum(0.9).nesterov(true));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Subspace(224, 1).map(torch::data::transforms::Stack<>()), batch_size);
  const auto held_out = Subspace(64, 2).get_batch({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});

  for (int epoch = 0; epoch < 5; ++epoch) {
    for (auto &batch : *loader) {
      auto inputs = batch.data.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(inputs), batch.target.to(device));
      torch::autograd::backward({loss});
      optimizer.step();
    }
    torch::InferenceMode inference;
    double error = 0;
    for (const auto &example : held_out) {
      auto input = example.data.to(device).unsqueeze(0);
      error += torch::mse_loss(model->forward(input), input).item<double>();
    }
    std::printf("metric reconstruction_%d %.6f\n", epoch, error / 12);
  }
  torch::save(model, out_dir + "/model.pt");
}
