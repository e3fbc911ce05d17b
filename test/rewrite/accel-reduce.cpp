// accel-reduce: running statistics of a training loop over the sharded loader are read
// through accelerator.reduce: sums of per-sample quantities with "sum", sums of per-batch means
// with "mean"; a batch's loss printed in the loop shows the global batch's; step counters,
// evaluation statistics (the evaluation loader is not sharded) and
// unclassifiable sums stay as they are.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags -I%runtime_include \
// RUN:   2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only -Wall -Werror %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <accelerate/accelerate.h>

#include <algorithm>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;

// A helper that trains and returns the epoch's mean loss: the accelerator is passed in, and
// the value it returns is combined.
template <typename Loader>
double train_epoch(torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  double total = 0;
  int64_t samples = 0;
  for (auto &batch : loader) {
    optimizer.zero_grad();
    auto loss = model(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
    total += loss.template item<double>() * batch.data.size(0);
    samples += batch.data.size(0);
  }
  return total / samples;
}
// CHECK-FIXES: return accelerator.reduce(total, "sum") / accelerator.reduce(samples, "sum");

// Partly ported by hand already: a read in a branch only the main process takes is left alone,
// with a warning (a collective there would wait forever for the other processes).
void partly_ported(torch::nn::Linear &model) {
  accelerate::Accelerator accelerator;
  auto loader = accelerator.prepare_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double running_loss = 0;
  for (auto &batch : *loader) {
    auto loss = model(batch.data).pow(2).mean();
    accelerator.backward(loss);
    running_loss += loss.item<double>() * batch.data.size(0);
  }
  if (accelerator.is_main_process()) {
    std::printf("main process share %.4f\n", running_loss);
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:46: warning: this value is one process's share, but accelerator.reduce here would run on some processes only {{.*}} [accel-reduce]
  }
  std::printf("all %.4f\n", running_loss);
  // CHECK-FIXES: accelerator.printf("all %.4f\n", accelerator.reduce(running_loss, "sum"));
}

// Statistics written the ways books and courses write them: each read is combined by what
// the value is (the loss's reduction, a division by the batch size), not by how the update
// line looks.
void book_style() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  torch::nn::MSELoss summed(torch::nn::MSELossOptions().reduction(torch::kSum));
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  auto test_data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double s = 0, sq = 0, weird = 0;
  int64_t nb = 0, n = 0, batch_idx = 0, right = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto out = net(b.data);
    auto lsum = summed(out, torch::zeros_like(out));
    lsum.backward();
    sgd.step();
    // A sum-reduced loss divided by the batch size: a per-batch mean.
    s += lsum.item<float>() / b.data.size(0);
    ++nb;
    // The sum-reduced loss itself: per sample.
    sq += lsum.item<double>();
    n += out.size(0);
    right += out.argmax(1).eq(0).sum().item<int64_t>();
    weird += std::sqrt(lsum.item<double>());
    std::printf("seen %lld input %.3f\n", static_cast<long long>(batch_idx * b.data.size(0)),
                b.data[0][0].item<double>());
    // CHECK-FIXES: accelerator.printf("seen %lld input %.3f\n", static_cast<long long>(batch_idx * accelerator.reduce(b.data.size(0), "sum")),
    // CHECK-FIXES-NEXT: b.data[0][0].item<double>());
    // The batch's last sample: process 0's last row is another sample (the middle of the
    // batch under split_batches): warned, neither summed across processes nor printed as if
    // it were the original's. The first sample's sum is that sample's: printed as it is.
    std::printf("first %.3f\n", out[0].sum().item<double>());
    // CHECK-FIXES: accelerator.printf("first %.3f\n", out[0].sum().item<double>());
    std::printf("last %.3f\n", out[-1].sum().item<double>());
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:32: warning: this prints a value of this process's batch that accel-reduce cannot classify{{.*}} [accel-reduce]
    ++batch_idx;
  }
  std::printf("%.4f %.4f\n", s / nb, sq / n);
  // CHECK-FIXES: accelerator.printf("%.4f %.4f\n", accelerator.reduce(s, "mean") / nb, accelerator.reduce(sq, "sum") / accelerator.reduce(n, "sum"));
  std::printf("train accuracy %lld\n", static_cast<long long>(right));
  // CHECK-FIXES: accelerator.printf("train accuracy %lld\n", static_cast<long long>(accelerator.reduce(right, "sum")));
  std::printf("%.4f\n", weird);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'weird' is added up over this process's batches, but accel-reduce cannot tell whether it sums values per sample or per-batch means {{.*}} [accel-reduce]
  // The same counter, reset and reused by the evaluation loop (not sharded): left alone.
  right = 0;
  for (auto &b : *test_data) {
    right += net(b.data).argmax(1).eq(0).sum().item<int64_t>();
  }
  std::printf("test accuracy %lld\n", static_cast<long long>(right));
  // CHECK-FIXES: accelerator.printf("test accuracy %lld\n", static_cast<long long>(right));
}

