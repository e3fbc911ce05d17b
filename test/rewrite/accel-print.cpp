// accel-print: in functions with the accelerator, std::cout -> accelerator.print(), printf and
// fprintf(stdout, ...) -> accelerator.printf, puts, fputs and putchar to standard output ->
// accelerator.print, so that each line is printed once per job; helpers that print
// get the accelerator (accel-accelerator); standard error is left alone.
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only -Wall -Wformat -Werror %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp
// RUN: %accel-rewrite --rules=-print,-training-loop %t/input.cpp -o %t/without.cpp -- %torch_flags
// RUN: FileCheck %s --check-prefix=WITHOUT --input-file=%t/without.cpp
// WITHOUT: std::cout << "loss " << loss.item<float>() << std::endl;

#include <torch/torch.h>

#include <cstdio>
#include <iomanip>
#include <iostream>
#include <string>

// Called from main: gets the accelerator and prints once.
void log_line(const std::string &text) { std::cout << text << '\n'; }
// CHECK-FIXES: void log_line(accelerate::Accelerator &accelerator, const std::string &text) { accelerator.print() << text << '\n'; }

// Called from nowhere in this file: left as it is.
void usage() { std::cout << "usage: train\n"; }
// CHECK-FIXES: void usage() { std::cout << "usage: train\n"; }

int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loss = model(torch::randn({2, 4})).sum();
  loss.backward();
  std::cout << "loss " << loss.item<float>() << std::endl;
  // CHECK-FIXES: accelerator.print() << "loss " << loss.item<float>() << std::endl;
  std::cout << std::fixed << std::setprecision(3);
  // CHECK-FIXES: accelerator.print() << std::fixed << std::setprecision(3);
  std::printf("step %d\n", 1);
  // CHECK-FIXES: accelerator.printf("step %d\n", 1);
  int written = printf("%s\n", "plain printf");
  // CHECK-FIXES: int written = accelerator.printf("%s\n", "plain printf");
  std::cerr << "errors stay on every process " << written << std::endl;
  // CHECK-FIXES: std::cerr << "errors stay on every process " << written << std::endl;
  std::fprintf(stderr, "and so does stderr\n");
  // CHECK-FIXES: std::fprintf(stderr, "and so does stderr\n");
  log_line("done");
  // CHECK-FIXES: log_line(accelerator, "done");
  // The other ways C writes to standard output; what puts returns, read, is left (warned).
  puts("epoch done");
  // CHECK-FIXES: accelerator.print("epoch done");
  std::puts("twice");
  // CHECK-FIXES: accelerator.print("twice");
  std::fputs(written > 0 ? "no newline" : "none", stdout);
  // CHECK-FIXES: accelerator.print() << (written > 0 ? "no newline" : "none");
  putchar('\n');
  // CHECK-FIXES: accelerator.print() << '\n';
  std::fputc(written, stdout);
  // CHECK-FIXES: accelerator.print() << static_cast<char>(written);
  fprintf(stdout, "loss %.3f\n", loss.item<float>());
  // CHECK-FIXES: accelerator.printf("loss %.3f\n", loss.item<float>());
  if (puts("checked") < 0) {
    // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:7: warning: this writes to standard output on every process, and what it returns is read, so accel-print leaves it; print the text with accelerator.print() << text (the main process only) by hand [accel-print]
    return 1;
  }
}
