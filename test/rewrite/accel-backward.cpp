// accel-backward: loss.backward(...) and torch::autograd::backward({loss}) become
// accelerator.backward(loss, ...) where the accelerator is in scope; elsewhere a warning.
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// Its own output is a fixed point.
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp
// Only this rule (and the include and Accelerator it needs):
// RUN: %accel-rewrite --rules=backward %t/input.cpp -o %t/only.cpp -- %torch_flags 2>/dev/null
// RUN: FileCheck %s --check-prefix=ONLY --input-file=%t/only.cpp
// ONLY: #include <accelerate/accelerate.h>
// ONLY: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
// ONLY-NOT: accelerator.prepare
// ONLY: accelerator.backward(loss);
// ONLY: torch::save(model, "model.pt");

#include <torch/torch.h>

#include <memory>
#include <string>

// Another type with a backward() member is untouched.
struct Pass {
  void backward() {}
};

#define BACKWARD(t) t.backward()

void helper(torch::Tensor loss) {
  loss.backward();
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: backward in 'helper', which has no accelerator: add a parameter 'accelerate::Accelerator& accelerator' to it, pass the accelerator in, and call accelerator.backward(loss) [accel-backward]
}

int main() {
  torch::nn::Linear model(4, 1);
  // CHECK-FIXES: int main() {
  // CHECK-FIXES-NEXT: accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  // CHECK-FIXES-NEXT: torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::Tensor loss = model(torch::randn({2, 4})).sum();
  torch::Tensor grad = torch::ones({});
  loss.backward();
  // CHECK-FIXES: accelerator.backward(loss);
  loss.backward(grad, /*retain_graph=*/true);
  // CHECK-FIXES: accelerator.backward(loss, grad, /*retain_graph=*/true);
  (loss * 2).backward();
  // CHECK-FIXES: accelerator.backward(loss * 2);
  torch::Tensor *pointer = &loss;
  pointer->backward();
  // CHECK-FIXES: accelerator.backward(*pointer);
  auto owned = std::make_unique<torch::Tensor>(loss);
  owned->backward();
  // CHECK-FIXES: accelerator.backward(*owned);
  torch::autograd::backward({loss});
  // CHECK-FIXES: accelerator.backward(loss);
  torch::autograd::backward({loss}, {grad});
  // CHECK-FIXES: accelerator.backward(loss, grad);
  loss.backward({}, true, false, std::vector<torch::Tensor>{loss});
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: this backward call has arguments accelerator.backward does not take {{.*}} [accel-backward]
  // CHECK-FIXES: loss.backward({}, true, false, std::vector<torch::Tensor>{loss});
  BACKWARD(loss);
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:3: warning: not rewritten: this is inside the expansion of macro 'BACKWARD'; make the edit by hand {{.*}} [accel-backward]
  // CHECK-FIXES: BACKWARD(loss);
  Pass pass;
  pass.backward();
  // CHECK-FIXES: pass.backward();
  std::string text = "loss.backward()"; // loss.backward() in a comment
  // CHECK-FIXES: std::string text = "loss.backward()"; // loss.backward() in a comment
  auto step = [&] { loss.backward(); };
  // CHECK-FIXES: auto step = [&] { accelerator.backward(loss); };
  auto by_copy = [loss] { loss.backward(); };
  // CHECK-MESSAGES: input.cpp:[[@LINE-1]]:27: warning: backward in a lambda, which has no accelerator{{.*}} [accel-backward]
  step();
  by_copy();
  optimizer.step();
  torch::save(model, "model.pt");
}
