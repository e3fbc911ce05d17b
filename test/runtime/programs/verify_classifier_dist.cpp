// verify_classifier.cpp made data parallel by hand, as a user would: the Accelerator, prepare,
// a prepared loader, accelerator.backward, the epoch's sums combined across the processes, the
// report printed once. Built twice: as verify_classifier_dist, a correct version, and with
// VERIFY_UNREDUCED_LOSS as verify_classifier_unreduced, which prints the main process's own
// loss sum over the global sample count (a statistic combined by the wrong rule, issue 31):
// `accel verify` must tell them apart.
//
//   verify_classifier_dist BATCH   under accel launch; prints what verify_classifier prints
#include <accelerate/accelerate.h>

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
  accelerate::Accelerator accelerator;
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::ReLU(),
                              torch::nn::Linear(16, 3));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      Blobs().map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 1; epoch <= 3; ++epoch) {
    double loss_sum = 0;
    int64_t correct = 0, samples = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto output = model->forward(batch.data);
      auto loss = torch::nn::functional::cross_entropy(output, batch.target);
      accelerator.backward(loss);
      optimizer.step();
      loss_sum += loss.item<double>() * batch.data.size(0);
      correct += output.argmax(1).eq(batch.target).sum().item<int64_t>();
      samples += batch.data.size(0);
    }
#ifndef VERIFY_UNREDUCED_LOSS
    loss_sum = accelerator.reduce(loss_sum);
#endif
    correct = accelerator.reduce(correct);
    samples = accelerator.reduce(samples);
    accelerator.printf("epoch %d loss %.6f accuracy %.4f samples %lld\n", epoch, loss_sum / samples,
                       static_cast<double>(correct) / samples, static_cast<long long>(samples));
  }
}
