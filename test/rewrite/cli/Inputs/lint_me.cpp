// Input of check.test: a single-process training loop; --check reports what the rewrite of it
// would change.
#include <torch/torch.h>

int main() {
  torch::Device device(torch::kCPU);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int step = 0; step < 3; ++step) {
    auto loss = model(torch::randn({2, 4}).to(device)).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  torch::save(model, "model.pt");
}
