// The runtime's self-test, run by `accel test` (and by `accel launch ... accel-selftest`) on
// every process of a job: collectives, data sharding and a short training run that must equal
// the same training on one process. Each check prints "ok" on the main process or fails with
// "check failed: NAME: what", which the launcher's failure summary shows.
#include <accelerate/accelerate.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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
  // Batches arrive on the accelerator's device; the expectation is built on the CPU.
  const auto all = std::get<0>(torch::cat(seen).cpu().sort());
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
  return torch::cat({model->weight.detach().reshape({-1}), model->bias.detach().reshape({-1})})
      .cpu();
}

/// How far apart the two runs may end: fp32 sums in another order, or the forward pass or the
/// gradients sent between processes (comm hook) in a 16-bit type (fp16: 11 significant bits,
/// bf16: 8) on batches split differently.
double tolerance(const std::string &mixed_precision, const std::string &comm_hook) {
  const auto of = [](const std::string &type) {
    return type == "bf16" ? 3e-2 : type == "fp16" ? 5e-3 : 1e-5;
  };
  return std::max(of(mixed_precision), of(comm_hook));
}

void check_training(accelerate::Accelerator &accelerator) {
  const size_t batch = 4;
  const size_t processes = static_cast<size_t>(accelerator.num_processes());
  const size_t batches_per_epoch = 5;
  const size_t samples = batch * processes * batches_per_epoch;
  const int accumulation = accelerator.gradient_accumulation_steps();
  const int epochs = 2;
  // Training as a program written for accel trains, under the launcher's settings: gradient
  // accumulation, mixed precision, the fp16 loss scale. One entry per optimizer step that
  // would apply gradients: whether the loss scale made it skip them (an fp16 overflow).
  std::vector<bool> skipped;
  const auto distributed = train([&](torch::nn::Linear &model, torch::optim::SGD &optimizer) {
    accelerator.prepare(model, optimizer);
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        Line(samples).map(torch::data::transforms::Stack<>()), batch);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      for (auto &b : *loader) {
        auto accumulate = accelerator.accumulate(model);
        auto autocast = accelerator.autocast();
        accelerator.zero_grad(optimizer);
        accelerator.backward(torch::mse_loss(model->forward(b.data), b.target));
        const bool stepped = accelerator.step(optimizer);
        if (accelerator.sync_gradients()) {
          skipped.push_back(!stepped);
        }
      }
    }
  });
  check(std::count(skipped.begin(), skipped.end(), false) > 0, "training equivalence",
        "every optimizer step was skipped (fp16 overflow)");
  // Every process holds the same parameters.
  check(torch::equal(accelerator.broadcast(distributed, 0), distributed), "training equivalence",
        "the processes' parameters differ from each other after training");

  // The same training on this process alone, at the job's global batch size: the loss over
  // N*B samples, divided over the accumulation steps, an optimizer step at the end of each
  // cycle and of each epoch, except where the distributed run skipped one.
  size_t step = 0;
  const auto single = train([&](torch::nn::Linear &model, torch::optim::SGD &optimizer) {
    // On the job's device, where autocast applies as it did to the distributed run.
    const auto device = accelerator.device();
    model->to(device);
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Line(samples).map(torch::data::transforms::Stack<>()), batch * processes);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      size_t seen = 0;
      int in_cycle = 0;
      for (auto &b : *loader) {
        torch::Tensor loss;
        {
          auto autocast = accelerator.autocast(); // the forward pass only, as backward does
          loss = torch::mse_loss(model->forward(b.data.to(device)), b.target.to(device));
        }
        (loss / accumulation).backward();
        ++seen;
        if (++in_cycle == accumulation || seen == batches_per_epoch) {
          if (step >= skipped.size() || !skipped[step]) {
            optimizer.step();
          }
          ++step;
          optimizer.zero_grad();
          in_cycle = 0;
        }
      }
    }
  });
  check(step == skipped.size(), "training equivalence",
        "one process stepped " + std::to_string(step) + " times, the job " +
            std::to_string(skipped.size()));
  const double tol = tolerance(accelerator.mixed_precision(), accelerator.comm_hook());
  std::ostringstream difference;
  difference << "parameters after training differ from one process at the global batch size: "
             << distributed << " vs " << single << " (tolerance " << tol << ")";
  check(torch::allclose(distributed, single, tol, tol), "training equivalence", difference.str());
  accelerator.print("training equivalence (N processes at batch B == 1 process at N*B): ok");
}

