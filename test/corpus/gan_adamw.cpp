// Corpus: a GAN — two models and two AdamW optimizers, two backward passes and two optimizer
// steps per batch; the generator's noise comes with the data (a custom Dataset of
// Example<real, noise>), so every sample meets the same noise whatever the process.
//
//   gan_adamw BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

class RingWithNoise : public torch::data::datasets::Dataset<RingWithNoise> {
public:
  RingWithNoise() {
    auto generator = at::detail::createCPUGenerator(21);
    auto angle = torch::rand({128}, generator) * 6.2831853;
    real_ = torch::stack({angle.cos(), angle.sin()}, 1);
    noise_ = torch::randn({128, 4}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    return {real_[static_cast<int64_t>(index)], noise_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return 128; }

private:
  torch::Tensor real_, noise_;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(9);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::nn::Sequential generator(torch::nn::Linear(4, 16), torch::nn::Tanh(),
                                  torch::nn::Linear(16, 2));
  torch::nn::Sequential discriminator(torch::nn::Linear(2, 16), torch::nn::ReLU(),
                                      torch::nn::Linear(16, 1));
  generator->to(device);
  discriminator->to(device);
  torch::optim::AdamW g_optimizer(generator->parameters(), torch::optim::AdamWOptions(2e-3));
  torch::optim::AdamW d_optimizer(discriminator->parameters(), torch::optim::AdamWOptions(2e-3));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      RingWithNoise().map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 0; epoch < 3; ++epoch) {
    for (auto &batch : *loader) {
      auto real = batch.data.to(device), noise = batch.target.to(device);
      auto ones = torch::ones({real.size(0), 1}, device);
      auto zeros = torch::zeros({real.size(0), 1}, device);

      d_optimizer.zero_grad();
      auto generated = generator->forward(noise);
      auto d_loss = torch::binary_cross_entropy_with_logits(discriminator->forward(real), ones) +
                    torch::binary_cross_entropy_with_logits(
                        discriminator->forward(generated.detach()), zeros);
      d_loss.backward();
      d_optimizer.step();

      g_optimizer.zero_grad();
      auto g_loss =
          torch::binary_cross_entropy_with_logits(discriminator->forward(generated), ones);
      g_loss.backward();
      g_optimizer.step();
    }
  }

  // How far the generated points are from the unit circle, over all the noise (unsharded).
  auto everything =
      torch::data::make_data_loader(RingWithNoise().map(torch::data::transforms::Stack<>()), 64);
  double distance = 0;
  torch::NoGradGuard no_grad;
  for (auto &batch : *everything) {
    auto points = generator->forward(batch.target.to(device));
    distance += (points.norm(2, 1) - 1).abs().sum().item<double>();
  }
  std::printf("metric circle_distance %.6f\n", distance / 128);
  torch::save(generator, out_dir + "/model.pt");
}
