// The single-process original that launcher_test's `accel verify` cases check rewrites against:
// a small classifier trained as a tutorial writes one, reporting each epoch's mean loss,
// accuracy and sample count. Its data parallel version is verify_classifier_dist.cpp.
//
//   verify_classifier BATCH   prints "epoch E loss L accuracy A samples S" per epoch
#include "verify_blobs.h"

#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BATCH\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  torch::manual_seed(1); // LibTorch's default generator is not seeded the same on every run
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::ReLU(),
                              torch::nn::Linear(16, 3));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      Blobs().map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    double loss_sum = 0;
    int64_t correct = 0, samples = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto output = model->forward(batch.data);
      auto loss = torch::nn::functional::cross_entropy(output, batch.target);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * batch.data.size(0);
      correct += output.argmax(1).eq(batch.target).sum().item<int64_t>();
      samples += batch.data.size(0);
    }
    std::printf("epoch %d loss %.6f accuracy %.4f samples %lld\n", epoch, loss_sum / samples,
                static_cast<double>(correct) / samples, static_cast<long long>(samples));
  }
}
