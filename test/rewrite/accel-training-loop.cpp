// accel-training-loop: a training loop whose plan cannot be made right is left as written,
// with its setup, its helpers and its loader, and one warning says why; the other loops of
// the file are rewritten whole.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <cmath>

#include <cstdio>
#include <fstream>
#include <vector>

struct Net : torch::nn::Module {
  torch::nn::Linear fc = register_module("fc", torch::nn::Linear(4, 1));
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
};

auto make_dataset() {
  return torch::data::datasets::TensorDataset(torch::randn({64, 4}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

// Rewritten whole: the model, optimizer and loader are prepared, the step is the
// accelerator's.
void sound() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    // CHECK-FIXES: accelerator.backward(loss * accelerator.num_processes());
    optimizer.step();
  }
}

// k-fold: a model and an optimizer per fold, inside the fold loop. Each fold prepares its
// own, so the whole loop is rewritten: the loader made once is prepared once.
void kfold() {
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  for (int fold = 0; fold < 3; ++fold) {
    auto model = std::make_shared<Net>();
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES: torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
    for (auto &batch : *loader) {
      // CHECK-FIXES: auto accumulation = accelerator.accumulate(model);
      optimizer.zero_grad();
      // CHECK-FIXES: accelerator.zero_grad(optimizer);
      auto loss = model->forward(batch.data).sum();
      loss.backward();
      // CHECK-FIXES: accelerator.backward(loss * accelerator.num_processes());
      optimizer.step();
      // CHECK-FIXES: accelerator.step(optimizer);
    }
  }
}

// The optimizer is made in the helper, the model and loader outside it, in a function without
// an accelerator (main prints nothing, so it does not host one): the helper could prepare the
// model, but nothing can shard the loader; the helper's loop and the loader stay as written.
template <typename Loader> void fit(std::shared_ptr<Net> model, Loader &loader) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (auto &batch : loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): the batches of this training loop come from 'loader', which accel-rewrite cannot shard{{.*}} [accel-training-loop]
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    // CHECK-FIXES: {{^}}    loss.backward();
    optimizer.step();
  }
}
void model_outside() {
  auto model = std::make_shared<Net>();
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  fit(model, *loader);
}

// One helper trains two models one after the other, each with its own optimizer: each pair is
// prepared where it is created, and the helper's loop is rewritten once for both.
template <typename Loader>
void fit_pair(std::shared_ptr<Net> model, torch::optim::Optimizer &optimizer, Loader &loader) {
  // CHECK-FIXES: void fit_pair(accelerate::Accelerator &accelerator, std::shared_ptr<Net> model, torch::optim::Optimizer &optimizer, Loader &loader) {
  for (auto &batch : loader) {
    optimizer.zero_grad();
    model->forward(batch.data).mean().backward();
    // CHECK-FIXES: accelerator.backward(model->forward(batch.data).mean());
    optimizer.step();
    // CHECK-FIXES: accelerator.step(optimizer);
  }
}
void compare_models() {
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  auto first = std::make_shared<Net>();
  torch::optim::SGD first_optimizer(first->parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(first, first_optimizer);
  fit_pair(first, first_optimizer, *loader);
  // CHECK-FIXES: fit_pair(accelerator, first, first_optimizer, *loader);
  auto second = std::make_shared<Net>();
  torch::optim::Adam second_optimizer(second->parameters());
  // CHECK-FIXES: accelerator.prepare(second, second_optimizer);
  fit_pair(second, second_optimizer, *loader);
  // CHECK-FIXES: fit_pair(accelerator, second, second_optimizer, *loader);
}

// Pairs taken from a list by the counter (by a reference too): shared like a list of
// tensors, each pair's rows cut alike. A list of a struct of the program's own is not
// (batch_rows cannot cut it): declined, with the range-for to write instead.
struct Sample {
  torch::Tensor input, label;
};
void pairs_by_index() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches = {
      {torch::randn({4, 4}), torch::randn({4, 1})}};
  for (size_t i = 0; i < batches.size(); ++i) {
    // CHECK-FIXES: {{^}}  for (size_t i : accelerator.batch_range(0, batches.size())) {
    auto &[x, y] = batches[i];
    // CHECK-FIXES: {{^}}    auto [x, y] = accelerator.batch_rows(batches[i]);
    optimizer.zero_grad();
    (model->forward(x) - batches[i].second).pow(2).mean().backward();
    // CHECK-FIXES: (model->forward(x) - accelerator.batch_rows(batches[i]).second).pow(2).mean());
    optimizer.step();
  }
}
void samples_by_index() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<Sample> samples = {{torch::randn({4, 4}), torch::randn({4, 1})}};
  for (size_t i = 0; i < samples.size(); ++i) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): the batches of this training loop are taken from 'samples' by the loop's counter, which accel-rewrite shares only for a list of batches of tensors (a tensor, or a pair, tuple, torch::data::Example or vector of tensors, taken as accelerator.batch_rows(list[i])): every process would train on all of it; give each process its part by hand (accelerator.process_index(), accelerator.num_processes()) [accel-training-loop]
    optimizer.zero_grad();
    (model->forward(samples[i].input) - samples[i].label).pow(2).mean().backward();
    // CHECK-FIXES: {{^}}    (model->forward(samples[i].input) - samples[i].label).pow(2).mean().backward();
    optimizer.step();
  }
}