// PowerSGD sends each large enough gradient matrix as two rank-r factors, with the error fed
// back into the next step: training is approximate by design, and before
// start_powersgd_iter it sums exactly (so check_training, a few steps, sees no compression).
// Here it compresses from the first step, on a 128x128 matrix, and the check is that it did
// (the result is not exact training's), that every process holds the same parameters, and that
// the loss still falls.
void check_power_sgd(accelerate::Accelerator &launched) {
  if (launched.comm_hook() != "powersgd" || !launched.distributed()) {
    return;
  }
  accelerate::Options options; // the launcher's settings, PowerSGD's rank among them
  options.comm_hook = "powersgd";
  options.power_sgd.start_powersgd_iter = 0;
  options.gradient_accumulation_steps = 1;
  options.mixed_precision = "no";
  accelerate::Accelerator accelerator(options);
  const int64_t width = 128, batch = 8, steps = 30;
  const int64_t processes = accelerator.num_processes();
  torch::manual_seed(0);
  // A map of rank 2 learnt from zero: every gradient is close to rank 2, which PowerSGD's
  // factors follow step by step (a dense random map would take hundreds of steps at rank 1).
  const auto target_map = torch::matmul(torch::randn({width, 2}), torch::randn({2, width})) /
                          std::sqrt(static_cast<double>(width));
  const auto inputs = torch::randn({steps, batch * processes, width});
  const auto targets = torch::matmul(inputs, target_map);
  const auto device = accelerator.device();
  const auto train = [&](bool distributed) {
    torch::manual_seed(1);
    torch::nn::Linear model(torch::nn::LinearOptions(width, width).bias(false));
    torch::nn::init::zeros_(model->weight);
    torch::optim::SGD optimizer(model->parameters(), 3.0); // mse's gradient is 2/width small
    if (distributed) {
      accelerator.prepare(model, optimizer);
    } else {
      model->to(device);
    }
    const auto rows = distributed
                          ? torch::indexing::Slice(accelerator.process_index() * batch,
                                                   (accelerator.process_index() + 1) * batch)
                          : torch::indexing::Slice();
    std::vector<double> losses;
    for (int64_t step = 0; step < steps; ++step) {
      const auto x = inputs[step].index({rows}).to(device);
      const auto y = targets[step].index({rows}).to(device);
      optimizer.zero_grad();
      const auto loss = torch::mse_loss(model->forward(x), y);
      if (distributed) {
        accelerator.backward(loss);
        accelerator.step(optimizer);
      } else {
        loss.backward();
        optimizer.step();
      }
      losses.push_back(loss.item<double>());
    }
    return std::make_pair(model->weight.detach().cpu(), losses);
  };
  const auto [compressed, losses] = train(true);
  const auto exact = train(false).first;
  check(torch::equal(accelerator.broadcast(compressed, 0), compressed), "PowerSGD",
        "the processes' parameters differ from each other after training");
  check(!torch::allclose(compressed, exact, 1e-6, 1e-7), "PowerSGD",
        "nothing was compressed: training equals exact training (a rank as large as the matrix, "
        "or a min_compression_rate this high, leaves a 128x128 gradient uncompressed)");
  check(losses.back() < 0.5 * losses.front(), "PowerSGD",
        "the loss did not fall (from " + std::to_string(losses.front()) + " to " +
            std::to_string(losses.back()) + " in " + std::to_string(steps) + " steps)");
  accelerator.print("PowerSGD (compressed from the first step, processes agree, loss falls): ok");
}

} // namespace

int main() {
  try {
    accelerate::Accelerator accelerator;
    accelerator.print("accel self-test on ", accelerator.num_processes(), " process(es), device ",
                      accelerator.device(), ", mixed precision ", accelerator.mixed_precision(),
                      ", gradient accumulation steps ", accelerator.gradient_accumulation_steps(),
                      ", comm hook ", accelerator.comm_hook());
    accelerator.print("gradients are summed through: ", accelerator.gradient_transport());
    check_collectives(accelerator);
    check_data_sharding(accelerator);
    check_training(accelerator);
    check_power_sgd(accelerator);
    return 0;
  } catch (const std::exception &error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
