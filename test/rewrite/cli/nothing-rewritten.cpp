// A program none of whose training can be rewritten is left byte for byte as written, its
// prints and file writes included: guarding them alone would hide that every process still
// trains the whole model on all the data. Here the only training loop is in a helper handed
// `&optimizer` to train and `nullptr` to evaluate, an optimizer the tool cannot follow.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: cmp %t/input.cpp %t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:

#include <torch/torch.h>

#include <cstdio>
#include <fstream>

using Data = torch::data::datasets::TensorDataset;
using Stack = torch::data::transforms::Stack<torch::data::TensorExample>;
using Loader = torch::data::StatelessDataLoader<torch::data::datasets::MapDataset<Data, Stack>,
                                                torch::data::samplers::RandomSampler>;

double run_epoch(torch::nn::Linear &model, Loader &loader, torch::optim::Optimizer *optimizer) {
  double total = 0;
  int64_t batches = 0;
  for (auto &batch : loader) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this training is left as written, with its setup and helpers {{.*}}cannot tell which optimizer a call of 'run_epoch' passes as 'optimizer'{{.*}} [accel-training-loop]
    auto loss = model(batch.data).pow(2).mean();
    if (optimizer) {
      optimizer->zero_grad();
      loss.backward();
      optimizer->step();
    }
    total += loss.item<double>();
    ++batches;
  }
  return total / batches;
}

int main() {
  torch::manual_seed(0);
  std::ofstream("data.csv") << "x\n";
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file write {{.*}}the tool did not guard it: the training of 'main' is left as written{{.*}} [accel-file-write]
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto train = torch::data::make_data_loader(Data(torch::randn({16, 4})).map(Stack()), 4);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:16: warning: data loader 'train' feeds training in 'run_epoch', whose parameter names LibTorch's loader type{{.*}} [accel-data-loader]
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::printf("epoch %d loss %.4f\n", epoch, run_epoch(model, *train, &optimizer));
  }
  std::printf("eval %.4f\n", run_epoch(model, *train, nullptr));
}