// A loop cutting its batches by a counter, in a function that also writes a file: accel-file-write
// matches in source-only traversal, and the analyses it asks for first must still see the
// loop's cuts (they read parents as the AST holds them): shared. (The write, in a helper that
// trains, cannot be guarded where the helper is called: warned.)
void counted_then_written() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto inputs = torch::randn({16, 4});
  for (int64_t i = 0; i < 16; i += 4) {
    // CHECK-FIXES: {{^}}  for (int64_t i : accelerator.batch_range(0, 16, 4)) {
    optimizer.zero_grad();
    model->forward(inputs.slice(0, i, i + 4)).mean().backward();
    optimizer.step();
  }
  {
    std::ofstream done("done.txt");
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:19: warning: every process runs this file write at the same time{{.*}} [accel-file-write]
    done << "done\n";
  }
}

// A loader walked with its iterators, declared auto: sharded like a range-for's. With the
// iterator's type spelled out (LibTorch's, which the sharded loader's is not): declined, with
// the range-for to write instead.
void iterator_walk() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  for (auto it = loader->begin(); it != loader->end(); ++it) {
    optimizer.zero_grad();
    model->forward(it->data).mean().backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(model->forward(it->data).mean());
    optimizer.step();
  }
}
void iterator_while() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto it = loader->begin();
    while (it != loader->end()) {
      optimizer.zero_grad();
      model->forward(it->data).mean().backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(model->forward(it->data).mean());
      optimizer.step();
      ++it;
    }
  }
}
// The same in a template, where `loader.begin()` names the loader only once instantiated.
template <typename Loader> void walk_while(std::shared_ptr<Net> model, Loader &loader) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto it = loader.begin();
  while (it != loader.end()) {
    optimizer.zero_grad();
    model->forward(it->data).mean().backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(model->forward(it->data).mean());
    optimizer.step();
    ++it;
  }
}
void iterator_spelled() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: data loader 'loader' is not iterated by a loop here{{.*}} [accel-data-loader]
  for (torch::data::Iterator<torch::data::TensorExample> it = loader->begin();
       it != loader->end(); ++it) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-2]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): the batches of this training loop come from '*loader' walked with its iterators (begin(), end()) in a way accel-rewrite does not follow {{.*}}; write the loop as `for (auto &batch : *loader)` and run accel-rewrite again [accel-training-loop]
    optimizer.zero_grad();
    model->forward((*it).data).mean().backward();
    // CHECK-FIXES: {{^}}    model->forward((*it).data).mean().backward();
    optimizer.step();
  }
}

// A generic lambda as the helper: its calls are not followed, and the reason says so.
void lambda_helper() {
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  auto fit = [&](auto &model, auto &optimizer) {
    for (auto &batch : *loader) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): optimizer 'optimizer' is a parameter of a lambda, whose calls accel-rewrite does not follow; call accelerator.prepare(model, optimizer) where both are created, before training [accel-training-loop]
      optimizer.zero_grad();
      model->forward(batch.data).mean().backward();
      // CHECK-FIXES: {{^}}      model->forward(batch.data).mean().backward();
      optimizer.step();
    }
  };
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  fit(model, optimizer);
}

// A loss that adds a mean and a sum over the batch (a VAE's reconstruction mean and its KL
// summed over the batch), or a sum and a penalty on the weights: rewritten, with a warning at
// the loss that says how to scale it by hand. A sum reduced through options held in a
// variable is scaled like one named in the call.
void mean_plus_sum() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto out = model->forward(batch.data);
    auto loss = out.pow(2).mean() + out.abs().sum();
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: accel-rewrite cannot tell whether this loss is a mean or a sum over the batch's samples{{.*}} [accel-backward]
    // CHECK-FIXES: {{^}}    accelerator.backward(loss);
    optimizer.step();
  }
}
void sum_plus_penalty() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).pow(2).sum() + 0.01 * model->fc->weight.pow(2).sum();
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: accel-rewrite cannot tell whether this loss is a mean or a sum{{.*}} [accel-backward]
    // CHECK-FIXES: {{^}}    accelerator.backward(loss);
    optimizer.step();
  }
}
void sum_in_options_variable() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  auto summed = torch::nn::functional::MSELossFuncOptions().reduction(torch::kSum);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto out = model->forward(batch.data);
    auto loss = torch::nn::functional::mse_loss(out, torch::zeros_like(out), summed);
    loss.backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(loss * accelerator.num_processes());
    optimizer.step();
  }
}

