// A file in Google style (two-space indentation, ` public:` one space in): code the tool wraps
// in a guard is indented two spaces deeper, not one. The weights are written through an
// OutputArchive's save_to(file name), a file write like torch::save: in a helper, the call is
// run on the main process; written in main beside the archive it fills, it is warned about.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --strict-whitespace --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <string>

class Model : public torch::nn::Module {
 public:
  Model() { fc_ = register_module("fc", torch::nn::Linear(4, 1)); }
  torch::Tensor Forward(const torch::Tensor& x) { return fc_->forward(x); }

 private:
  torch::nn::Linear fc_{nullptr};
};

void SaveWeights(const torch::nn::Module& model, const std::string& path) {
  torch::serialize::OutputArchive archive;
  model.save(archive);
  archive.save_to(path);
}

int main() {
  auto model = std::make_shared<Model>();
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::ones({8, 4})), 2);
  for (auto& batch : *loader) {
    optimizer.zero_grad();
    model->Forward(batch[0].data).sum().backward();
    optimizer.step();
  }
  SaveWeights(*model, "weights.pt");
  // CHECK-FIXES: {{^}}  if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    SaveWeights(*model, "weights.pt");{{$}}
  // CHECK-FIXES-NEXT: {{^}}  }{{$}}
  torch::serialize::OutputArchive archive;
  model->save(archive);
  archive.save_to("again.pt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file write at the same time {{.*}} it changes 'archive' {{.*}} [accel-file-write]
}
