// A program whose training lives in a helper that makes its own Accelerator, called once per
// experiment: every call after the first finds the process group the first one joined. Run by
// launcher_test under `accel launch`, where rank 0's rendezvous socket is inherited.
#include <accelerate/accelerate.h>

#include <torch/torch.h>

#include <iostream>

namespace {

// Trains y = 2x for a few steps at learning rate `lr`; returns the weight every process ends
// with (the same everywhere if the gradients were averaged).
double train_once(double lr) {
  accelerate::Accelerator accelerator;
  torch::manual_seed(0);
  torch::nn::Linear model(1, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(lr));
  accelerator.prepare(model, optimizer);
  // Each process its own samples, so that only averaged gradients keep the weights equal.
  const auto x = torch::full({4, 1}, 1.0 + accelerator.process_index());
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    accelerator.backward(torch::mse_loss(model->forward(x), 2 * x));
    optimizer.step();
  }
  const auto weight = model->weight.detach().reshape({1});
  const auto everywhere = accelerator.gather(weight);
  if (!torch::equal(everywhere, weight.expand({accelerator.num_processes()}))) {
    throw std::runtime_error("the processes' weights differ");
  }
  return weight.item<double>();
}

} // namespace

int main() {
  for (const double lr : {0.01, 0.02, 0.05}) {
    const double weight = train_once(lr);
    accelerate::Accelerator accelerator; // one more, only to print from the main process
    accelerator.print("lr ", lr, ": weight ", weight, " on all ", accelerator.num_processes(),
                      " processes");
  }
}
