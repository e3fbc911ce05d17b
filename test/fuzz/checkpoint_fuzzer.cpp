// Accelerator::load_state (runtime/src/checkpoint.cpp, checkpoint_directory.cpp) on a damaged
// checkpoint. At start-up a real one is saved from a small training state (a model with a
// child module, SGD with momentum, a scheduler, a loader in the middle of its epoch). The input
// picks one of its files (first byte) and replaces its content with the rest, or removes it
// (no rest); ACCEL_FUZZ_WRITE_SEEDS=DIR writes the seed corpus from the saved files. load_state
// must then load, or refuse with an exception and change nothing of the state it restores
// (parameters, momentum, learning rates, random generator, step). Each input first trains a
// step, so that this state differs from the checkpoint's and a half-done load shows.
// Besides the written seeds, test/fuzz/checkpoint holds hand-made manifests: version 1 (no
// checksums: its files are read unchecked, so mutations of them reach LibTorch's reader) and
// regressions.
#include <accelerate/accelerate.h>

#include "scratch_directory.h"

#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct NetImpl : torch::nn::Module {
  NetImpl()
      : first(register_module("first", torch::nn::Linear(3, 4))),
        second(register_module("second", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return second->forward(torch::relu(first->forward(x))); }
  torch::nn::Linear first, second;
};
TORCH_MODULE(Net);

using Loader = decltype(std::declval<accelerate::Accelerator &>()
                            .prepare_data_loader<torch::data::samplers::SequentialSampler>(
                                torch::data::datasets::TensorDataset(torch::zeros({1})), 1));

// What load_state restores, to compare before and after a refused load.
struct Snapshot {
  std::vector<torch::Tensor> tensors; // parameters, buffers, momentum buffers, generator
  std::vector<double> rates;
  int64_t step = 0;

  bool operator==(const Snapshot &other) const {
    if (tensors.size() != other.tensors.size() || rates != other.rates || step != other.step) {
      return false;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (!torch::equal(tensors[i], other.tensors[i])) {
        return false;
      }
    }
    return true;
  }
};

struct Training {
  accelerate::Accelerator accelerator;
  Net model;
  std::unique_ptr<torch::optim::SGD> optimizer;
  std::unique_ptr<torch::optim::StepLR> scheduler;
  Loader loader;
  fs::path checkpoint = accel_fuzz::scratch_directory() / "checkpoint";
  std::vector<std::pair<fs::path, std::string>> files; // as saved

  Training() {
    torch::manual_seed(0);
    optimizer = std::make_unique<torch::optim::SGD>(model->parameters(),
                                                    torch::optim::SGDOptions(0.1).momentum(0.9));
    scheduler = std::make_unique<torch::optim::StepLR>(*optimizer, 1, 0.5);
    accelerator.prepare(model, *optimizer, *scheduler);
    loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        torch::data::datasets::TensorDataset(torch::randn({6, 3})), 2);
    for (auto &batch : *loader) {
      accelerator.backward(model->forward(batch[0].data).sum());
      accelerator.step(*optimizer);
      accelerator.zero_grad(*optimizer);
      scheduler->step();
      break; // in the middle of the epoch: the loader's position is saved too
    }
    accelerator.save_state(checkpoint.string());
    for (const auto &entry : fs::directory_iterator(checkpoint)) {
      std::ifstream in(entry.path(), std::ios::binary);
      files.emplace_back(entry.path(), std::string(std::istreambuf_iterator<char>(in),
                                                   std::istreambuf_iterator<char>()));
    }
    std::sort(files.begin(), files.end());
    if (const char *seeds = std::getenv("ACCEL_FUZZ_WRITE_SEEDS")) {
      write_seeds(seeds);
    }
  }

  // The seeds in test/fuzz/checkpoint: each file whole, then cut in half (a torn write).
  void write_seeds(const fs::path &directory) const {
    fs::create_directories(directory);
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string name = files[i].first.filename().string();
      const std::string &content = files[i].second;
      const std::string index(1, static_cast<char>(i));
      std::ofstream(directory / ("whole-" + name), std::ios::binary) << index << content;
      std::ofstream(directory / ("half-" + name), std::ios::binary)
          << index << content.substr(0, content.size() / 2);
    }
  }

  // Moves every part of the state load_state restores away from the checkpoint's, so that a
  // refused load that restored any part of it shows.
  void train_on() {
    accelerator.backward(model->forward(torch::ones({2, 3})).sum());
    accelerator.step(*optimizer);
    accelerator.zero_grad(*optimizer);
    scheduler->step();
    torch::rand({1});
  }

  Snapshot snapshot() {
    Snapshot s;
    for (const auto &tensor : model->parameters()) {
      s.tensors.push_back(tensor.detach().clone());
    }
    for (const auto &tensor : model->buffers()) {
      s.tensors.push_back(tensor.detach().clone());
    }
    for (const auto &[key, state] : optimizer->state()) {
      s.tensors.push_back(
          static_cast<torch::optim::SGDParamState &>(*state).momentum_buffer().clone());
    }
    for (const auto &group : optimizer->param_groups()) {
      s.rates.push_back(group.options().get_lr());
    }
    s.tensors.push_back(at::detail::getDefaultCPUGenerator().get_state());
    s.step = accelerator.global_step();
    return s;
  }
};

void write(const fs::path &path, const std::string &content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

} // namespace

// LibTorch's PyTorchStreamReader leaks miniz's reader state when a file is not a zip archive
// at all (its constructor throws before the destructor could end the reader): not ours to fix.
extern "C" const char *__lsan_default_suppressions() { return "leak:mz_zip_reader_init\n"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static Training training;
  if (size == 0) {
    return 0;
  }
  const auto &[path, original] = training.files[data[0] % training.files.size()];
  if (size == 1) {
    fs::remove(path);
  } else {
    write(path, std::string(reinterpret_cast<const char *>(data + 1), size - 1));
  }
  training.train_on();
  const Snapshot before = training.snapshot();
  try {
    training.accelerator.load_state(training.checkpoint.string());
  } catch (const std::exception &) {
    if (!(training.snapshot() == before)) {
      std::fprintf(stderr, "load_state refused %s but changed the training state\n",
                   path.filename().c_str());
      __builtin_trap();
    }
  }
  write(path, original);
  return 0;
}