// Normalised in place after the loop, as many programs write it: combined there, and the
// reads after it take the combined value. A sum of per-batch means divided by anything but the
// step count (a number written out is one), and a count of the configured batch size, mean
// one thing per loader mode: warned.
void in_place(int64_t batch_size) {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double epoch_loss = 0, other = 0, per_batch = 0, sum_loss = 0, window = 0;
  int num_batches = 0;
  int64_t total = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    epoch_loss += loss.item<double>();
    other += loss.item<double>();
    per_batch += loss.item<double>();
    window += loss.item<double>();
    sum_loss += loss.item<double>() * b.data.size(0);
    ++num_batches;
    total += batch_size;
  }
  epoch_loss /= num_batches;
  // CHECK-FIXES: {{^}}  epoch_loss = accelerator.reduce(epoch_loss, "mean") / num_batches;
  other = other / num_batches;
  // CHECK-FIXES: {{^}}  other = accelerator.reduce(other, "mean") / num_batches;
  double per_sample = 0;
  int64_t rows = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    per_sample += loss.item<double>() * b.data.size(0);
    rows += b.data.size(0);
  }
  // Divided by a statistic itself: each is combined; a second scaling takes the combined value.
  per_sample /= rows;
  // CHECK-FIXES: {{^}}  per_sample = accelerator.reduce(per_sample, "sum") / accelerator.reduce(rows, "sum");
  per_sample /= 2 * rows;
  // CHECK-FIXES: {{^}}  per_sample /= 2 * accelerator.reduce(rows, "sum");
  sum_loss *= 0.5 + 0.5;
  std::printf("%.4f\n", per_sample);
  // CHECK-FIXES: {{^}}  sum_loss = accelerator.reduce(sum_loss, "sum") * (0.5 + 0.5);
  std::printf("%.4f %.4f %.4f\n", epoch_loss, other, sum_loss);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f %.4f %.4f\n", epoch_loss, other, sum_loss);
  std::printf("%.4f\n", window / 4);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f\n", accelerator.reduce(window, "mean") / 4);
  std::printf("%.4f\n", per_batch / (16 / batch_size));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'per_batch' is kept over this process's batches, but it sums per-batch means and is divided by something other than a count of the steps{{.*}} [accel-reduce]
  std::printf("%lld\n", static_cast<long long>(total));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:48: warning: 'total' is kept over this process's batches, but it counts by a number that is not the batch's own size{{.*}} [accel-reduce]
}

// The last batch's value read after the loop (a loss tensor declared before it, a number
// assigned in it): the global batch's, as the original printed it.
void last_batch() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  torch::Tensor loss;
  double last = 0, last_sum = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    last = loss.item<double>();
    last_sum = loss.item<double>() * b.data.size(0);
  }
  std::printf("%.4f %.4f %.4f\n", loss.item<double>(), last, last_sum);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f %.4f %.4f\n", accelerator.reduce(loss.item<double>(), "mean"), accelerator.reduce(last, "mean"), accelerator.reduce(last_sum, "sum"));
}

// The clipped gradients' norm is the synchronised gradients' global norm, the same on every
// process: added up, it is left alone like a step counter (no warning). A running loss divided
// by a named constant, the steps between its prints, is a mean over those steps.
void clipped_norms() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  constexpr int kLogInterval = 2;
  double norms = 0, running = 0;
  int steps = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    norms += torch::nn::utils::clip_grad_norm_(net->parameters(), 1.0);
    sgd.step();
    running += loss.item<double>();
    if (++steps % kLogInterval == 0) {
      std::printf("%.4f\n", running / kLogInterval);
      // CHECK-FIXES: {{^}}      accelerator.printf("%.4f\n", accelerator.reduce(running, "mean") / kLogInterval);
      running = 0;
    }
  }
  std::printf("%.4f\n", norms / steps);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f\n", norms / steps);
}