// A loss that relates the batch's rows to each other: each process computes it over its own
// rows, which is not the original's at the global batch. Rewritten, with a warning at the
// loss that names where the rows meet: a mean over the batch set against each row (a
// relativistic GAN's critic), rows compared with rows (in-batch negatives), also in a helper.
void relativistic() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto on_real = model->forward(batch.data);
    auto on_generated = model->forward(batch.data * 2);
    auto loss = torch::relu(1 - (on_real - on_generated.mean())).mean();
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss relates the batch's rows to each other (`on_real - on_generated.mean()`, line [[@LINE-2]]: a value reduced over the batch combined with each row, or rows compared with rows): each process computes it over its own rows only{{.*}} [accel-backward]
    // CHECK-FIXES: {{^}}    accelerator.backward(loss);
    optimizer.step();
  }
}
torch::Tensor in_batch_negatives(const torch::Tensor &a, const torch::Tensor &b) {
  auto logits = torch::matmul(a, b.transpose(0, 1));
  return torch::nn::functional::cross_entropy(logits, torch::arange(a.size(0)));
}
void contrastive() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto z = model->forward(batch.data);
    auto gram = z.mm(z.t()).sum();
    gram.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss relates the batch's rows to each other (`z.mm(z.t())`, line [[@LINE-2]]{{.*}} [accel-backward]
    auto loss = in_batch_negatives(z, model->forward(batch.data + 1));
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss relates the batch's rows to each other (`torch::matmul(a, b.transpose(0, 1))`, line {{[0-9]+}}{{.*}} [accel-backward]
    auto distances = torch::cdist(z, model->forward(batch.data + 2)).mean();
    distances.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss relates the batch's rows to each other (`torch::cdist(z, model->forward(batch.data + 2))`, line [[@LINE-2]]{{.*}} [accel-backward]
    auto advantage = (z - z.mean()) / (z.std() + 1e-8);
    (advantage * z).sum().backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss relates the batch's rows to each other (`z - z.mean()`, line [[@LINE-2]]{{.*}} [accel-backward]
    optimizer.step();
  }
}
// Not couplings: data standardised before the loop (the same on every process), a mean over
// the batch's rows divided by their count, each row normalised by its own norm, the rows
// against the model's weights.
void rows_on_their_own() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto X = torch::randn({32, 4});
  X = (X - X.mean(0)) / X.std(0);
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(X).map(
          torch::data::transforms::Stack<torch::data::TensorExample>()),
      8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto out = model->forward(batch.data / batch.data.norm(2, 1, true));
    auto loss = (out / out.size(0)).pow(2).mean() +
                batch.data.mm(model->fc->weight.t()).pow(2).mean();
    loss.backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(loss);
    optimizer.step();
  }
}

// Batches cut by hand with a loop's counter that the loop also uses for something else (a
// progress line): each process would run other iterations than the original, so the loop is
// declined. One that leaves early is too.
void permutation_batches() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto inputs = torch::randn({16, 4});
  auto order = torch::randperm(16);
  for (int64_t start = 0; start < 16; start += 4) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this loop cuts its batches with 'start', and uses 'start' for something else too (line [[@LINE+7]]): accel-rewrite shares the loop by running each process's share of the iterations, where that use would see other values than in the original; count with a variable of your own and use 'start' only to cut the batch; or give each process its part by hand (accelerator.process_index(), accelerator.num_processes()) [accel-training-loop]
    auto batch = inputs.index_select(0, order.slice(0, start, start + 4));
    // CHECK-FIXES: {{^}}    auto batch = inputs.index_select(0, order.slice(0, start, start + 4));
    optimizer.zero_grad();
    model->forward(batch).sum().backward();
    // CHECK-FIXES: {{^}}    model->forward(batch).sum().backward();
    optimizer.step();
    std::printf("%lld\n", static_cast<long long>(start));
  }
}
void early_exit_batches() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto inputs = torch::randn({16, 4});
  for (int64_t b = 0; b < 4; ++b) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this loop over batches can leave early (a break, a return){{.*}} [accel-training-loop]
    auto loss = model->forward(inputs.slice(0, b * 4, b * 4 + 4)).sum();
    // CHECK-FIXES: {{^}}    auto loss = model->forward(inputs.slice(0, b * 4, b * 4 + 4)).sum();
    if (loss.item<double>() < -1e9) {
      break;
    }
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  }
}

// A recurrent state carried from one batch into the next (truncated backpropagation through
// time over a prepared loader's batches): sharing the batches would cut the chain; declined.
struct Recurrent : torch::nn::Module {
  torch::nn::GRU gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(4, 8)));
  std::tuple<torch::Tensor, torch::Tensor> forward(torch::Tensor x, torch::Tensor h) {
    return gru->forward(x, h);
  }
};
void carried_state() {
  auto model = std::make_shared<Recurrent>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  auto hidden = torch::zeros({1, 8, 8});
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this loop carries 'hidden' from one batch to the next (it changes it, and gives it to the model on line [[@LINE+3]]): a recurrent state: each batch depends on the one before it, and sharing the batches among the processes would break that chain (each process would carry the state through other batches); leave this training on one process, or give each process whole sequences of its own by hand (accelerator.process_index(), accelerator.num_processes()) [accel-training-loop]
    optimizer.zero_grad();
    hidden = hidden.detach();
    auto [output, next] = model->forward(batch.data.unsqueeze(0), hidden);
    hidden = next;
    output.sum().backward();
    // CHECK-FIXES: {{^}}    output.sum().backward();
    optimizer.step();
  }
}

