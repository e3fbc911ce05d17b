// accel-data-loader: the loader a training loop (one that calls backward) iterates is
// created by the accelerator, also when the loop is in a function (or lambda) the loader is
// passed to; evaluation loaders stay as they are.
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <algorithm>
#include <cassert>
#include <iostream>
#include <tuple>
#include <utility>
#include <vector>

using Data = torch::data::datasets::TensorDataset;

template <typename Loader> void consume(Loader &loader) {
  for (auto &batch : loader) {
    (void)batch;
  }
}

template <typename Loader>
void train_epoch(torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  for (auto &batch : loader) {
    optimizer.zero_grad();
    model(batch[0].data).sum().backward();
    optimizer.step();
  }
}

using Spelled = torch::data::StatelessDataLoader<Data, torch::data::samplers::RandomSampler>;
void train_spelled(torch::nn::Linear &model, Spelled &loader) {
  for (auto &batch : loader) {
    model(batch[0].data).sum().backward();
  }
}
// The helpers that train get the accelerator (accel-accelerator); the loader stays LibTorch's
// here (see the warning on 'to_spelled' below).
// CHECK-FIXES: void train_epoch(accelerate::Accelerator &accelerator, torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
// CHECK-FIXES: void train_spelled(accelerate::Accelerator &accelerator, torch::nn::Linear &model, Spelled &loader) {

// Passed on: the loader a helper takes goes on to the helper that trains on it.
template <typename Loader>
void fit_epochs(torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    train_epoch(model, loader, optimizer);
  }
}
// CHECK-FIXES: void fit_epochs(accelerate::Accelerator &accelerator, torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
// CHECK-FIXES: {{^}}    train_epoch(accelerator, model, loader, optimizer);

// Batches the program made itself, in a std::vector iterated by name or made by a call for the
// loop: shared like a loader's
// (accelerator.prepare_batches); a vector of something else, or one iterated by evaluation
// only, stays as it is.
std::vector<std::pair<torch::Tensor, torch::Tensor>>
shuffled_batches(std::vector<std::pair<torch::Tensor, torch::Tensor>> batches) {
  std::reverse(batches.begin(), batches.end());
  return batches;
}

