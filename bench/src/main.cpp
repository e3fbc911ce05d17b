// accel_bench: the C++ half of bench/run.py. One subcommand per benchmark; each prints one
// JSON line (rank 0 only) that the driver collects. See docs/benchmarks.md.
#include "bench.h"

#include <cstdio>
#include <stdexcept>

namespace accel_bench {

Args::Args(int argc, char **argv, int first) {
  for (int i = first; i < argc; i += 2) {
    std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || i + 1 >= argc) {
      throw std::invalid_argument("expected --name value, got '" + name + "'");
    }
    values_[name.substr(2)] = argv[i + 1];
  }
}

int64_t Args::integer(const std::string &name, int64_t fallback) const {
  auto found = values_.find(name);
  return found == values_.end() ? fallback : std::stoll(found->second);
}

std::string Args::text(const std::string &name, const std::string &fallback) const {
  auto found = values_.find(name);
  return found == values_.end() ? fallback : found->second;
}

torch::nn::Sequential make_model(const std::string &name, int64_t layers) {
  using namespace torch::nn;
  if (name == "mlp") {
    return Sequential(Linear(64, 256), ReLU(), Linear(256, 256), ReLU(), Linear(256, 10));
  }
  if (name == "wide") {
    return Sequential(Linear(512, 2048), ReLU(), Linear(2048, 2048), ReLU(), Linear(2048, 10));
  }
  if (name == "conv") {
    return Sequential(Conv2d(Conv2dOptions(1, 16, 3).padding(1)), ReLU(), MaxPool2d(2),
                      Conv2d(Conv2dOptions(16, 32, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                      Linear(32 * 7 * 7, 128), ReLU(), Linear(128, 10));
  }
  if (name == "deep") {
    Sequential model;
    for (int64_t i = 0; i < layers; ++i) {
      model->push_back(Linear(1024, 1024));
      model->push_back(ReLU());
    }
    model->push_back(Linear(1024, 10));
    return model;
  }
  throw std::invalid_argument("unknown model '" + name + "' (mlp, wide, conv, deep)");
}

std::vector<int64_t> sample_shape(const std::string &name) {
  if (name == "mlp")
    return {64};
  if (name == "wide")
    return {512};
  if (name == "conv")
    return {1, 28, 28};
  if (name == "deep")
    return {1024};
  throw std::invalid_argument("unknown model '" + name + "'");
}

int64_t parameter_count(torch::nn::Sequential &model) {
  int64_t count = 0;
  for (const auto &p : model->parameters()) {
    count += p.numel();
  }
  return count;
}

InMemoryDataset::InMemoryDataset(int64_t size, const std::vector<int64_t> &shape, int64_t classes,
                                 uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  std::vector<int64_t> full{size};
  full.insert(full.end(), shape.begin(), shape.end());
  inputs_ = torch::randn(full, generator);
  targets_ = torch::randint(classes, {size}, generator, torch::kInt64);
}

torch::data::Example<> InMemoryDataset::get(size_t index) {
  const auto i = static_cast<int64_t>(index);
  return {inputs_[i], targets_[i]};
}

std::optional<size_t> InMemoryDataset::size() const { return static_cast<size_t>(inputs_.size(0)); }

double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

} // namespace accel_bench

int main(int argc, char **argv) {
  const std::string usage = "usage: accel_bench overhead|train|sync|phases [--name value ...]\n";
  if (argc < 2) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  try {
    const std::string command = argv[1];
    const accel_bench::Args args(argc, argv, 2);
    // Same thread count as the Python side (torch.set_num_threads); OMP_NUM_THREADS is set too.
    torch::set_num_threads(static_cast<int>(args.integer("threads", 1)));
    if (command == "overhead")
      return accel_bench::run_overhead(args);
    if (command == "train")
      return accel_bench::run_train(args);
    if (command == "sync")
      return accel_bench::run_sync(args);
    if (command == "phases")
      return accel_bench::run_phases(args);
    std::fputs(usage.c_str(), stderr);
    return 2;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "accel_bench: %s\n", error.what());
    return 1;
  }
}