// The long form of `+=` (`x = x + v`, as some courses write it), for a number and a tensor,
// and a running mean printed inside the loop, divided by the step counter plus one.
void long_form_sums() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  float running_loss = 0;
  torch::Tensor total = torch::zeros({});
  int batch_idx = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    running_loss = running_loss + loss.item<float>();
    // CHECK-FIXES: {{^}}    running_loss = running_loss + loss.item<float>();
    total = loss.detach() + total;
    // CHECK-FIXES: {{^}}    total = loss.detach() + total;
    std::printf("%.4f\n", running_loss / (batch_idx + 1));
    // CHECK-FIXES: {{^}}    accelerator.printf("%.4f\n", accelerator.reduce(running_loss, "mean") / (batch_idx + 1));
    batch_idx++;
  }
  std::printf("%.4f %.4f\n", running_loss / batch_idx, total.item<float>() / batch_idx);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f %.4f\n", accelerator.reduce(running_loss, "mean") / batch_idx, accelerator.reduce(total, "mean").item<float>() / batch_idx);
}

// A tensor that adds up the batches' losses (`epoch_loss += loss.detach()`), read through
// item() or printed: combined where its value is taken. One scaled in place is warned about.
void tensor_sums() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  torch::Tensor epoch_loss = torch::zeros({});
  auto sample_sum = torch::tensor(0.0);
  torch::Tensor scaled = torch::zeros({});
  int batches = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    epoch_loss = torch::zeros({});
    for (auto &b : *data) {
      sgd.zero_grad();
      auto loss = net(b.data).pow(2).mean();
      loss.backward();
      sgd.step();
      epoch_loss += loss.detach();
      sample_sum.add_(loss.detach() * b.data.size(0));
      scaled += loss.detach();
      ++batches;
    }
    std::printf("%.4f\n", epoch_loss.item<float>() / batches);
    // CHECK-FIXES: {{^}}    accelerator.printf("%.4f\n", accelerator.reduce(epoch_loss, "mean").item<float>() / batches);
    std::cout << sample_sum / 16 << '\n';
    // CHECK-FIXES: {{^}}    accelerator.print() << accelerator.reduce(sample_sum, "sum") / 16 << '\n';
  }
  scaled /= batches;
  std::printf("%.4f\n", scaled.item<float>());
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'scaled' is added up over this process's batches{{.*}} [accel-reduce]
}

// A loss read, then scaled for accumulation: the read sees the loss function's mean (the
// later assignment does not reach it); a loss scaled before it is read is another value.
void scaled_after_read() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double total = 0, scaled_total = 0;
  int batches = 0;
  for (auto &b : *data) {
    auto loss = net(b.data).pow(2).mean();
    total += loss.item<double>();
    ++batches;
    loss = loss / 2;
    scaled_total += loss.item<double>();
    loss.backward();
    if (batches % 2 == 0) {
      sgd.step();
      sgd.zero_grad();
    }
  }
  std::printf("%.4f\n", total / batches);
  // CHECK-FIXES: accelerator.printf("%.4f\n", accelerator.reduce(total, "mean") / batches);
  std::printf("%.4f\n", scaled_total / batches);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'scaled_total' is added up over this process's batches{{.*}} [accel-reduce]
}

// The last batch's loss pushed into a history (bound to push_back's const reference), two
// running means reset in one chained assignment, and a gradient norm summed where a
// gradient is defined (synchronised: the same on every process, left alone).
void history_and_resets() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  std::vector<double> history;
  double last = 0, run_a = 0, run_b = 0, norms = 0;
  int steps = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    double sq = 0;
    for (const auto &p : net->parameters())
      if (p.grad().defined())
        sq += p.grad().pow(2).sum().item<double>();
    norms += std::sqrt(sq);
    sgd.step();
    last = loss.item<double>();
    run_a += loss.item<double>();
    run_b += 2 * loss.item<double>();
    if (++steps % 2 == 0) {
      std::printf("%.4f %.4f\n", run_a / 2, run_b / 2);
      // CHECK-FIXES: accelerator.printf("%.4f %.4f\n", accelerator.reduce(run_a, "mean") / 2, accelerator.reduce(run_b, "mean") / 2);
      run_a = run_b = 0;
    }
  }
  history.push_back(last);
  // CHECK-FIXES: history.push_back(accelerator.reduce(last, "mean"));
  std::printf("%.4f %.4f\n", history.back(), norms / steps);
  // CHECK-FIXES: accelerator.printf("%.4f %.4f\n", history.back(), norms / steps);
}

