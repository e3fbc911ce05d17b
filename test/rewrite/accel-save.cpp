// accel-save: torch::save(value, path) -> accelerator.save(value, path) where the accelerator
// is in scope; streams and functions without the accelerator get a warning.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %accel-rewrite %t/input.cpp --rules=-save -o %t/without.cpp -- %torch_flags 2>/dev/null
// RUN: FileCheck %s --check-prefix=WITHOUT --input-file=%t/without.cpp
// WITHOUT: torch::save(model, "model.pt");
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <numeric>
#include <vector>

#include <fstream>
#include <sstream>
#include <string>

// A helper that saves, called from the setup function: accel-accelerator passes the
// accelerator in.
void checkpoint(torch::nn::Linear model) {
  torch::save(model, "checkpoint.pt");
}
// CHECK-FIXES: void checkpoint(accelerate::Accelerator &accelerator, torch::nn::Linear model) {
// CHECK-FIXES-NEXT: accelerator.save(model, "checkpoint.pt");

// Called from nowhere in this file: left alone, with a warning.
void export_model(torch::nn::Linear model) {
  torch::save(model, "exported.pt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: torch::save in 'export_model', which has no accelerator: every process would write the file; pass 'accelerate::Accelerator& accelerator' in and call accelerator.save(value, path) [accel-save]
}

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::Adam optimizer(model->parameters());
  std::string path = "optimizer.pt";
  torch::save(model, "model.pt");
  // CHECK-FIXES: accelerator.save(model, "model.pt");
  torch::save(optimizer, path);
  // CHECK-FIXES: accelerator.save(optimizer, path);
  torch::save(model, path + ".bak");
  // CHECK-FIXES: accelerator.save(model, path + ".bak");
  // Into memory: each process keeps (and later restores) its own snapshot; left alone.
  std::ostringstream stream;
  torch::save(model, stream);
  // CHECK-FIXES: torch::save(model, stream);
  std::ofstream file("model.bin", std::ios::binary);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: every process runs this file write {{.*}} [accel-file-write]
  torch::save(model, file);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: torch::save to a stream or with extra arguments: run it on the main process only, inside 'if (accelerator.is_main_process())' [accel-save]
  // CHECK-FIXES: torch::save(model, file);
  checkpoint(model);
  // CHECK-FIXES: checkpoint(accelerator, model);
  // A new best batch loss saved at once: each process decides on its own batch, so neither
  // accelerator.save (which waits for every process) nor every process writing is right.
  auto loader = torch::data::make_data_loader(
      torch::data::datasets::TensorDataset(torch::randn({8, 4}))
          .map(torch::data::transforms::Stack<torch::data::TensorExample>()),
      2);
  double best = 1e9;
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
    if (loss.item<double>() < best) {
      torch::save(model, "best.pt");
      // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: torch::save under a branch on a value of this process's batches{{.*}} [accel-save]
      // CHECK-FIXES: {{^}}      torch::save(model, "best.pt");
    }
  }
  // The same decided after the loop on values kept in a container (each process's own
  // batches' losses): warned, not made a save that waits for every process.
  std::vector<double> losses;
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = model(batch.data).pow(2).mean();
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: a value of this process's batch goes into 'losses'{{.*}} [accel-reduce]
  }
  double mean_loss = std::accumulate(losses.begin(), losses.end(), 0.0) / losses.size();
  if (mean_loss < best) {
    torch::save(model, "best_epoch.pt");
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:5: warning: torch::save under a branch on a value of this process's batches{{.*}} [accel-save]
  }
  // Already on one process: as it is.
  if (model->weight.size(0) > 0) {
    torch::save(model, "last.pt");
    // CHECK-FIXES: accelerator.save(model, "last.pt");
  }
}
