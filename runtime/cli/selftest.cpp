// The runtime's self-test, run by `accel test` (and by `accel launch ... accel-selftest`) on
// every process of a job: collectives, data sharding and a short training run that must equal
// the same training on one process. Each check prints "ok" on the main process or fails with
// "check failed: NAME: what", which the launcher's failure summary shows.
#include <accelerate/accelerate.h>

#include <iostream>
#include <stdexcept>
#include <string>

namespace {

void check(bool ok, const std::string &name, const std::string &what) {
  if (!ok) {
    throw std::runtime_error("check failed: " + name + ": " + what);
  }
}

/// Sample i is the tensor [i] with target 2i + 1.
class Line : public torch::data::datasets::Dataset<Line> {
public:
  explicit Line(size_t size) : size_(size) {}
  torch::data::Example<> get(size_t i) override {
    const auto x = static_cast<float>(i) / static_cast<float>(size_);
    return {torch::tensor({x}), torch::tensor({2 * x + 1})};
  }
  std::optional<size_t> size() const override { return size_; }

private:
  size_t size_;
};

void check_collectives(accelerate::Accelerator &accelerator) {
  const int n = accelerator.num_processes();
  const auto rank = static_cast<float>(accelerator.process_index());
  const auto sum = accelerator.reduce(torch::full({1000}, rank + 1)).mean().item<float>();
  check(sum == static_cast<float>(n * (n + 1) / 2), "reduce",
        "sum of 1..N was " + std::to_string(sum));
  const auto gathered = accelerator.gather(torch::tensor({rank}));
  check(torch::equal(gathered, torch::arange(n, torch::kFloat32)), "gather",
        "wrong order or values");
  const auto root = accelerator.broadcast(torch::full({4}, rank), n - 1);
  check(torch::all(root == static_cast<float>(n - 1)).item<bool>(), "broadcast", "not the root's");
  accelerator.wait_for_everyone();
  accelerator.print("collectives (reduce, gather, broadcast, barrier): ok");
}

void check_data_sharding(accelerate::Accelerator &accelerator) {
  const size_t samples = 3 * static_cast<size_t>(accelerator.num_processes()) * 4 + 1;
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      Line(samples).map(torch::data::transforms::Stack<>()), 3);
  std::vector<torch::Tensor> seen;
  for (auto &batch : *loader) {
    // One process reads the plain loader: only several share evenly with full batches.
    check(batch.data.size(0) == 3 || !accelerator.distributed(), "data sharding",
          "a batch is not full (even_batches)");
    seen.push_back(accelerator.gather_for_metrics(batch.data.reshape({-1})));
  }
  const auto all = std::get<0>(torch::cat(seen).sort());
  const auto expected =
      torch::arange(static_cast<int64_t>(samples), torch::kFloat32) / static_cast<float>(samples);
  check(all.numel() == static_cast<int64_t>(samples) && torch::allclose(all, expected),
        "data sharding", "the processes together did not see every sample exactly once");
  accelerator.print("data sharding (shared shuffle, even batches, gather_for_metrics): ok");
}

template <typename Loop> torch::Tensor train(Loop &&loop) {
  torch::manual_seed(0);
  torch::nn::Linear model(1, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  loop(model, optimizer);
  return torch::cat({model->weight.detach().reshape({-1}), model->bias.detach().reshape({-1})});
}

void check_training(accelerate::Accelerator &accelerator) {
  const size_t batch = 4;
  const size_t samples = batch * static_cast<size_t>(accelerator.num_processes()) * 5;
  const auto distributed = train([&](torch::nn::Linear &model, torch::optim::SGD &optimizer) {
    accelerator.prepare(model, optimizer);
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        Line(samples).map(torch::data::transforms::Stack<>()), batch);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &b : *loader) {
        optimizer.zero_grad();
        accelerator.backward(torch::mse_loss(model->forward(b.data), b.target));
        optimizer.step();
      }
    }
  });
  // The same training on this process alone, at the job's global batch size.
  const auto single = train([&](torch::nn::Linear &model, torch::optim::SGD &optimizer) {
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Line(samples).map(torch::data::transforms::Stack<>()),
        batch * static_cast<size_t>(accelerator.num_processes()));
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &b : *loader) {
        optimizer.zero_grad();
        torch::mse_loss(model->forward(b.data), b.target).backward();
        optimizer.step();
      }
    }
  });
  check(torch::allclose(distributed, single, 1e-5, 1e-6), "training equivalence",
        "parameters after training differ from one process at the global batch size");
  accelerator.print("training equivalence (N processes at batch B == 1 process at N*B): ok");
}

} // namespace

int main() {
  try {
    accelerate::Accelerator accelerator;
    accelerator.print("accel self-test on ", accelerator.num_processes(), " process(es), device ",
                      accelerator.device());
    check_collectives(accelerator);
    check_data_sharding(accelerator);
    check_training(accelerator);
    return 0;
  } catch (const std::exception &error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
