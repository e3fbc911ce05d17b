// Benchmark 1: what the runtime adds to a one-process training step.
//
// The same epoch of the same model runs two ways in one process: A with the runtime
// (Accelerator, prepare, prepare_data_loader, accelerator.backward) and B as the plain
// LibTorch loop (make_data_loader, loss.backward). Repetitions alternate A,B,B,A,... so that
// neither side always runs first (warm caches, allocator state); the medians are compared.
#include "bench.h"

#include <accelerate/accelerate.h>

#include <cstdio>
#include <cstdlib>

namespace accel_bench {
namespace {

template <typename Loader, typename Backward>
double epoch_seconds_per_step(Loader &loader, torch::nn::Sequential &model,
                              torch::optim::Optimizer &optimizer, Backward &&backward) {
  int64_t steps = 0;
  const auto start = Clock::now();
  for (auto &batch : loader) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
    backward(loss);
    optimizer.step();
    ++steps;
  }
  return seconds_since(start) / static_cast<double>(steps);
}

} // namespace

int run_overhead(const Args &args) {
  for (const char *name :
       {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    if (std::getenv(name) != nullptr) {
      throw std::runtime_error(std::string("overhead is the one-process benchmark; unset ") + name);
    }
  }
  const std::string model_name = args.text("model", "mlp");
  const int64_t samples = args.integer("samples", 4096);
  const auto batch = static_cast<size_t>(args.integer("batch", 64));
  const int64_t reps = args.integer("reps", 40);
  const int64_t warmup = args.integer("warmup", 3);

  accelerate::Accelerator accelerator;
  auto dataset = [&] {
    return InMemoryDataset(samples, sample_shape(model_name), 10, 1234)
        .map(torch::data::transforms::Stack<>());
  };

  torch::manual_seed(0);
  auto model_a = make_model(model_name);
  torch::manual_seed(0);
  auto model_b = make_model(model_name);
  torch::optim::SGD optimizer_a(model_a->parameters(),
                                torch::optim::SGDOptions(0.01).momentum(0.9));
  torch::optim::SGD optimizer_b(model_b->parameters(),
                                torch::optim::SGDOptions(0.01).momentum(0.9));

  // A: the documented shape with the runtime.
  auto loader_a =
      accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(dataset(), batch);
  accelerator.prepare(model_a, optimizer_a);
  auto step_a = [&] {
    return epoch_seconds_per_step(*loader_a, model_a, optimizer_a,
                                  [&](const torch::Tensor &loss) { accelerator.backward(loss); });
  };
  // B: plain LibTorch.
  auto loader_b =
      torch::data::make_data_loader<torch::data::samplers::RandomSampler>(dataset(), batch);
  auto step_b = [&] {
    return epoch_seconds_per_step(*loader_b, model_b, optimizer_b,
                                  [](const torch::Tensor &loss) { loss.backward(); });
  };

  for (int64_t i = 0; i < warmup; ++i) {
    step_a();
    step_b();
  }
  std::vector<double> a, b, ratios;
  for (int64_t r = 0; r < reps; ++r) {
    double ta, tb;
    if (r % 2 == 0) {
      ta = step_a();
      tb = step_b();
    } else {
      tb = step_b();
      ta = step_a();
    }
    a.push_back(ta);
    b.push_back(tb);
    ratios.push_back(ta / tb);
  }
  std::printf(
      "{\"bench\": \"overhead\", \"model\": \"%s\", \"batch\": %zu, \"steps_per_rep\": %zu, "
      "\"reps\": %lld, \"runtime_step_us\": %.3f, \"plain_step_us\": %.3f, "
      "\"ratio_of_medians\": %.4f, \"median_of_ratios\": %.4f}\n",
      model_name.c_str(), batch, loader_a->size(), static_cast<long long>(reps), median(a) * 1e6,
      median(b) * 1e6, median(a) / median(b), median(ratios));
  return 0;
}

} // namespace accel_bench
