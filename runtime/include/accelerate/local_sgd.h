// Local SGD, as Accelerate's accelerate.local_sgd.LocalSGD: while a LocalSGD lives, the
// prepared models' gradients stay on their process (each process steps on its own batches),
// and every local_sgd_steps calls of step() the processes average their parameters; once
// more when it ends. Fewer, larger exchanges than an all-reduce per step: for a slow link or
// processes that drift apart in time. See docs/runtime.md, "LocalSGD".
#pragma once

#include "accelerate/accelerator.h"

#include <cstdint>

namespace accelerate {

class LocalSGD {
public:
  ///   {
  ///     accelerate::LocalSGD local_sgd(accelerator, model, /*local_sgd_steps=*/8);
  ///     for (auto &batch : *loader) {
  ///       accelerator.backward(loss);        // no gradient all-reduce
  ///       accelerator.step(optimizer);
  ///       local_sgd.step();                  // parameters averaged every 8 calls
  ///     }
  ///   }                                      // and once more here
  /// The models are named for code written for Python Accelerate; every prepared model is
  /// averaged. enabled = false makes it do nothing (gradients are all-reduced as usual).
  LocalSGD(Accelerator &accelerator, int local_sgd_steps, bool enabled = true);
  template <typename Model>
  LocalSGD(Accelerator &accelerator, Model & /*model*/, int local_sgd_steps, bool enabled = true)
      : LocalSGD(accelerator, local_sgd_steps, enabled) {}
  ~LocalSGD();
  LocalSGD(const LocalSGD &) = delete;
  LocalSGD &operator=(const LocalSGD &) = delete;

  /// Counts one step; every local_sgd_steps-th averages the parameters across the processes.
  void step();

private:
  Accelerator &accelerator_;
  int local_sgd_steps_;
  bool enabled_;
  int uncaught_; ///< exceptions in flight when it was made
  int64_t steps_ = 0;
};

} // namespace accelerate