// Batch values kept in an object or a container: not followed, so said (read later, they are
// one process's share).
struct AverageMeter {
  double sum = 0;
  int64_t count = 0;
  void update(double value, int64_t n) {
    sum += value * n;
    count += n;
  }
};
struct History {
  double loss = 0;
};
double largest_of(const torch::Tensor &out) { return out.max().item<double>(); }
#define LOSS_OF(l) (l).item<double>()
void held_elsewhere() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  AverageMeter meter;
  auto shared = std::make_shared<AverageMeter>();
  std::vector<AverageMeter *> listeners = {&meter};
  History history;
  std::vector<float> losses;
  std::map<std::string, double> metrics;
  int64_t n = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    n += b.data.size(0);
    // An object of the program gets the global batch's values instead, each step: what it
    // computes from them (an average, a history) is then the original's on every process.
    meter.update(loss.item<double>(), b.data.size(0));
    // CHECK-FIXES: {{^}}    meter.update(accelerator.reduce(loss.item<double>(), "mean"), accelerator.reduce(b.data.size(0), "sum"));
    shared->update(loss.item<double>(), b.data.size(0));
    // CHECK-FIXES: {{^}}    shared->update(accelerator.reduce(loss.item<double>(), "mean"), accelerator.reduce(b.data.size(0), "sum"));
    // Also through a list of the program's objects, which every process walks alike.
    for (AverageMeter *each : listeners) {
      each->update(loss.item<double>(), b.data.size(0));
      // CHECK-FIXES: {{^}}      each->update(accelerator.reduce(loss.item<double>(), "mean"), accelerator.reduce(b.data.size(0), "sum"));
    }
    // Unless an argument is computed from the batch by no rule that combines (a maximum): the
    // object would mix global and local values, so warned.
    meter.update(largest_of(net(b.data)), b.data.size(0));
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'meter', which accel-reduce does not follow{{.*}} [accel-reduce]
    // Nor through a macro, which the rewrite does not edit: warned.
    meter.update(LOSS_OF(loss), b.data.size(0));
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'meter', which accel-reduce does not follow{{.*}} [accel-reduce]
    // Nor where some processes would combine and others not: under a branch on this process's
    // batch, or once per sample.
    if (loss.item<double>() > 1.0) {
      meter.update(loss.item<double>(), b.data.size(0));
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: a value of this process's batch goes into 'meter', which accel-reduce does not follow{{.*}} [accel-reduce]
    }
    for (int64_t i = 0; i < b.data.size(0); ++i) {
      meter.update(loss.item<double>(), 1);
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: a value of this process's batch goes into 'meter', which accel-reduce does not follow{{.*}} [accel-reduce]
    }
    losses.push_back(loss.item<float>());
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'losses'{{.*}} [accel-reduce]
    history.loss += loss.item<double>();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'loss'{{.*}} [accel-reduce]
    metrics["loss"] += loss.item<double>();
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'metrics["loss"]'{{.*}} [accel-reduce]
  }
  // The count that divides a sum kept in a member stays as it is too: combined alone it would
  // divide one process's sum by the global count.
  history.loss /= n;
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:19: warning: 'n' is kept over this process's batches, but it divides 'history.loss', a sum of this process's batch values that accel-reduce does not follow{{.*}} [accel-reduce]
  // CHECK-FIXES: {{^}}  history.loss /= n;
  std::printf("%.4f %.4f %.4f %zu %.4f\n", meter.sum / meter.count, shared->sum, history.loss, losses.size(),
              metrics["loss"]);
}

// Computed from the batches in ways accel-reduce does not follow: an average updated in place,
// and counts made in a loop over each batch's samples. Warned, never left silent.
void not_followed() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double ema = 0;
  int64_t seen = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    ema = 0.9 * ema + 0.1 * loss.item<double>();
    for (int64_t i = 0; i < b.data.size(0); ++i) {
      ++seen;
    }
  }
  std::printf("%.4f %lld\n", ema, static_cast<long long>(seen));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: 'ema' is kept over this process's batches, but it is computed from this process's batches in a way accel-reduce does not follow{{.*}} [accel-reduce]
  // CHECK-MESSAGES: input.cpp:[[@LINE-2]]:58: warning: 'seen' is kept over this process's batches, but it is added up in a loop inside the loop over batches{{.*}} [accel-reduce]
}

