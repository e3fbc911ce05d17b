// accel-reduce, what a value is (found in outside programs, each once silently wrong): sums
// returned in a struct or a pair are combined each by its own rule; a loss tensor printed
// whole shows the global batch's; a function of the loss taken as a number
// (`torch::sqrt(loss).item<float>()`) is warned about; a penalty summed over the model's
// parameters is no statistic (accelerator.reduce would cut its gradient); rows cut by a
// counter from data every process holds whole (`torch::linspace`) are this process's batch;
// a class-weighted CrossEntropyLoss is warned about, its step still rewritten; a batch value
// handed to a lambda that prints it (also one of a list of callbacks) is combined at the
// call, as for a helper function; a generic lambda that evaluates the loader it is given
// counts over the sharded loader; a ratio of two sums that is no mean (R²) is warned about;
// the size() of a batch that is a std::vector of samples counts them; a confusion matrix
// counted in place (index_put_ with accumulate) and a histogram of predictions (bincount) sum
// counts of samples, combined also where handed to a helper that prints from them; a tensor
// changed in a way accel-reduce does not follow, handed to such a helper, is warned about.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only -Wall -Werror %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;

struct Stats {
  double loss;
  int64_t seen;
};

template <typename Loader>
Stats train_epoch(torch::nn::Linear &model, Loader &loader, torch::optim::SGD &opt) {
  double loss_sum = 0.0;
  int64_t seen = 0;
  for (auto &batch : loader) {
    opt.zero_grad();
    torch::Tensor loss = model->forward(batch.data).pow(2).mean();
    loss.backward();
    opt.step();
    loss_sum += loss.template item<double>() * batch.data.size(0);
    seen += batch.data.size(0);
    std::cout << "loss " << loss << " rmse " << torch::sqrt(loss) << "\n";
    // CHECK-FIXES: accelerator.print() << "loss " << accelerator.reduce(loss.detach(), "mean") << " rmse " << torch::sqrt(accelerator.reduce(loss.detach(), "mean")) << "\n";
    std::cout << "rmse " << torch::sqrt(loss).template item<float>() << "\n";
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:29: warning: this prints a value of this process's batch that accel-reduce cannot classify {{.*}} [accel-reduce]
  }
  auto pair = std::make_pair(loss_sum, seen);
  // CHECK-FIXES: auto pair = std::make_pair(accelerator.reduce(loss_sum, "sum"), accelerator.reduce(seen, "sum"));
  std::cout << pair.first / pair.second << "\n";
  return Stats{loss_sum, seen};
  // CHECK-FIXES: return Stats{accelerator.reduce(loss_sum, "sum"), accelerator.reduce(seen, "sum")};
}

// A callback handed in as a parameter: combined at its call when every lambda the callers
// pass prints the value.
template <typename Loader>
void fit(torch::nn::Linear &model, Loader &loader, torch::optim::SGD &opt,
         const std::function<void(int, double)> &on_step) {
  int step = 0;
  for (auto &batch : loader) {
    opt.zero_grad();
    auto loss = model->forward(batch.data).pow(2).mean();
    loss.backward();
    opt.step();
    on_step(++step, loss.template item<double>());
    // CHECK-FIXES: on_step(++step, accelerator.reduce(loss.template item<double>(), "mean"));
  }
}