void hand_made(torch::nn::Linear &model, torch::optim::Optimizer &optimizer) {
  std::vector<torch::Tensor> tensors = {torch::randn({8, 4}), torch::randn({8, 4})};
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs = {{torch::randn({8, 4}), torch::randn({8, 1})}};
  std::vector<torch::data::Example<>> examples = {{torch::randn({8, 4}), torch::randn({8, 1})}};
  std::vector<std::tuple<torch::Tensor, torch::Tensor>> tuples = {{torch::randn({8, 4}), torch::randn({8, 1})}};
  std::vector<double> weights = {1.0, 2.0};
  // A schedule's length made from the whole list: N times the steps a process takes by default.
  const size_t total_steps = 2 * pairs.size();
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:34: warning: this computes with the number of batches in a list a training loop shares{{.*}} [accel-data-loader]
  std::cout << total_steps << " steps of " << pairs.size() << " batches\n";
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t step = 0;
    for (const auto &x : tensors) {
      // CHECK-FIXES: {{^}}    for (const auto &x : accelerator.prepare_batches(tensors)) {
      optimizer.zero_grad();
      model(x).sum().backward();
      optimizer.step();
      std::cout << ++step << "/" << tensors.size() << "\n";
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:37: warning: this reads the whole list of batches inside the loop that shares it{{.*}} [accel-data-loader]
    }
    for (auto &[x, y] : pairs) {
      // CHECK-FIXES: {{^}}    for (auto &[x, y] : accelerator.prepare_batches(pairs)) {
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
    for (auto &example : examples) {
      // CHECK-FIXES: {{^}}    for (auto &example : accelerator.prepare_batches(examples)) {
      optimizer.zero_grad();
      (model(example.data) - example.target).pow(2).mean().backward();
      optimizer.step();
    }
    for (const auto &[x, y] : tuples) {
      // CHECK-FIXES: {{^}}    for (const auto &[x, y] : accelerator.prepare_batches(tuples)) {
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
    // A list a call makes for the loop (d2l's data_iter).
    for (auto &[x, y] : shuffled_batches(pairs)) {
      // CHECK-FIXES: {{^}}    for (auto &[x, y] : accelerator.prepare_batches(shuffled_batches(pairs))) {
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
  }
  for (double w : weights) {
    // CHECK-FIXES: {{^}}  for (double w : weights) {
    optimizer.zero_grad();
    (model(torch::ones({1, 4})) * w).sum().backward();
    optimizer.step();
  }
  double evaluated = 0;
  for (const auto &x : tensors) {
    // CHECK-FIXES: {{^}}  for (const auto &x : tensors) {
    evaluated += model(x).sum().item<double>();
  }
  std::cout << evaluated << "\n";
}

// A training step in a helper (called below in a loop that cuts the batches).
void step_on(torch::nn::Linear &model, torch::optim::Optimizer &optimizer, const torch::Tensor &x) {
  optimizer.zero_grad();
  model(x).mean().backward();
  optimizer.step();
}

// Batches cut by a loop's counter from tensors held whole (a permutation's slice, narrow, a
// Slice index): the loop runs this process's share of the iterations and each cut takes its
// rows. Arithmetic with the step elsewhere is warned about, as with a loader's batch size.
void counted_batches(torch::nn::Linear &model, torch::optim::Optimizer &optimizer,
                     int64_t batch) {
  auto inputs = torch::randn({10, 4});
  auto targets = torch::randn({10, 1});
  const int64_t n = inputs.size(0);
  const int64_t steps = n / batch;
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:29: warning: 'batch' sizes the batches a training loop cuts by its counter, and this computes with it{{.*}} [accel-data-loader]
  for (int epoch = 0; epoch < steps; ++epoch) {
    auto order = torch::randperm(n);
    for (int64_t i = 0; i < n; i += batch) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, n, batch)) {
      auto idx = order.slice(0, i, std::min(i + batch, n));
      // CHECK-FIXES: {{^}}      auto idx = accelerator.batch_rows(order.slice(0, i, std::min(i + batch, n)));
      optimizer.zero_grad();
      (model(inputs.index_select(0, idx)) - targets.index_select(0, idx)).pow(2).mean().backward();
      optimizer.step();
    }
    // The number of batches, computed from their size only to bound the loop: right as it is.
    const int64_t rows_per_batch = 5;
    const int64_t count = n / rows_per_batch;
    for (int b = 0; b < count; ++b) {
      // CHECK-FIXES: {{^}}    for (int b : accelerator.batch_range(0, count)) {
      auto x = inputs.narrow(0, b * rows_per_batch, rows_per_batch), y = targets.narrow(0, b * 5, 5);
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(inputs.narrow(0, b * rows_per_batch, rows_per_batch)), y = accelerator.batch_rows(targets.narrow(0, b * 5, 5));
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
    // A last partial batch dropped by the condition.
    for (int64_t i = 0; i + batch <= n; i += batch) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, n - batch + 1, batch)) {
      auto x = inputs.slice(0, i, i + batch);
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(inputs.slice(0, i, i + batch));
      optimizer.zero_grad();
      model(x).sum().backward();
      optimizer.step();
    }
    // A window and the step after it: the condition adds both to the counter.
    for (int64_t i = 0; i + batch + 1 <= n; i += batch) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, n - batch - 1 + 1, batch)) {
      auto x = inputs.slice(0, i, i + batch), y = inputs.slice(0, i + 1, i + batch + 1);
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(inputs.slice(0, i, i + batch)), y = accelerator.batch_rows(inputs.slice(0, i + 1, i + batch + 1));
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
    // The step in a helper: the loop that calls it is shared alike.
    for (int64_t i = 0; i < n; i += 2) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, n, 2)) {
      step_on(model, optimizer, inputs.slice(0, i, i + 2));
      // CHECK-FIXES: {{^}}      step_on(accelerator, model, optimizer, accelerator.batch_rows(inputs.slice(0, i, i + 2)));
    }
    for (int64_t start = 2; start < n; start = start + 4) {
      // CHECK-FIXES: {{^}}    for (int64_t start : accelerator.batch_range(2, n, 4)) {
      using torch::indexing::Slice;
      auto x = inputs.index({Slice(start, start + 4), Slice()});
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(inputs.index({Slice(start, start + 4), Slice()}));
      optimizer.zero_grad();
      model(x).sum().backward();
      optimizer.step();
    }
    // Batches made beforehand (`split`), taken by the counter: each is a cut too. A tensor's
    // own [] picks one sample: no batch.
    std::vector<torch::Tensor> input_batches = inputs.split(batch);
    std::vector<torch::Tensor> target_batches = targets.split(batch);
    for (size_t b = 0; b < input_batches.size(); ++b) {
      // CHECK-FIXES: {{^}}    for (size_t b : accelerator.batch_range(0, input_batches.size())) {
      auto x = input_batches[b];
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(input_batches[b]);
      optimizer.zero_grad();
      (model(x) - target_batches[b]).pow(2).mean().backward();
      // CHECK-FIXES: {{^}}      accelerator.backward((model(x) - accelerator.batch_rows(target_batches[b])).pow(2).mean());
      optimizer.step();
    }
    // Taken by a reference that is not const: the shared cut is a new tensor, so the reference
    // becomes a copy (which shares the list's memory; nothing reassigns it).
    for (size_t b = 0; b < input_batches.size(); ++b) {
      // CHECK-FIXES: {{^}}    for (size_t b : accelerator.batch_range(0, input_batches.size())) {
      auto& x = input_batches[b];
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(input_batches[b]);
      torch::Tensor & y = target_batches[b];
      // CHECK-FIXES: {{^}}      torch::Tensor y = accelerator.batch_rows(target_batches[b]);
      optimizer.zero_grad();
      (model(x) - y).pow(2).mean().backward();
      optimizer.step();
    }
    // The batch's first row computed from the counter into a local, as d2l-style code does:
    // the local is read only by the cuts, which are shared.
    for (int64_t i = 0; i < steps; ++i) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, steps)) {
      const int64_t start = i * batch;
      auto x = inputs.slice(0, start, start + batch);
      // CHECK-FIXES: {{^}}      auto x = accelerator.batch_rows(inputs.slice(0, start, start + batch));
      optimizer.zero_grad();
      model(x).sum().backward();
      optimizer.step();
    }
    for (int64_t row = 0; row < n; ++row) {
      // CHECK-FIXES: {{^}}    for (int64_t row = 0; row < n; ++row) {
      optimizer.zero_grad();
      model(inputs[row]).sum().backward();
      optimizer.step();
    }
  }
  // Cuts that evaluation makes are no batches of training: left as they are.
  for (int64_t i = 0; i < n; i += 5) {
    // CHECK-FIXES: {{^}}  for (int64_t i = 0; i < n; i += 5) {
    std::cout << model(inputs.slice(0, i, i + 5)).sum().item<double>() << "\n";
  }
}