// Kept by a condition on this process's batch: a minimum through a local, a best value set
// by `if`, a count of batches a condition picks. Each process keeps its own: warned, left.
void selected() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  float lowest = 1e9f, best = 1e9f;
  int noisy = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    float l = loss.item<float>();
    lowest = std::min(lowest, l);
    if (l < best) best = l;
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:13: warning: 'best' is kept over this process's batches, but it is computed from this process's batches{{.*}} [accel-reduce]
    // CHECK-FIXES: {{^}}    if (l < best) best = l;
    if (l > 1.0f) noisy++;
  }
  std::printf("%.4f %.4f %d\n", lowest, best, noisy);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:33: warning: 'lowest' is kept over this process's batches, but it is computed from this process's batches in a way accel-reduce does not follow{{.*}} [accel-reduce]
  // CHECK-MESSAGES: input.cpp:[[@LINE-2]]:41: warning: 'best' is kept over this process's batches, but it is computed from this process's batches{{.*}} [accel-reduce]
  // CHECK-MESSAGES: input.cpp:[[@LINE-3]]:47: warning: 'noisy' is kept over this process's batches, but it is computed from this process's batches{{.*}} [accel-reduce]
}

// `item()` then a c10::Scalar conversion is the same value as `item<double>()`: a per-sample
// sum, combined with "sum".
void scalar_conversion() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double total = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    total += loss.item().toDouble() * b.data.size(0);
  }
  std::printf("%.4f\n", total);
  // CHECK-FIXES: accelerator.printf("%.4f\n", accelerator.reduce(total, "sum"));
}

// A validation pass every few steps, nested in the training loop, over a loader every process
// sees whole: its counts are the same everywhere, not combined.
void validates_inside() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  auto val = torch::data::make_data_loader(Data(torch::randn({8, 4})).map(Stack()), 4);
  int step = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    net(b.data).pow(2).mean().backward();
    sgd.step();
    if (++step % 2 == 0) {
      int64_t seen = 0;
      double total = 0;
      for (auto &v : *val) {
        total += net(v.data).pow(2).sum().item<double>();
        seen += v.data.size(0);
      }
      std::printf("%d %.4f %lld\n", step, total / seen, static_cast<long long>(seen));
      // CHECK-FIXES: accelerator.printf("%d %.4f %lld\n", step, total / seen, static_cast<long long>(seen));
    }
  }
}

// Read in a lambda (a progress logger called after the loop): accel-reduce does not follow
// the lambda to where it runs; warned, left.
void logged_by_lambda() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double loss_sum = 0;
  auto log = [&] { std::printf("%.4f\n", loss_sum); };
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:42: warning: 'loss_sum' is kept over this process's batches, but it is read in a lambda, which runs where it is called, and accel-reduce does not follow it there; read accelerator.reduce(loss_sum, "sum") (per-sample sums and counts) or "mean" (sums of per-batch means) in the lambda by hand; it is left as this process's share [accel-reduce]
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).sum();
    loss.backward();
    sgd.step();
    loss_sum += loss.item<double>();
  }
  log();
}

// A training-step helper that returns its batch's mean loss: what the loop adds up from it
// is a sum of per-batch means (its loader is sharded, since its loop trains through it).
float step_on(torch::nn::Linear &net, torch::optim::Optimizer &opt, const torch::Tensor &x) {
  opt.zero_grad();
  auto loss = net(x).pow(2).mean();
  loss.backward();
  opt.step();
  return loss.item<float>();
}
void returned_by_step() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  // CHECK-FIXES: {{^}}  auto data = accelerator.prepare_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  float sum = 0;
  int n = 0;
  for (auto &b : *data) {
    sum += step_on(net, sgd, b.data);
    ++n;
  }
  std::printf("%.4f\n", sum / n);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f\n", accelerator.reduce(sum, "mean") / n);
}

// A gradient norm logged by hand after backward: the gradients are synchronised, the same on
// every process, so what is computed from them stays as it is (no reduce, no warning).
void gradient_norm() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double norms = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    net(b.data).pow(2).mean().backward();
    double squares = 0;
    for (const auto &p : net->parameters()) {
      squares += p.grad().pow(2).sum().item<double>();
    }
    norms += std::sqrt(squares);
    sgd.step();
  }
  std::printf("%.4f\n", norms);
  // CHECK-FIXES: {{^}}  accelerator.printf("%.4f\n", norms);
}