// Windows of time steps cut along dimension 0 for a sequence-first GRU: with split_batches each
// process would get part of each window; declined.
void time_windows() {
  auto model = std::make_shared<Recurrent>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto series = torch::randn({40, 8, 4}); // [time, streams, features]
  for (int64_t t = 0; t < 40; t += 10) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this loop cuts its batches along dimension 0, which model 'model' reads as time (it holds an LSTM, GRU or RNN not built with batch_first(true), a cell (LSTMCell, GRUCell, RNNCell), which a forward pass steps over time however the program lays its input out, or a Transformer or MultiheadAttention, which read (time, batch, features)): with split_batches each process would get a part of each sequence instead of whole sequences; build a recurrent module with batch_first(true) and cut samples, or give each process its part by hand (accelerator.process_index(), accelerator.num_processes()) [accel-training-loop]
    optimizer.zero_grad();
    auto [output, last] = model->forward(series.narrow(0, t, 10), torch::zeros({1, 8, 8}));
    // CHECK-FIXES: {{^}}    auto [output, last] = model->forward(series.narrow(0, t, 10), torch::zeros({1, 8, 8}));
    output.sum().backward();
    optimizer.step();
  }
}

// The same windows made beforehand into a list of batches: prepare_batches would cut them along
// dimension 0 under split_batches too; declined.
void time_window_list() {
  auto model = std::make_shared<Recurrent>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  std::vector<torch::Tensor> windows = torch::randn({40, 8, 4}).split(10);
  for (auto &window : windows) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): under split_batches, accelerator.prepare_batches cuts this loop's batches along dimension 0, which model 'model' reads as time{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto [output, last] = model->forward(window, torch::zeros({1, 8, 8}));
    output.sum().backward();
    // CHECK-FIXES: {{^}}    output.sum().backward();
    optimizer.step();
  }
}

// LibTorch's Transformer encoder reads (time, batch, features) and has no batch_first: chunks
// of a time-major token stream cut along dimension 0 are time steps; declined.
struct TimeMajor : torch::nn::Module {
  torch::nn::TransformerEncoder encoder = register_module(
      "encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderLayer(4, 2), 1));
  torch::Tensor forward(torch::Tensor x) { return encoder->forward(x); }
};
void time_major_chunks() {
  auto model = std::make_shared<TimeMajor>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto stream = torch::randn({40, 8, 4}); // [time, streams, features]
  for (int64_t t = 0; t < 40; t += 10) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}this loop cuts its batches along dimension 0, which model 'model' reads as time {{.*}}[accel-training-loop]
    optimizer.zero_grad();
    model->forward(stream.narrow(0, t, 10)).sum().backward();
    // CHECK-FIXES: {{^}}    model->forward(stream.narrow(0, t, 10)).sum().backward();
    optimizer.step();
  }
}

// A loop that leaves early, skips a batch or steps on a value of this process's batch (its
// loss) would make the processes part ways: declined, also through a local variable. A
// condition on what is the same everywhere (a step count) stays rewritten.
void leaves_on_its_loss() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this loop can leave early on line [[@LINE+5]] when 'loss.item<float>() < 0.25f', which is computed from this process's batches: with the batches shared among the processes they would part ways there, and a process still training would wait forever for the others' gradients; decide on a value that is the same on every process (a step count, or accelerator.reduce(value, "mean")) and run accel-rewrite again, or give each process its part by hand (accelerator.process_index(), accelerator.num_processes()) [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    loss.backward();
    optimizer.step();
    if (loss.item<float>() < 0.25f) break;
    // CHECK-FIXES: {{^}}    if (loss.item<float>() < 0.25f) break;
  }
}
void skips_a_bad_batch() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}this loop skips the rest of a batch on line [[@LINE+4]] when '!std::isfinite(value)', which is computed from this process's batches{{.*}} [accel-training-loop]
    auto loss = model->forward(batch.data).sum();
    double value = loss.item<double>();
    if (!std::isfinite(value)) {
      continue;
    }
    optimizer.zero_grad();
    loss.backward();
    // CHECK-FIXES: {{^}}    loss.backward();
    optimizer.step();
  }
}
void steps_when_small() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}this loop calls backward on line [[@LINE+4]] when 'loss.item<float>() < 10'{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).sum();
    if (loss.item<float>() < 10) {
      loss.backward();
      optimizer.step();
    }
  }
}
void stops_after_steps(int max_steps) {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  int steps = 0;
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    model->forward(batch.data).sum().backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(model->forward(batch.data).sum() * accelerator.num_processes());
    optimizer.step();
    steps = steps + 1;
    if (steps == max_steps) break;
  }
}

// The same GRU built batch_first: the rows cut are samples, rewritten; a tensor held before
// the loop and given to the model unchanged (a fixed initial state) is no carried state.
struct BatchFirst : torch::nn::Module {
  torch::nn::GRU gru =
      register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(4, 8).batch_first(true)));
  torch::Tensor forward(torch::Tensor x, torch::Tensor h) { return std::get<0>(gru->forward(x, h)); }
};
void sample_windows() {
  auto model = std::make_shared<BatchFirst>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto sequences = torch::randn({32, 10, 4}); // [samples, time, features]
  auto initial = torch::zeros({1, 8, 8});
  for (int64_t i = 0; i < 32; i += 8) {
    // CHECK-FIXES: {{^}}  for (int64_t i : accelerator.batch_range(0, 32, 8)) {
    optimizer.zero_grad();
    model->forward(sequences.narrow(0, i, 8), initial).sum().backward();
    // The cut's wrap goes inside accelerator.backward's argument (both rules edit there).
    // CHECK-FIXES: model->forward(accelerator.batch_rows(sequences.narrow(0, i, 8)), initial).sum() *
    optimizer.step();
  }
}

