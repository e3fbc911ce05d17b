// Mentions of backward that are no training: a comment (call loss.backward() yourself), a
// string, and an already rewritten call.
#pragma once
#include <accelerate/accelerate.h>
#include <torch/torch.h>

inline const char *hint() { return "then x.backward() computes the gradients"; }
inline void rewritten(accelerate::Accelerator &accelerator, torch::Tensor loss) {
  /* loss.backward(); */
  accelerator.backward(loss);
}