// An evaluation helper given the sharded training loader gets the accelerator and combines
// its counts; one given both the training loader and a loader every process sees whole is
// left alone with a warning.
template <typename Loader> double train_accuracy(torch::nn::Linear &net, Loader &loader) {
  // CHECK-FIXES: {{^}}template <typename Loader> double train_accuracy(accelerate::Accelerator &accelerator, torch::nn::Linear &net, Loader &loader) {
  int64_t correct = 0, total = 0;
  for (auto &b : loader) {
    torch::Tensor hits = net(b.data).argmax(1).eq(0);
    correct += hits.sum().item<int64_t>();
    total += hits.size(0);
  }
  return static_cast<double>(correct) / total;
  // CHECK-FIXES: {{^}}  return static_cast<double>(accelerator.reduce(correct, "sum")) / accelerator.reduce(total, "sum");
}
template <typename Loader> double any_accuracy(torch::nn::Linear &net, Loader &loader) {
  int64_t correct = 0;
  for (auto &b : loader) {
    torch::Tensor hits = net(b.data).argmax(1).eq(0);
    correct += hits.sum().item<int64_t>();
  }
  return static_cast<double>(correct);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:30: warning: 'correct' is kept over this process's batches, but the function is called with a sharded loader and with one every process sees whole{{.*}} [accel-reduce]
}
void evaluated() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  auto test = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  for (auto &b : *data) {
    sgd.zero_grad();
    net(b.data).pow(2).mean().backward();
    sgd.step();
  }
  double seen = train_accuracy(net, *data);
  // CHECK-FIXES: {{^}}  double seen = train_accuracy(accelerator, net, *data);
  std::printf("%.4f %.4f %.4f\n", seen, any_accuracy(net, *data), any_accuracy(net, *test));
}

// A sum-reduced criterion made by the caller and passed in: its reduction is the caller's, so
// the per-batch sums add up ("sum"), as with a local criterion.
double epoch_of_sums(torch::nn::Linear &net, torch::optim::SGD &sgd,
                     torch::nn::MSELoss &criterion) {
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double total = 0;
  int64_t steps = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = criterion(net(b.data), torch::zeros({b.data.size(0), 2}));
    loss.backward();
    sgd.step();
    total += loss.item<double>();
    ++steps;
  }
  return total / steps;
  // CHECK-FIXES: return accelerator.reduce(total, "sum") / steps;
}
void sums_by_the_callers_criterion() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  torch::nn::MSELoss criterion(torch::nn::MSELossOptions().reduction(torch::kSum));
  std::printf("%.4f\n", epoch_of_sums(net, sgd, criterion));
}

// A batch's loss printed in other forms: through item()'s c10::Scalar, or a copy made earlier
// in the iteration (combined at the print); a loss summed over time steps into a tensor that
// began as zeros (its kind cannot be told: warned); a print under a branch on this process's
// own loss (a collective there would hang: warned, left as it is).
void printed_forms() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  for (auto &b : *data) {
    sgd.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    sgd.step();
    const float copy = loss.item<float>();
    std::printf("%.4f %.4f %.4f\n", loss.item().toFloat(), loss.item().toDouble(), copy);
    // CHECK-FIXES: accelerator.printf("%.4f %.4f %.4f\n", accelerator.reduce(loss.item().toFloat(), "mean"), accelerator.reduce(loss.item().toDouble(), "mean"), accelerator.reduce(copy, "mean"));
    torch::Tensor over_time = torch::zeros({});
    for (int t = 0; t < 2; ++t) {
      over_time = over_time + net(b.data).pow(2).mean();
    }
    std::printf("%.4f\n", over_time.item<float>());
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:27: warning: this prints a value of this process's batch that accel-reduce cannot classify{{.*}} [accel-reduce]
    if (loss.item<float>() > 0.5f) {
      std::printf("spike %.4f\n", loss.item<float>());
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:35: warning: this value is one process's share, but accelerator.reduce here would run on some processes only (the branch asks which process this is, or depends on this process's batches){{.*}} [accel-reduce]
      // CHECK-FIXES: accelerator.printf("spike %.4f\n", loss.item<float>());
    }
  }
}