// One step outside any loop, where the optimizer is made: rewritten whole (prepare before it,
// zero_grad, backward and step through the accelerator), on the batch as written.
void straight_line() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: {{^}}  accelerator.prepare(model, optimizer);
  optimizer.zero_grad();
  // CHECK-FIXES: {{^}}  accelerator.zero_grad(optimizer);
  model->forward(torch::randn({8, 4})).sum().backward();
  // CHECK-FIXES: {{^}}  accelerator.backward(model->forward(torch::randn({8, 4})).sum());
  optimizer.step();
  // CHECK-FIXES: {{^}}  accelerator.step(optimizer);
}

// The learning rate set from this process's batches (a step's loss, in the loop or through a
// helper under a condition on it): each process would step with its own rate and the weights
// drift apart; declined. Set from the epoch's combined mean, it is the same everywhere:
// rewritten.
void set_rate(torch::optim::Optimizer &optimizer, double rate) {
  for (auto &group : optimizer.param_groups()) {
    group.options().set_lr(rate);
  }
}
void rate_from_the_batch() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this training sets its optimizer with static_cast<torch::optim::SGDOptions &>(optimizer.param_groups()[0].options()).lr(0.05 + loss.item<double>()) on line [[@LINE+5]] from '0.05 + loss.item<double>()', which is computed from this process's batches: with the batches shared among the processes each would step with its own setting, and their weights would drift apart; compute it from a value that is the same on every process (accelerator.reduce(value, "mean"), a step count) and run accel-rewrite again [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
    static_cast<torch::optim::SGDOptions &>(optimizer.param_groups()[0].options()).lr(0.05 + loss.item<double>());
  }
}
void rate_cut_when_the_batch_says() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  double rate = 0.1;
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this training sets its optimizer with set_rate(optimizer, rate) on line [[@LINE+7]] from 'loss.item<double>() > 1.0', which is computed from this process's batches{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto loss = model->forward(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
    if (loss.item<double>() > 1.0) {
      rate *= 0.5;
      set_rate(optimizer, rate);
    }
  }
}
void rate_from_the_mean() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (int epoch = 0; epoch < 2; ++epoch) {
    double sum = 0;
    int64_t seen = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = model->forward(batch.data).pow(2).mean();
      loss.backward();
      // CHECK-FIXES: accelerator.backward(loss);
      optimizer.step();
      sum += loss.item<double>() * batch.data.size(0);
      seen += batch.data.size(0);
    }
    if (sum / seen > 1.0) {
      // CHECK-FIXES: if (accelerator.reduce(sum, "sum") / accelerator.reduce(seen, "sum") > 1.0) {
      set_rate(optimizer, 0.01);
    }
  }
}

// A tensor the program trains itself beside the model (a learnable scale made with
// torch::ones, updated from its own gradient): prepare synchronises the models' gradients only,
// so each process would update it from its own batches: declined. A loop over the model's own
// parameters reading their gradients is fine (they are synchronised).
void trains_a_free_tensor() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  auto scale = torch::ones({1}, torch::requires_grad());
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): this training reads the gradient of 'scale' on line [[@LINE+6]], a tensor the program made itself outside its models: accelerator.prepare synchronises the gradients of the prepared models' parameters only, so each process would update 'scale' from its own batches and the processes would drift apart; make it a parameter of the model (register_parameter) and run accel-rewrite again [accel-training-loop]
    optimizer.zero_grad();
    auto loss = (model->forward(batch.data) * scale).pow(2).mean();
    loss.backward();
    optimizer.step();
    torch::NoGradGuard no_grad;
    scale -= 0.01 * scale.grad();
  }
  std::cout << scale << "\n";
}

// Early stopping one level up. On a mean that accel-reduce combines where it is read, every
// process stops after the same epoch: rewritten. On a smoothed loss it leaves as this process's
// share, they would stop at different epochs: declined.
void stops_on_the_mean() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  double best = 1e9;
  for (int epoch = 0; epoch < 10; ++epoch) {
    double sum = 0;
    int64_t seen = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = model->forward(batch.data).pow(2).mean();
      loss.backward();
      // CHECK-FIXES: accelerator.backward(loss);
      optimizer.step();
      sum += loss.item<double>() * batch.data.size(0);
      seen += batch.data.size(0);
    }
    const double mean = sum / seen;
    // CHECK-FIXES: const double mean = accelerator.reduce(sum, "sum") / accelerator.reduce(seen, "sum");
    if (mean > best) {
      break;
    }
    best = mean;
  }
}
void stops_on_a_smoothed_loss() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  double smoothed = 0, best = 1e9;
  for (int epoch = 0; epoch < 10; ++epoch) {
    for (auto &batch : *loader) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): the loop around it can leave on line [[@LINE+10]] when 'smoothed > best', which reads a value this process's batches gave it and accel-reduce does not combine there{{.*}} [accel-training-loop]
      optimizer.zero_grad();
      auto loss = model->forward(batch.data).pow(2).mean();
      loss.backward();
      // CHECK-FIXES: {{^}}      loss.backward();
      optimizer.step();
      smoothed = 0.9 * smoothed + 0.1 * loss.item<double>();
    }
    if (smoothed > best) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:9: warning: 'smoothed' is kept over this process's batches{{.*}} [accel-reduce]
      break;
    }
    best = smoothed;
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:12: warning: 'smoothed' is kept over this process's batches{{.*}} [accel-reduce]
  }
}