// Arithmetic with a training loader's batch size: one process's batch by default, the global
// batch under split_batches; warned. Printing it, or the data set's size, is not.
void schedule_length(torch::nn::Linear &model, torch::optim::Optimizer &optimizer, int64_t batch,
                     int64_t rows) {
  auto loader = torch::data::make_data_loader(
      Data(torch::randn({rows, 4})), torch::data::DataLoaderOptions().batch_size(batch));
  const int64_t steps = rows / batch;
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:32: warning: 'batch' sets a training loader's batch size, and this computes with it{{.*}} [accel-data-loader]
  std::cout << "batch " << batch << ", " << steps << " steps\n";
  for (auto &b : *loader) {
    optimizer.zero_grad();
    model(b[0].data).sum().backward();
    optimizer.step();
  }
}

// The same with the setting in a Config struct (`cfg.epochs * (cfg.rows / cfg.batch)`).
struct Settings {
  int64_t batch = 4;
  int64_t rows = 16;
};
void schedule_from_settings(torch::nn::Linear &model, torch::optim::Optimizer &optimizer) {
  Settings cfg;
  auto loader = torch::data::make_data_loader(Data(torch::randn({cfg.rows, 4})), cfg.batch);
  const int64_t steps = 2 * (cfg.rows / cfg.batch);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:41: warning: 'cfg.batch' sets a training loader's batch size, and this computes with it{{.*}} [accel-data-loader]
  std::cout << steps << " steps of " << cfg.batch << "\n";
  for (auto &b : *loader) {
    optimizer.zero_grad();
    model(b[0].data).sum().backward();
    optimizer.step();
  }
}

// The same through a cast, and with a constant at file scope, as the MNIST example writes
// it (`std::ceil(size / static_cast<double>(kBatchSize))`); a counter loop that cuts with it
// is shared (batch_range, batch_rows) and stays unwarned.
const int64_t kBatchSize = 4;
void batches_per_epoch(torch::nn::Linear &model, torch::optim::Optimizer &optimizer) {
  auto loader = torch::data::make_data_loader(Data(torch::randn({16, 4})), kBatchSize);
  const auto per_epoch = static_cast<int64_t>(std::ceil(16 / static_cast<double>(kBatchSize)));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:82: warning: 'kBatchSize' sets a training loader's batch size, and this computes with it{{.*}} [accel-data-loader]
  std::cout << per_epoch << " batches\n";
  for (auto &b : *loader) {
    optimizer.zero_grad();
    model(b[0].data).sum().backward();
    optimizer.step();
  }
  auto X = torch::randn({16, 4});
  for (int64_t i = 0; i < 16; i += kBatchSize) {
    // CHECK-FIXES: for (int64_t i : accelerator.batch_range(0, 16, kBatchSize)) {
    optimizer.zero_grad();
    model(X.slice(0, i, i + kBatchSize)).sum().backward();
    optimizer.step();
  }
}