// The safety net: values the loop changes from this process's batches in ways no rule above
// follows (a count per class in a container, an element of a tensor, a helper's reference
// parameter, a lambda called per batch, a list concatenated, a global) are printed as they
// are, each with a warning. The model's weights, changed every step alike, are not.
int64_t g_seen = 0;
void add_into(double &sum, double value) { sum += value; }
void changed_where_not_followed() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  std::vector<int64_t> per_class(2, 0);
  torch::Tensor stats = torch::zeros({2});
  torch::Tensor confusion = torch::zeros({2, 2});
  torch::Tensor weighted = torch::zeros({});
  std::vector<torch::Tensor> kept;
  double by_helper = 0, by_lambda = 0;
  auto record = [&](const torch::Tensor &loss) { by_lambda += loss.item<double>(); };
  for (auto &b : *data) {
    sgd.zero_grad();
    auto out = net(b.data);
    auto loss = out.pow(2).mean();
    loss.backward();
    sgd.step();
    per_class[out.argmax(1)[0].item<int64_t>()] += 1;
    stats[0] += loss.detach() * b.data.size(0);
    confusion.index_put_({out.argmax(1), out.argmin(1)}, torch::ones({4}), true);
    weighted.add_(loss.detach(), b.data.size(0));
    kept.push_back(loss.detach());
    add_into(by_helper, loss.item<double>());
    record(loss);
    g_seen += b.data.size(0);
  }
  std::printf("%lld\n", static_cast<long long>(per_class[0]));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:48: warning: 'per_class' is changed from this process's batches (line {{[0-9]+}}) in a way accel-reduce does not follow, so what is printed here is this process's share only; combine it with accelerator.reduce(value, "sum") (counts and per-sample sums) or "mean" (sums of per-batch means) by hand, or keep it as a plain local running sum (`total += loss.item<double>() * n;`), which accel-reduce combines [accel-reduce]
  std::cout << stats << '\n';
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:16: warning: 'stats' is changed from this process's batches {{.*}} [accel-reduce]
  std::cout << confusion << '\n';
  // Counted in place (index_put_ with accumulate): a sum of counts, combined.
  // CHECK-FIXES: accelerator.print() << accelerator.reduce(confusion, "sum") << '\n';
  std::cout << weighted << '\n';
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:16: warning: 'weighted' is kept over this process's batches, but it is computed from this process's batches in a way accel-reduce does not follow {{.*}} [accel-reduce]
  auto all = torch::stack(kept);
  std::cout << all << '\n';
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:16: warning: 'all' is made from 'kept', which is changed from this process's batches (line {{[0-9]+}}) {{.*}} [accel-reduce]
  std::printf("%.4f\n", by_helper);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'by_helper' is changed from this process's batches {{.*}} [accel-reduce]
  std::printf("%.4f\n", by_lambda);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:25: warning: 'by_lambda' is changed from this process's batches {{.*}} [accel-reduce]
  std::printf("%lld\n", static_cast<long long>(g_seen));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:48: warning: 'g_seen' is changed from this process's batches {{.*}} [accel-reduce]
  std::cout << net->weight << '\n';
  // CHECK-FIXES: {{^}}  accelerator.print() << net->weight << '\n';
}