// Prints what it computes from a confusion matrix it is given.
void report_confusion(const char *tag, const torch::Tensor &confusion) {
  auto counts = confusion.to(torch::kDouble);
  double accuracy = (counts.diag().sum() / counts.sum()).item<double>();
  std::printf("%s accuracy %.4f\n", tag, accuracy);
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD opt(model->parameters(), 0.01);
  auto loader = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  Stats s = train_epoch(model, *loader, opt);
  std::cout << s.loss / s.seen << "\n";

  // The textbook fit of y = 2x + 1 on a grid, cut by a counter, with a weight-norm penalty.
  const int64_t n = 64, bs = 8;
  auto X = torch::linspace(-1, 1, n).unsqueeze(1);
  auto Y = 2 * X + 1;
  torch::nn::Linear line(1, 1);
  torch::optim::SGD sgd(line->parameters(), 0.1);
  double total = 0;
  int steps = 0;
  for (int64_t i = 0; i < n; i += bs) {
    auto x = X.slice(0, i, i + bs), y = Y.slice(0, i, i + bs);
    auto mse = torch::mse_loss(line->forward(x), y);
    auto l2 = torch::zeros({});
    for (auto &p : line->parameters()) {
      l2 = l2 + p.pow(2).sum();
    }
    auto loss = mse + 0.1 * l2.sqrt();
    // CHECK-FIXES: auto loss = mse + 0.1 * l2.sqrt();
    sgd.zero_grad();
    loss.backward();
    sgd.step();
    total += mse.item<double>();
    ++steps;
  }
  std::cout << "mse " << total / steps << "\n";
  // CHECK-FIXES: accelerator.print() << "mse " << accelerator.reduce(total, "mean") / steps << "\n";

  // Classes weighed: each process divides by its own targets' weights.
  torch::nn::Linear classifier(4, 2);
  torch::optim::SGD csgd(classifier->parameters(), 0.1);
  torch::nn::CrossEntropyLoss criterion(
      torch::nn::CrossEntropyLossOptions().weight(torch::tensor({1.0f, 4.0f})));
  auto labelled = torch::data::make_data_loader(
      Data(torch::randn({16, 4})).map(Stack()), 4);
  for (auto &batch : *labelled) {
    auto loss = criterion(classifier->forward(batch.data), batch.data.select(1, 0).gt(0).to(torch::kLong));
    csgd.zero_grad();
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss is averaged with class weights (or an ignore_index){{.*}} [accel-backward]
    // CHECK-FIXES: accelerator.backward(loss);
    csgd.step();
  }

  std::function<void(int, double)> report = [&](int step, double value) {
    std::cout << "step " << step << " loss " << value << "\n";
  };
  auto report_too = [&](int step, double value) { std::printf("%d %f\n", step, value); };
  auto accuracy = [&](const char *name, auto &data) {
    int64_t correct = 0, total = 0;
    for (auto &batch : data) {
      correct += classifier->forward(batch.data).argmax(1).eq(0).sum().template item<int64_t>();
      total += batch.data.size(0);
    }
    std::cout << name << " " << correct << "/" << total << "\n";
    // CHECK-FIXES: accelerator.print() << name << " " << accelerator.reduce(correct, "sum") << "/" << accelerator.reduce(total, "sum") << "\n";
  };
  // Callbacks kept in a list: followed to each lambda pushed into it.
  std::vector<std::function<void(int, double)>> callbacks;
  callbacks.push_back([&](int at, double value) { std::cout << at << " " << value << "\n"; });
  callbacks.emplace_back(report);
  int step = 0;
  for (auto &batch : *labelled) {
    auto loss = classifier->forward(batch.data).pow(2).mean();
    csgd.zero_grad();
    loss.backward();
    csgd.step();
    report(++step, loss.item<double>());
    // CHECK-FIXES: report(++step, accelerator.reduce(loss.item<double>(), "mean"));
    report_too(step, loss.item<double>());
    // CHECK-FIXES: report_too(step, accelerator.reduce(loss.item<double>(), "mean"));
    for (auto &callback : callbacks) {
      callback(step, loss.item<double>());
      // CHECK-FIXES: callback(step, accelerator.reduce(loss.item<double>(), "mean"));
    }
    // A ratio of two sums over the batch that is no mean (R²): warned, not averaged.
    auto ss_res = (classifier->forward(batch.data) - 1).pow(2).sum();
    auto ss_tot = (batch.data - batch.data.mean()).pow(2).sum();
    std::cout << "r2 " << (1 - ss_res / ss_tot).item<double>() << "\n";
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:27: warning: this prints a value of this process's batch that accel-reduce cannot classify {{.*}} [accel-reduce]
  }
  accuracy("train", *labelled);
  fit(model, *loader, opt, report);
  // Called with the sharded loader and with one every process sees whole: warned.
  auto evaluate = [&](auto &data) {
    int64_t hits = 0;
    for (auto &batch : data) {
      hits += classifier->forward(batch.data).argmax(1).eq(0).sum().template item<int64_t>();
    }
    std::cout << "hits " << hits << "\n";
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:{{[0-9]+}}: warning: 'hits' is kept over this process's batches, but the function is called with a sharded loader and with one every process sees whole{{.*}} [accel-reduce]
  };
  auto whole = torch::data::make_data_loader(Data(torch::randn({8, 4})).map(Stack()), 4);
  evaluate(*labelled);
  evaluate(*whole);

  // A loader without Stack: a batch is a std::vector of its samples, and its size() counts them.
  auto unstacked = torch::data::make_data_loader(Data(torch::randn({16, 4})), 4);
  size_t samples = 0;
  for (auto &batch : *unstacked) {
    std::vector<torch::Tensor> rows;
    for (auto &example : batch) {
      rows.push_back(example.data);
    }
    auto loss = classifier->forward(torch::stack(rows)).pow(2).mean();
    csgd.zero_grad();
    loss.backward();
    csgd.step();
    samples += batch.size();
  }
  std::cout << "samples " << samples << "\n";
  // CHECK-FIXES: accelerator.print() << "samples " << accelerator.reduce(samples, "sum") << "\n";

  // A confusion matrix counted in place and a histogram of the predictions: counts of
  // samples, combined where they are read, also where handed to a helper that prints from them
  // (they were this process's share, unsaid). One scaled in place is warned about.
  auto confusion = torch::zeros({2, 2}, torch::kLong);
  auto predicted = torch::zeros({2}, torch::kLong);
  auto scaled = torch::zeros({2, 2});
  for (auto &batch : *labelled) {
    auto logits = classifier->forward(batch.data);
    auto target = batch.data.select(1, 0).gt(0).to(torch::kLong);
    auto loss = torch::nn::functional::cross_entropy(logits, target);
    csgd.zero_grad();
    loss.backward();
    csgd.step();
    confusion.index_put_({target, logits.argmax(1)}, torch::ones_like(target), true);
    predicted += torch::bincount(logits.argmax(1), {}, 2).view({2});
    scaled.add_(loss.detach(), 0.5);
  }
  report_confusion("train", confusion);
  // CHECK-FIXES: report_confusion(accelerator, "train", accelerator.reduce(confusion, "sum"));
  std::cout << "predicted 1: " << predicted[1].item<int64_t>() << "\n";
  // CHECK-FIXES: accelerator.print() << "predicted 1: " << accelerator.reduce(predicted, "sum")[1].item<int64_t>() << "\n";
  report_confusion("scaled", scaled);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: 'scaled' is kept over this process's batches, but it is computed from this process's batches in a way accel-reduce does not follow{{.*}} [accel-reduce]

  // Data every process holds whole: its size and a count over it (a validation set checked
  // every few steps) are the same everywhere, printed as they are; one ignoring a class,
  // through options held in a variable, is warned about at the loss.
  auto Xall = torch::randn({32, 4});
  auto Xvalid = Xall.slice(0, 16);
  auto ignoring = torch::nn::functional::CrossEntropyFuncOptions().ignore_index(1);
  int64_t seen_rows = 0;
  for (int64_t i = 0; i < 16; i += 4) {
    auto logits = classifier->forward(Xall.slice(0, i, i + 4));
    auto loss = torch::nn::functional::cross_entropy(logits, logits.argmax(1), ignoring);
    csgd.zero_grad();
    loss.backward();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: this loss is averaged with class weights (or an ignore_index){{.*}} [accel-backward]
    csgd.step();
    seen_rows += 4;
    int64_t valid_zeros = classifier->forward(Xvalid).argmax(1).eq(0).sum().item<int64_t>();
    std::printf("%lld/%lld rows, %lld of %lld valid\n", static_cast<long long>(seen_rows),
                static_cast<long long>(Xall.size(0)), static_cast<long long>(valid_zeros),
                static_cast<long long>(Xvalid.size(0)));
    // CHECK-FIXES: static_cast<long long>(Xall.size(0)), static_cast<long long>(valid_zeros),
    // CHECK-FIXES-NEXT: static_cast<long long>(Xvalid.size(0)));
  }
}
