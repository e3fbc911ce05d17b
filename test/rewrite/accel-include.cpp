// accel-include: #include <accelerate/accelerate.h> once, right after the last #include of
// the include block, only in a file that other rules edit.
// Its loops train on no loader: accel-training-loop, which declines such loops, is left out
// here and tested in accel-training-loop.cpp.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite --rules=-training-loop %t/input.cpp -o %t/out.cpp -- %torch_flags
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --input-file=%t/out.cpp
// CHECK-FIXES: #include <vector>
// CHECK-FIXES-NEXT: #include <accelerate/accelerate.h>
// CHECK-FIXES-EMPTY:
// CHECK-FIXES-NEXT: // A comment after the include block stays where it is.
// CHECK-FIXES-NOT: #include <accelerate/accelerate.h>
//
// Nothing else to edit, nothing included (the Accelerator is not added either).
// RUN: %accel-rewrite --rules=include,accelerator %t/input.cpp -o %t/alone.cpp -- %torch_flags
// RUN: diff %t/input.cpp %t/alone.cpp
//
// Already included: a second run adds nothing.
// RUN: %accel-rewrite --rules=-training-loop %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#ifndef NDEBUG
#include <cassert>
#endif
#include <vector>

// A comment after the include block stays where it is.
int main() {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  model(torch::randn({2, 4})).sum().backward();
}