// A batch's value printed through a helper's parameter, a text buffer that snprintf fills or a
// string stream, and a per-sample loss's largest and smallest values: combined where the value
// is taken ("max" and "min" for the extremes). A count that a helper keeps through a reference
// parameter is warned about where it is printed.
void print_step(int step, double loss) { std::printf("step %d loss %.4f\n", step, loss); }
// CHECK-FIXES: void print_step(accelerate::Accelerator &accelerator, int step, double loss) { accelerator.printf("step %d loss %.4f\n", step, loss); }
template <typename Loader>
double count_into(torch::nn::Linear &net, Loader &loader, torch::optim::Optimizer &opt,
                  int64_t &samples) {
  double sum = 0;
  for (auto &b : loader) {
    opt.zero_grad();
    auto loss = net(b.data).pow(2).mean();
    loss.backward();
    opt.step();
    sum += loss.item().toDouble() * b.data.size(0);
    samples += b.data.size(0);
  }
  return sum;
}
void printed_elsewhere() {
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto data = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  int step = 0;
  for (auto &b : *data) {
    sgd.zero_grad();
    auto per_sample = net(b.data).pow(2).mean(1);
    auto loss = per_sample.mean();
    loss.backward();
    sgd.step();
    print_step(step++, loss.item<double>());
    // CHECK-FIXES: print_step(accelerator, step++, accelerator.reduce(loss.item<double>(), "mean"));
    char line[64];
    std::snprintf(line, sizeof line, "loss %.4f", loss.item<double>());
    // CHECK-FIXES: std::snprintf(line, sizeof line, "loss %.4f", accelerator.reduce(loss.item<double>(), "mean"));
    std::puts(line);
    // CHECK-FIXES: accelerator.print(line);
    std::ostringstream text;
    text << "worst " << per_sample.max().item<float>() << " best " << per_sample.min().item<float>();
    // CHECK-FIXES: text << "worst " << accelerator.reduce(per_sample.max().item<float>(), "max") << " best " << accelerator.reduce(per_sample.min().item<float>(), "min");
    std::cout << text.str() << '\n';
  }
  int64_t samples = 0;
  const double sum = count_into(net, *data, sgd, samples);
  std::printf("%.4f %lld\n", sum, static_cast<long long>(samples));
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:58: warning: 'samples' is changed by 'count_into' (its parameter 'samples') from this process's batches (line {{[0-9]+}}) in a way accel-reduce does not follow{{.*}} [accel-reduce]
}

int main() {
  torch::nn::Linear model(4, 2);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  auto eval_loader = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  double running_loss = 0;
  double batch_means = 0;
  int64_t seen = 0;
  int64_t correct = 0;
  int steps = 0;
  double unclassified = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    running_loss = 0;
    // CHECK-FIXES: running_loss = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto output = model(batch.data);
      auto loss = output.pow(2).mean();
      loss.backward();
      optimizer.step();
      running_loss += loss.item<double>() * batch.data.size(0);
      // CHECK-FIXES: running_loss += loss.item<double>() * batch.data.size(0);
      batch_means += loss.item<double>();
      seen += batch.data.size(0);
      correct += output.argmax(1).eq(0).sum().item<int64_t>();
      ++steps;
      unclassified += 0.5;
      if (steps % 2 == 0) {
        std::printf("[%lld/%d] loss %.3f\n", static_cast<long long>(seen), 32, running_loss / seen);
        // CHECK-FIXES: accelerator.printf("[%lld/%d] loss %.3f\n", static_cast<long long>(accelerator.reduce(seen, "sum")), 32, accelerator.reduce(running_loss, "sum") / accelerator.reduce(seen, "sum"));
        // The batch's own loss, printed: the global batch's mean.
        std::cout << "batch loss " << loss.item<double>() << '\n';
        // CHECK-FIXES: accelerator.print() << "batch loss " << accelerator.reduce(loss.item<double>(), "mean") << '\n';
      }
      // Not printed: left as this process's value.
      double local = loss.item<double>();
      // CHECK-FIXES: double local = loss.item<double>();
      (void)local;
    }
    std::printf("epoch %d mean %.4f correct %lld steps %d other %.1f\n", epoch, batch_means / steps,
                static_cast<long long>(correct), steps, unclassified);
    // CHECK-FIXES: accelerator.printf("epoch %d mean %.4f correct %lld steps %d other %.1f\n", epoch, accelerator.reduce(batch_means, "mean") / steps,
    // CHECK-FIXES-NEXT: static_cast<long long>(accelerator.reduce(correct, "sum")), steps, unclassified);
  }
  double eval_loss = 0;
  for (auto &batch : *eval_loader) {
    eval_loss += model(batch.data).pow(2).sum().item<double>();
  }
  std::printf("eval %.4f epoch %.4f\n", eval_loss, train_epoch(model, *loader, optimizer));
  partly_ported(model);
  book_style();
  in_place(4);
  last_batch();
  clipped_norms();
  tensor_sums();
  scaled_after_read();
  history_and_resets();
  held_elsewhere();
  not_followed();
  evaluated();
  returned_by_step();
  gradient_norm();
  selected();
  scalar_conversion();
  validates_inside();
  logged_by_lambda();
  // CHECK-FIXES: accelerator.printf("eval %.4f epoch %.4f\n", eval_loss, train_epoch(accelerator, model, *loader, optimizer));
  printed_forms();
  sums_by_the_callers_criterion();
  changed_where_not_followed();
  printed_elsewhere();
}
