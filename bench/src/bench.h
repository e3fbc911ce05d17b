// Shared pieces of accel_bench: the models, the in-memory dataset, timing and output.
// The Python side (bench/py_train.py) defines the same models and data; keep them in step.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace accel_bench {

/// Command-line options as --name value pairs, with defaults.
class Args {
public:
  Args(int argc, char **argv, int first);
  int64_t integer(const std::string &name, int64_t fallback) const;
  std::string text(const std::string &name, const std::string &fallback) const;

private:
  std::map<std::string, std::string> values_;
};

/// The benchmark models, all nn.Sequential so that C++ and Python build the same thing:
///   mlp   64 -> 256 -> 256 -> 10, ReLU                        (85,002 parameters)
///   wide  512 -> 2048 -> 2048 -> 10, ReLU                     (5,267,466 parameters)
///   conv  1x28x28: conv3x3(16) pool conv3x3(32) pool fc128 fc10 (206,922 parameters)
///   deep  1024 -> [1024]*layers -> 10, ReLU (sync benchmark)
torch::nn::Sequential make_model(const std::string &name, int64_t layers = 8);
/// Shape of one input sample of the model.
std::vector<int64_t> sample_shape(const std::string &name);
int64_t parameter_count(torch::nn::Sequential &model);

/// Random inputs and class labels held in memory; get() returns one sample, like a
/// TensorDataset in Python.
class InMemoryDataset : public torch::data::datasets::Dataset<InMemoryDataset> {
public:
  InMemoryDataset(int64_t size, const std::vector<int64_t> &shape, int64_t classes, uint64_t seed);
  torch::data::Example<> get(size_t index) override;
  std::optional<size_t> size() const override;

private:
  torch::Tensor inputs_, targets_;
};

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
double median(std::vector<double> values);

int run_overhead(const Args &args);
int run_train(const Args &args);
int run_sync(const Args &args);
int run_phases(const Args &args);

} // namespace accel_bench
