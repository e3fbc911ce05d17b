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

// A scoped timer whose destructor prints: a destructor cannot get the accelerator (warned).
struct Timer {
  ~Timer() { std::cout << "timer done\n"; }
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:14: warning: this runs on every process, so its output appears once per process: a destructor cannot get the accelerator, and 'main' makes a 'Timer'; give it a flag set from accelerator.is_main_process() where it is made, and print only when the flag is set [accel-print]
};

// Its address is taken: the accelerator cannot be passed to it (warned).
void print_epoch(int epoch) { std::printf("epoch %d\n", epoch); }
// CHECK-MESSAGES: input.cpp:[[@LINE-1]]:31: warning: this runs on every process, so its output appears once per process: the accelerator cannot be passed to 'print_epoch': its address is taken on line [[@LINE+25]], and calls through it would not pass the accelerator; print where it is called, with accelerator.print() [accel-print]

// Called from a lambda that captures the accelerator: gets it too.
void print_value(int value) { std::cout << value << '\n'; }
// CHECK-FIXES: void print_value(accelerate::Accelerator &accelerator, int value) { accelerator.print() << value << '\n'; }

int main() {
  // Lambdas that print get the accelerator among their captures; one converted to a function
  // pointer or held in a static variable cannot take it (warned).
  auto banner = [](const char *text) { std::cout << text << '\n'; };
  // CHECK-FIXES: auto banner = [&accelerator](const char *text) { accelerator.print() << text << '\n'; };
  int every = 2;
  auto every_line = [every](int step) { if (step % every == 0) std::printf("step %d\n", step); };
  // CHECK-FIXES: auto every_line = [every, &accelerator](int step) { if (step % every == 0) accelerator.printf("step %d\n", step); };
  auto copied = [=](int step) { print_value(step + every); };
  // CHECK-FIXES: auto copied = [=, &accelerator](int step) { print_value(accelerator, step + every); };
  void (*plain)(int) = [](int step) { std::cout << step << '\n'; };
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:39: warning: this runs on every process, so its output appears once per process: a lambda cannot capture the accelerator when it is converted to a function pointer, as on line [[@LINE-1]]; print where it is called, with accelerator.print() [accel-print]
  static auto once = [](int step) { std::cout << step << '\n'; };
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:37: warning: this runs on every process, so its output appears once per process: a lambda cannot capture the accelerator when it is held in a static variable; print where it is called, with accelerator.print() [accel-print]
  banner("start");
  every_line(2);
  copied(3);
  plain(4);
  once(5);
  void (*report)(int) = print_epoch;
  report(1);
  Timer timer;
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