// A step outside any loop in a helper called once: declined (the helper's accumulation guard
// would make it a part of a cycle).
void one_step(Net &model, torch::optim::SGD &optimizer) {
  model.forward(torch::randn({8, 4})).sum().backward();
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers (a partial rewrite would train each process on its own): a training step outside any loop: 'one_step' is called once, not once per batch (accel-rewrite rewrites a step outside a loop only in the function that creates its optimizer); rewrite it by hand with accelerator.backward(loss), accelerator.step(optimizer) and accelerator.zero_grad(optimizer), after accelerator.prepare [accel-training-loop]
  // CHECK-FIXES: {{^}}  model.forward(torch::randn({8, 4})).sum().backward();
  optimizer.step();
  // CHECK-FIXES: {{^}}  optimizer.step();
}
void demonstrate() {
  Net model;
  torch::optim::SGD optimizer(model.parameters(), 0.1);
  one_step(model, optimizer);
}

// Model and optimizer as members of a trainer class: the method gets the accelerator and
// prepares the members first (cli/trainer-class.cpp has more of this shape).
struct Trainer {
  std::shared_ptr<Net> model = std::make_shared<Net>();
  torch::optim::SGD optimizer{model->parameters(), 0.1};
  void train() {
    // CHECK-FIXES: {{^}}  void train(accelerate::Accelerator &accelerator) {
    // CHECK-FIXES-NEXT: {{^}}    accelerator.prepare(model, optimizer);
    auto loader = torch::data::make_data_loader(make_dataset(), 8);
    for (auto &batch : *loader) {
      model->forward(batch.data).sum().backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(model->forward(batch.data).sum() * accelerator.num_processes());
      optimizer.step();
    }
  }
};

// The whole body inside try { } catch: prepare goes into the try block, where the model and
// optimizer are, and the loop is rewritten whole.
int guarded() {
  try {
    auto model = std::make_shared<Net>();
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES: torch::optim::SGD optimizer(model->parameters(), 0.1);
    // CHECK-FIXES-NEXT: accelerator.prepare(model, optimizer);
    auto loader = torch::data::make_data_loader(make_dataset(), 8);
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      model->forward(batch.data).sum().backward();
      // CHECK-FIXES: accelerator.backward(model->forward(batch.data).sum() * accelerator.num_processes());
      optimizer.step();
    }
  } catch (const std::exception &error) {
    return 1;
  }
  return 0;
}


// A model stepping a cell over dimension 0, or keeping its recurrent state in a member from
// one forward pass to the next: batches cut by a counter are parts of sequences; declined.
struct CellUnrolled : torch::nn::Module {
  torch::nn::GRUCell cell = register_module("cell", torch::nn::GRUCell(4, 4));
  torch::Tensor forward(torch::Tensor x) {
    auto h = torch::zeros({x.size(1), 4});
    for (int64_t t = 0; t < x.size(0); ++t) {
      h = cell(x[t], h);
    }
    return h;
  }
};
void cell_unrolled() {
  auto model = std::make_shared<CellUnrolled>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto stream = torch::randn({40, 8, 4}); // [time, streams, features]
  for (int64_t t = 0; t < 40; t += 10) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}this loop cuts its batches along dimension 0, which model 'model' reads as time {{.*}}a cell (LSTMCell, GRUCell, RNNCell){{.*}} [accel-training-loop]
    optimizer.zero_grad();
    model->forward(stream.narrow(0, t, 10)).sum().backward();
    // CHECK-FIXES: {{^}}    model->forward(stream.narrow(0, t, 10)).sum().backward();
    optimizer.step();
  }
}
struct Stateful : torch::nn::Module {
  torch::nn::GRU gru = register_module("gru", torch::nn::GRU(torch::nn::GRUOptions(4, 4).batch_first(true)));
  torch::Tensor state;
  torch::Tensor forward(torch::Tensor x) {
    auto out = state.defined() ? gru(x, state) : gru(x);
    state = std::get<1>(out).detach();
    return std::get<0>(out);
  }
};
void state_in_member() {
  auto model = std::make_shared<Stateful>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto chunks = torch::randn({8, 5, 4}).split(2);
  for (auto &chunk : chunks) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}model 'model' keeps 'state' (line {{[0-9]+}}) from one forward pass to the next{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    model->forward(chunk).sum().backward();
    optimizer.step();
  }
}

