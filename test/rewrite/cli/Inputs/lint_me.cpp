// Input of check.test: a single-process training loop over a data loader; --check reports
// what the rewrite of it would change.
#include <torch/torch.h>

int main() {
  torch::Device device(torch::kCPU);
  torch::nn::Linear model(4, 1);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(torch::data::datasets::TensorDataset(torch::randn({6, 4})).map(torch::data::transforms::Stack<torch::data::TensorExample>()), 2);
  for (auto &batch : *loader) {
    auto loss = model(batch.data.to(device)).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
  torch::save(model, "model.pt");
}