// A loss divided by that batch size (`l.sum() / batch_size`, as d2l writes it): right by
// default, N times too small under split_batches, where a process holds part of each batch;
// warned, with what to write instead.
void loss_per_configured_batch(torch::nn::Linear &model, torch::optim::Optimizer &optimizer,
                               int64_t batch_size) {
  auto loader = torch::data::make_data_loader(Data(torch::randn({8, 4})), batch_size);
  for (auto &b : *loader) {
    optimizer.zero_grad();
    auto loss = model(b[0].data).pow(2).sum() / batch_size;
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:49: warning: 'batch_size' sets a training loader's batch size, and this tensor computes with it: by default each process takes batches of batch_size, as written; under split_batches (accel launch --split_batches) a process holds batch_size / accelerator.num_processes() rows of each, so a loss divided by batch_size would give gradients N times too small. Divide by the rows of the batch (its size(0)) instead, or launch without --split_batches [accel-data-loader]
    loss.backward();
    optimizer.step();
  }
}

// A tensor shaped by that batch size (labels, a recurrent model's first hidden state, made by
// a method of the program's): right by default, a batch's worth of rows too many under
// split_batches, where a process holds part of each batch; warned. One shaped by the batch's
// own rows is right both ways.
struct Recurrent : torch::nn::Module {
  torch::nn::GRU gru = register_module("gru", torch::nn::GRU(4, 3));
  torch::Tensor init_hidden(int64_t rows) { return torch::zeros({1, rows, 3}); }
};
void shaped_by_configured_batch(torch::nn::Linear &model, torch::optim::Optimizer &optimizer,
                                Recurrent &rnn, int64_t batch_size) {
  auto loader = torch::data::make_data_loader(Data(torch::randn({8, 4})), batch_size);
  for (auto &b : *loader) {
    optimizer.zero_grad();
    auto labels = torch::ones({batch_size, 1});
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:32: warning: 'batch_size' sets a training loader's batch size, and this tensor is shaped by it (`torch::ones({batch_size, 1})`): by default each process takes batches of batch_size, as written; under split_batches (accel launch --split_batches) a process holds batch_size / accelerator.num_processes() rows of each, so a tensor made for a batch would not fit it. Shape it by the rows of the batch (its size(0)) instead, or launch without --split_batches [accel-data-loader]
    auto h = rnn.init_hidden(batch_size);
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: 'batch_size' sets a training loader's batch size, and this tensor is shaped by it (`rnn.init_hidden(batch_size)`){{.*}} [accel-data-loader]
    auto ids = torch::arange(batch_size);
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: 'batch_size' sets a training loader's batch size, and this tensor is shaped by it (`torch::arange(batch_size)`){{.*}} [accel-data-loader]
    auto right = torch::zeros({b[0].data.size(0), 1});
    auto loss = torch::mse_loss(model(b[0].data.view({-1, 4})).narrow(1, 0, 1), labels + right) +
                h.mean() + ids.to(torch::kFloat).mean();
    loss.backward();
    optimizer.step();
  }
  // An evaluation loader's batches stay whole: not warned.
  auto test = torch::data::make_data_loader(Data(torch::randn({4, 4})), batch_size);
  for (auto &b : *test) {
    auto error = (model(b[0].data) - torch::ones({batch_size, 1})).abs().sum();
  }
}

// A loader a factory of the program's own makes, for training and for evaluation alike: the
// training one is prepared whole, as the factory returns it; the factory stays as written.
auto make_loader(int64_t rows, int64_t batch) {
  return torch::data::make_data_loader(Data(torch::randn({rows, 4})), batch);
}
// CHECK-FIXES: return torch::data::make_data_loader(Data(torch::randn({rows, 4})), batch);
void from_a_factory(torch::nn::Linear &model, torch::optim::Optimizer &optimizer,
                    int64_t batch_size) {
  auto train = make_loader(8, batch_size);
  // CHECK-FIXES: auto train = accelerator.prepare_data_loader(make_loader(8, batch_size));
  auto test = make_loader(4, 2);
  // CHECK-FIXES: auto test = make_loader(4, 2);
  for (auto &b : *train) {
    optimizer.zero_grad();
    auto loss = model(b[0].data).pow(2).sum() / batch_size;
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:49: warning: 'batch_size' sets a training loader's batch size, and this tensor computes with it{{.*}} [accel-data-loader]
    loss.backward();
    optimizer.step();
  }
  torch::NoGradGuard no_grad;
  for (auto &b : *test) {
    model(b[0].data);
  }
}