// A cosine schedule set each step from a step count and the data set's size (the shape of a
// tensor every process holds whole), in a loop that cuts its batches by a counter: the same
// on every process, rewritten. Its length, computed with the settings' batch size, is one
// process's share by default (accel-data-loader says so).
struct Schedule {
  int epochs = 2;
  int64_t batch = 8;
  double lr = 0.1;
};
void cosine_from_the_step_count() {
  Schedule h;
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), h.lr);
  auto X = torch::randn({64, 4});
  const int64_t n = X.size(0);
  const int64_t total = h.epochs * (n / h.batch);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:41: warning: 'h.batch' sizes the batches a training loop cuts by its counter, and this computes with it{{.*}} [accel-data-loader]
  int64_t step = 0;
  double rate = h.lr;
  for (int epoch = 0; epoch < h.epochs; ++epoch) {
    for (int64_t i = 0; i < n; i += h.batch) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, n, h.batch)) {
      rate = 0.5 * h.lr * (1 + std::cos(M_PI * step / total));
      for (auto &group : optimizer.param_groups())
        static_cast<torch::optim::SGDOptions &>(group.options()).lr(rate);
      optimizer.zero_grad();
      model->forward(X.slice(0, i, i + h.batch)).pow(2).mean().backward();
      optimizer.step();
      ++step;
    }
    // The rate is the same on every process: printed as it is.
    std::printf("rate %f\n", rate);
    // CHECK-FIXES: {{^}}    accelerator.printf("rate %f\n", rate);
  }
}

// Stopping through a flag in the epoch loop's condition, set from this process's smoothed
// loss: the processes would stop after different numbers of epochs; declined like a break.
// Set from the epoch's mean (combined where it is read) it is the same everywhere: rewritten.
void stops_through_a_flag() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto X = torch::randn({64, 4});
  bool reached = false;
  double smooth = 1.0;
  for (int epoch = 0; !reached && epoch < 10; ++epoch) {
    for (int64_t i = 0; i < 64; i += 8) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written, {{.*}}the loop around it stops by its condition on line [[@LINE-2]] when '!reached && epoch < 10'{{.*}} [accel-training-loop]
      optimizer.zero_grad();
      auto loss = model->forward(X.slice(0, i, i + 8)).pow(2).mean();
      loss.backward();
      optimizer.step();
      smooth = 0.9 * smooth + 0.1 * loss.item<double>();
    }
    if (smooth < 0.05) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:9: warning: 'smooth' is kept over this process's batches{{.*}} [accel-reduce]
      reached = true;
    }
  }
}
void stops_through_a_flag_on_the_mean() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto X = torch::randn({64, 4});
  bool reached = false;
  for (int epoch = 0; !reached && epoch < 10; ++epoch) {
    double loss_sum = 0;
    for (int64_t i = 0; i < 64; i += 8) {
      // CHECK-FIXES: {{^}}    for (int64_t i : accelerator.batch_range(0, 64, 8)) {
      optimizer.zero_grad();
      auto loss = model->forward(X.slice(0, i, i + 8)).pow(2).mean();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    if (loss_sum / 8 < 0.05) {
      // CHECK-FIXES: {{^}}    if (accelerator.reduce(loss_sum, "mean") / 8 < 0.05) {
      reached = true;
    }
  }
}

// The last batch's loss kept in a tensor declared around the loop and read after it: each
// process's own; stopping on it, or cutting the rate on it, would part the processes.
void stops_on_last_tensor() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto X = torch::randn({64, 4});
  for (int epoch = 0; epoch < 10; ++epoch) {
    torch::Tensor loss;
    for (int64_t i = 0; i < 64; i += 8) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written, {{.*}}the loop around it can leave on line [[@LINE+6]] when 'loss.item<float>() < 0.05f'{{.*}} [accel-training-loop]
      optimizer.zero_grad();
      loss = model->forward(X.slice(0, i, i + 8)).pow(2).mean();
      loss.backward();
      optimizer.step();
    }
    if (loss.item<float>() < 0.05f) break;
  }
}
void plateau_on_last_tensor() {
  auto model = std::make_shared<Net>();
  torch::optim::Adam optimizer(model->parameters(), 0.05);
  torch::optim::ReduceLROnPlateauScheduler plateau(optimizer);
  auto X = torch::randn({64, 4});
  for (int epoch = 0; epoch < 3; ++epoch) {
    torch::Tensor loss;
    for (int64_t i = 0; i < 64; i += 8) {
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this training is left as written, {{.*}}this training sets its optimizer with plateau.step(loss.item<float>()) on line [[@LINE+6]]{{.*}} [accel-training-loop]
      optimizer.zero_grad();
      loss = model->forward(X.slice(0, i, i + 8)).pow(2).mean();
      loss.backward();
      optimizer.step();
    }
    plateau.step(loss.item<float>());
  }
}

// Noise drawn per batch: the same draws on every process, said; the loop is rewritten.
void noise_per_batch() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto noisy = batch.data + 0.1 * torch::randn_like(batch.data);
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:37: warning: random numbers drawn for a batch of a loop over this process's share of the batches {{.*}} are the same on every process {{.*}} [accel-training-loop]
    model->forward(noisy).mean().backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(model->forward(noisy).mean());
    optimizer.step();
  }
}

