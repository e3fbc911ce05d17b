// accel-data-loader: the loader a training loop (one that calls backward) iterates is
// created by the accelerator; evaluation loaders stay as they are.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

using Data = torch::data::datasets::TensorDataset;

template <typename Loader> void consume(Loader &loader) {
  for (auto &batch : loader) {
    (void)batch;
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
  // CHECK-FIXES: auto defaults =
  // CHECK-FIXES-NEXT: accelerator.prepare_data_loader(Data(torch::randn({8, 4})), torch::data::DataLoaderOptions());
  auto eval = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-FIXES: auto eval = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  auto elsewhere = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:20: warning: data loader 'elsewhere' is not iterated by a loop here; if it feeds training, create it with accelerator.prepare_data_loader<Sampler>(dataset, options) so that each process gets its shard [accel-data-loader]
  std::unique_ptr<torch::data::StatelessDataLoader<Data, torch::data::samplers::RandomSampler>>
      spelled = torch::data::make_data_loader(Data(torch::randn({8, 4})), 2);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: data loader 'spelled' is declared with its type spelled out; declare it 'auto' {{.*}} [accel-data-loader]
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto &batch : *train) {
      optimizer.zero_grad();
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
  torch::NoGradGuard no_grad;
  for (auto &batch : *eval) {
    model(batch[0].data);
  }
  consume(*elsewhere);
}