// A function that hands out a loader held elsewhere, by reference: no factory (its loader
// cannot be moved into prepare_data_loader), left as it is.
std::unique_ptr<Spelled> &held_loader() {
  static auto loader = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  return loader;
}
void from_a_holder(torch::nn::Linear &model, torch::optim::Optimizer &optimizer) {
  auto &loader = held_loader();
  // CHECK-FIXES: {{^}}  auto &loader = held_loader();
  for (auto &b : *loader) {
    optimizer.zero_grad();
    model(b[0].data).sum().backward();
    optimizer.step();
  }
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto train = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto train = accelerator.prepare_data_loader(Data(torch::randn({8, 4})), 2);
  auto sequential = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Data(torch::randn({8, 4})), torch::data::DataLoaderOptions().batch_size(2));
  // CHECK-FIXES: auto sequential = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
  auto defaults = torch::data::make_data_loader(Data(torch::randn({8, 4})));
  // The call keeps its line: the tool does not re-wrap the user's code.
  // CHECK-FIXES: auto defaults = accelerator.prepare_data_loader(Data(torch::randn({8, 4})), torch::data::DataLoaderOptions());
  auto eval = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto eval = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  auto elsewhere = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:20: warning: data loader 'elsewhere' is not iterated by a loop here; if it feeds training, create it with accelerator.prepare_data_loader<Sampler>(dataset, options) so that each process gets its shard [accel-data-loader]
  std::unique_ptr<torch::data::StatelessDataLoader<Data, torch::data::samplers::RandomSampler>>
      spelled = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: data loader 'spelled' is declared with its type spelled out; declare it 'auto' {{.*}} [accel-data-loader]
  auto handed = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto handed = accelerator.prepare_data_loader(Data(torch::randn({8, 4})), 2);
  auto to_lambda = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto to_lambda = accelerator.prepare_data_loader(Data(torch::randn({8, 4})), 2);
  auto to_spelled = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:21: warning: data loader 'to_spelled' feeds training in 'train_spelled', whose parameter names LibTorch's loader type: make that parameter's type a template parameter {{.*}} [accel-data-loader]
  auto evaluated = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto evaluated = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  auto passed_on = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto passed_on = accelerator.prepare_data_loader(Data(torch::randn({8, 4})), 2);
  auto lambda_epoch = [&](auto &loader) {
    for (auto &batch : loader) {
      model(batch[0].data).sum().backward();
    }
  };
  for (int epoch = 0; epoch < 2; ++epoch) {
    train_epoch(model, *handed, optimizer);
    lambda_epoch(*to_lambda);
    train_spelled(model, *to_spelled);
    consume(*evaluated);
    for (auto &batch : *train) {
      optimizer.zero_grad();
      assert(batch[0].data.defined()); // a macro's calls are no loader: nothing to say
      model(batch[0].data).sum().backward();
      optimizer.step();
    }
    for (auto &batch : *sequential) {
      model(batch[0].data).sum().backward();
    }
    for (auto &batch : *defaults) {
      model(batch[0].data).sum().backward();
    }
    for (auto &batch : *spelled) {
      model(batch[0].data).sum().backward();
    }
  }
  fit_epochs(model, *passed_on, optimizer);
  // CHECK-FIXES: {{^}}  fit_epochs(accelerator, model, *passed_on, optimizer);
  hand_made(model, optimizer);
  counted_batches(model, optimizer, 3);
  schedule_length(model, optimizer, 4, 16);
  schedule_from_settings(model, optimizer);
  batches_per_epoch(model, optimizer);
  loss_per_configured_batch(model, optimizer, 4);
  Recurrent rnn;
  shaped_by_configured_batch(model, optimizer, rnn, 4);
  from_a_factory(model, optimizer, 2);
  from_a_holder(model, optimizer);
  torch::NoGradGuard no_grad;
  for (auto &batch : *eval) {
    model(batch[0].data);
  }
  std::printf("%p\n", static_cast<void *>(elsewhere.get()));
}
