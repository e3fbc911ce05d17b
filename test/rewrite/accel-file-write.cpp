// accel-file-write: in a file that trains, a file write, rename or removal that every process
// would run is run on the main process only, between two wait_for_everyone() calls, where
// nothing the other processes need happens in the guarded statement; a write in a helper is
// guarded where the helper is called. The others are warned about with the reason. Reads,
// writes already guarded, and files that do not train are left alone.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=accel-file-write %t/input.cpp -o %t/out.cpp -- %torch_flags -I%runtime_include 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// A second pass finds the writes guarded: nothing to change, nothing new to say.
// RUN: %accel-rewrite --rules=accel-file-write %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2> %t/again.txt
// RUN: diff %t/out.cpp %t/again.cpp
// RUN: grep -c warning: %t/again.txt | FileCheck %s --check-prefix=AGAIN
// AGAIN: {{^}}6{{$}}
// A file that does not train gets no warning.
// RUN: %accel-rewrite --rules=accel-file-write %S/cli/Inputs/file_write_only.cpp -o %t/only.cpp -- %torch_flags 2> %t/only.txt
// RUN: %not grep warning: %t/only.txt

#include <torch/torch.h>

#include <accelerate/accelerate.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

// A helper main calls once: guarded where it is called.
void write_csv(const std::string &path) {
  std::ofstream out(path);
  out << "x,y\n";
}

// Draws random numbers: guarded only when the generator is seeded again right after.
void write_noise(const std::string &path) {
  std::ofstream out(path);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: every process runs this file write {{.*}}: it is in 'write_noise', called at line [[@LINE+21]], where running line [[@LINE+21]] on the main process alone would not do: it draws random numbers (line [[@LINE+1]]), so the main process's random state would no longer match the others'; seeding again right after it (`torch::manual_seed(...)`) lets the tool guard it. {{.*}} [accel-file-write]
  out << torch::randn({4}) << "\n";
}

// Called from a lambda: the tool cannot tell how often that runs.
void write_log(const std::string &path) {
  std::ofstream out(path);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: every process runs this file write {{.*}} the tool did not guard it: it is in 'write_log', called at line [[@LINE+13]], where it is in a lambda. Run it on the main process only, `if (accelerator.is_main_process()) { ... }`, with `accelerator.wait_for_everyone();` before any process reads the file [accel-file-write]
  out << "log\n";
}

int main() {
  accelerate::Accelerator accelerator;
  write_csv("data.csv");
  // CHECK-FIXES: {{^}}  accelerator.wait_for_everyone();{{$}}
  // CHECK-FIXES-NEXT: {{^}}  if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    write_csv("data.csv");{{$}}
  // CHECK-FIXES-NEXT: {{^}}  }{{$}}
  // CHECK-FIXES-NEXT: {{^}}  accelerator.wait_for_everyone();{{$}}
  std::ifstream in("data.csv"); // a read: left alone
  auto log_later = [&] { write_log("log.txt"); };
  write_noise("noise.txt");
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader(
      torch::data::datasets::TensorDataset(torch::randn({16, 4}))
          .map(torch::data::transforms::Stack<torch::data::TensorExample>()),
      4);
  double total = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto &batch : *loader) {
      accelerator.zero_grad(optimizer);
      auto loss = model(batch.data).mean();
      accelerator.backward(loss);
      accelerator.step(optimizer);
      total += loss.item<double>();
    }
    std::ofstream epoch_log("epoch.txt");
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:19: warning: every process runs this file write {{.*}}: running line [[@LINE-9]] on the main process alone would not do: it calls on the accelerator (line [[@LINE-7]]), which every process must do together. {{.*}} [accel-file-write]
  }
  // A statement the rest of main does not need, in a block of its own: the block becomes the
  // main-process branch.
  {
    std::ofstream report("report.txt");
    report << "done\n";
  }
  // CHECK-FIXES: {{^}}  accelerator.wait_for_everyone();{{$}}
  // CHECK-FIXES-NEXT: {{^}}  if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    std::ofstream report("report.txt");{{$}}
  // CHECK-FIXES-NEXT: {{^}}    report << "done\n";{{$}}
  // CHECK-FIXES-NEXT: {{^}}  }{{$}}
  // CHECK-FIXES-NEXT: {{^}}  accelerator.wait_for_everyone();{{$}}
  std::ofstream results("results.txt");
  results << total;
  // CHECK-MESSAGES: input.cpp:[[@LINE-2]]:17: warning: every process runs this file write {{.*}}: its result is a variable of 'main' that the code after it uses; put the writing in a block `{ ... }` or a function of its own. {{.*}} [accel-file-write]
  std::ofstream later;
  later.open("weights.txt");
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: every process runs this file write {{.*}}: running line [[@LINE-1]] on the main process alone would not do: it changes 'later' (line [[@LINE-1]]), which the other processes would then not have. {{.*}} [accel-file-write]
  FILE *config = std::fopen("config.txt", "r"); // a read: left alone
  std::remove("checkpoint.pt");
  // CHECK-FIXES: {{^}}  if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    std::remove("checkpoint.pt");{{$}}
  std::filesystem::rename("a.txt", "b.txt"); // after the removal
  // CHECK-FIXES: {{^}}  if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    std::filesystem::rename("a.txt", "b.txt"); // after the removal{{$}}
  // CHECK-FIXES-NEXT: {{^}}  }{{$}}
  if (accelerator.is_main_process()) {
    std::ofstream report("report.json"); // the main process only: left alone
    report << "{}";
  }
  std::fclose(config);
  log_later();
  // A loop every process runs alike (a sweep over values, a counted k-fold loop): the guard
  // goes inside it, around the write.
  std::vector<double> rates = {0.1, 0.2};
  for (double rate : rates) {
    write_csv("rate" + std::to_string(rate) + ".csv");
  }
  // CHECK-FIXES: {{^}}  for (double rate : rates) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    accelerator.wait_for_everyone();{{$}}
  // CHECK-FIXES-NEXT: {{^}}    if (accelerator.is_main_process()) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}      write_csv("rate" + std::to_string(rate) + ".csv");{{$}}
  // CHECK-FIXES-NEXT: {{^}}    }{{$}}
  // CHECK-FIXES-NEXT: {{^}}    accelerator.wait_for_everyone();{{$}}
  // CHECK-FIXES-NEXT: {{^}}  }{{$}}
  for (int fold = 0; fold < 3; ++fold) {
    write_csv("fold" + std::to_string(fold) + ".csv");
  }
  // CHECK-FIXES: {{^}}  for (int fold = 0; fold < 3; ++fold) {{{$}}
  // CHECK-FIXES-NEXT: {{^}}    accelerator.wait_for_everyone();{{$}}
  // A loop that may end at another step on another process goes whole, and here it changes
  // what the code after it reads.
  int left = 3;
  while (left > 0) {
    std::FILE *out = std::fopen("left.txt", "w");
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:22: warning: every process runs this file write {{.*}}: running line [[@LINE-2]] on the main process alone would not do: it changes 'left' (line [[@LINE+2]]), which the other processes would then not have. {{.*}} [accel-file-write]
    std::fclose(out);
    --left;
  }
  std::printf("%d\n", left);
}
