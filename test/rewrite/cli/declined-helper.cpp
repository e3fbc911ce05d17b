// A helper whose training is declined keeps its parameters, and the call to it is left as
// written; the caller (here main, which hosts the Accelerator) is rewritten as usual: its own
// loop is prepared and sharded. Only the helper's loop is left to the user, with its warning.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <iostream>
#include <vector>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;

// Fine-tunes on rows sliced by hand in a while loop: declined (every process would train on
// all of them).
double fine_tune(torch::nn::Linear &model, const torch::Tensor &rows) {
  // CHECK-FIXES: {{^}}double fine_tune(torch::nn::Linear &model, const torch::Tensor &rows) {
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  double last = 0;
  int64_t start = 0;
  while (start < rows.size(0)) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written{{.*}}come from a loop over no loader, which accel-rewrite cannot shard{{.*}} [accel-training-loop]
    auto x = rows.slice(0, start, start + 4);
    optimizer.zero_grad();
    auto loss = model(x).pow(2).mean();
    loss.backward();
    // CHECK-FIXES: {{^}}    loss.backward();
    optimizer.step();
    last = loss.item<double>();
    start += 4;
  }
  std::cout << "fine-tuned " << last << "\n";
  // CHECK-FIXES: {{^}}  std::cout << "fine-tuned " << last << "\n";
  return last;
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  // CHECK-FIXES: accelerator.prepare(model, optimizer);
  auto loader = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model(batch.data).pow(2).mean();
    loss.backward();
    // CHECK-FIXES: {{^}}    accelerator.backward(loss);
    optimizer.step();
  }
  std::cout << "trained\n";
  fine_tune(model, torch::randn({8, 4}));
  // CHECK-FIXES: {{^}}  fine_tune(model, torch::randn({8, 4}));
}