// A mean over the real tokens of a padded batch, divided by this process's own count: said
// (averaging the processes' gradients weighs their counts alike). Noise drawn in the trained
// model's forward (a VAE's reparameterisation) is the same on every process: said too.
struct Noisy : torch::nn::Module {
  torch::nn::Linear fc = register_module("fc", torch::nn::Linear(4, 1));
  torch::Tensor forward(torch::Tensor x) { return fc(x + 0.1 * torch::randn_like(x)); }
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:64: warning: random numbers drawn for a batch {{.*}} [accel-training-loop]
};
void masked_mean() {
  auto model = std::make_shared<Noisy>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto mask = (batch.data.select(1, 0) > 0).to(torch::kFloat);
    auto loss = (model->forward(batch.data).squeeze(1) * mask).sum() / mask.sum();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: this loss is divided by a count over this process's part of the batch{{.*}} [accel-training-loop]
    loss.backward();
    optimizer.step();
  }
}

// Accumulation by hand, with the last micro-batches stepped after the loop: that step is the
// accelerator's too (raw, it would apply gradients accelerator.backward scaled under fp16).
void flushes_after_the_loop() {
  auto model = std::make_shared<Net>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  for (int epoch = 0; epoch < 2; ++epoch) {
    int micro = 0;
    for (auto &batch : *loader) {
      (model->forward(batch.data).mean() / 3).backward();
      // CHECK-FIXES: {{^}}      accelerator.backward(model->forward(batch.data).mean() / 3);
      if (++micro % 3 == 0) {
        optimizer.step();
        optimizer.zero_grad();
      }
    }
    if (micro % 3 != 0) {
      optimizer.step();
      // CHECK-FIXES: {{^}}      accelerator.step(optimizer);
      optimizer.zero_grad();
      // CHECK-FIXES: {{^}}      accelerator.zero_grad(optimizer);
    }
  }
}

// A helper training its own model on the loader of a function whose training is declined
// (the loader stays LibTorch's there): declined with it, out loud.
template <typename Loader> void fit_teacher(std::shared_ptr<Net> teacher, Loader &loader) {
  torch::optim::SGD optimizer(teacher->parameters(), 0.1);
  for (auto &batch : loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}it trains on 'loader', a loader made in 'teacher_then_student', whose training is left as written (see the warning there){{.*}} [accel-training-loop]
    optimizer.zero_grad();
    teacher->forward(batch.data).mean().backward();
    // CHECK-FIXES: {{^}}    teacher->forward(batch.data).mean().backward();
    optimizer.step();
  }
}
void teacher_then_student() {
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  auto teacher = std::make_shared<Net>();
  fit_teacher(teacher, *loader);
  auto student = std::make_shared<Net>();
  torch::optim::SGD optimizer(student->parameters(), 0.1);
  for (auto &batch : *loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, {{.*}}this loop can leave early{{.*}} [accel-training-loop]
    optimizer.zero_grad();
    auto loss = student->forward(batch.data).mean();
    loss.backward();
    optimizer.step();
    if (loss.item<float>() < 0.25f) break;
  }
}
// The same with a student loop that can be rewritten: the teacher's helper makes and prepares
// its own optimizer, so training it before the student's optimizer exists is fine.
template <typename Loader> void fit_first(std::shared_ptr<Net> teacher, Loader &loader) {
  // CHECK-FIXES: {{^}}template <typename Loader> void fit_first(std::shared_ptr<Net> teacher, Loader &loader) {
  // CHECK-FIXES: {{^}}  accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  torch::optim::SGD optimizer(teacher->parameters(), 0.1);
  // CHECK-FIXES: {{^}}  accelerator.prepare(teacher, optimizer);
  for (auto &batch : loader) {
    optimizer.zero_grad();
    teacher->forward(batch.data).mean().backward();
    optimizer.step();
  }
}
void teacher_first() {
  auto loader = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto loader = accelerator.prepare_data_loader(make_dataset(), 8);
  auto teacher = std::make_shared<Net>();
  fit_first(teacher, *loader);
  // CHECK-FIXES: {{^}}  fit_first(teacher, *loader);
  auto student = std::make_shared<Net>();
  torch::optim::SGD optimizer(student->parameters(), 0.1);
  // CHECK-FIXES: {{^}}  accelerator.prepare(student, optimizer);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    (student->forward(batch.data) - teacher->forward(batch.data).detach()).pow(2).mean().backward();
    optimizer.step();
  }
}

int main() {
  sound();
  kfold();
  model_outside();
  compare_models();
  iterator_walk();
  iterator_while();
  auto walked = torch::data::make_data_loader(make_dataset(), 8);
  // CHECK-FIXES: {{^}}  auto walked = accelerator.prepare_data_loader(make_dataset(), 8);
  walk_while(std::make_shared<Net>(), *walked);
  iterator_spelled();
  counted_then_written();
  pairs_by_index();
  rate_from_the_batch();
  rate_cut_when_the_batch_says();
  rate_from_the_mean();
  trains_a_free_tensor();
  samples_by_index();
  stops_on_the_mean();
  stops_on_a_smoothed_loss();
  lambda_helper();
  permutation_batches();
  early_exit_batches();
  carried_state();
  time_windows();
  time_window_list();
  sample_windows();
  straight_line();
  cell_unrolled();
  state_in_member();
  stops_on_last_tensor();
  plateau_on_last_tensor();
  noise_per_batch();
  flushes_after_the_loop();
  masked_mean();
  teacher_then_student();
  teacher_first();
  Trainer().train();
  // CHECK-FIXES: {{^}}  Trainer().train(accelerator);
  return guarded();
}
