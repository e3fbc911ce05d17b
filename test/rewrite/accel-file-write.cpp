// accel-file-write: file writes, renames and removals that every process would run, in a file
// that trains, are warned about with the guard to write; nothing is edited. Reads, writes
// already guarded by the main process, and files that do not train are left alone.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=accel-file-write %t/input.cpp -o %t/out.cpp -- %torch_flags -I%runtime_include 2> %t/messages.txt
// RUN: diff %t/input.cpp %t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// A file that does not train gets no warning.
// RUN: %accel-rewrite --rules=accel-file-write %S/cli/Inputs/file_write_only.cpp -o %t/only.cpp -- %torch_flags 2> %t/only.txt
// RUN: %not grep warning: %t/only.txt

#include <torch/torch.h>

#include <accelerate/accelerate.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

// A helper every process calls: its write is every process's too.
void write_csv(const std::string &path) {
  std::ofstream out(path);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: every process runs this file write at the same time once the program is launched on several {{.*}}`if (accelerator.is_main_process()) { ... }`, and call `accelerator.wait_for_everyone();` before any process reads the file [accel-file-write]
  out << "x,y\n";
}

int main() {
  accelerate::Accelerator accelerator;
  write_csv("data.csv");
  std::ifstream in("data.csv"); // a read: left alone
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader(
      torch::data::datasets::TensorDataset(torch::randn({16, 4}))
          .map(torch::data::transforms::Stack<torch::data::TensorExample>()),
      4);
  for (auto &batch : *loader) {
    accelerator.zero_grad(optimizer);
    accelerator.backward(model(batch.data).mean());
    accelerator.step(optimizer);
  }
  std::ofstream later;
  later.open("weights.txt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file write {{.*}} [accel-file-write]
  FILE *log = std::fopen("log.txt", "a");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:15: warning: every process runs this file write {{.*}} [accel-file-write]
  FILE *config = std::fopen("config.txt", "r"); // a read: left alone
  std::remove("checkpoint.pt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file removal or rename {{.*}} [accel-file-write]
  std::filesystem::rename("a.txt", "b.txt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file removal or rename {{.*}} [accel-file-write]
  if (accelerator.is_main_process()) {
    std::ofstream report("report.json"); // the main process only: left alone
    report << "{}";
  }
  std::fclose(log);
  std::fclose(config);
}
