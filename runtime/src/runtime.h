// The state behind an Accelerator (kept out of the public header so that c10d never reaches
// users' code).
#pragma once

#include "accelerate/data_loader.h"
#include "accelerate/options.h"
#include "accelerate/state.h"
#include "grad_scaler.h"
#include "gradient_sync.h"
#include "mixed_precision.h"
#include "process_group.h"
#include "setting_checks.h"

#include <memory>
#include <vector>

namespace accelerate::detail {

struct Runtime {
  ProcessInfo info;
  /// As resolved from the code and the environment (every optional set, every value checked):
  /// the one place the settings live.
  Options options;
  int accumulation_steps() const { return *options.gradient_accumulation_steps; }
  MixedPrecision mixed_precision() const { return parse_mixed_precision(options.mixed_precision); }

  torch::Device device = torch::kCPU;
  /// Null in a one-process job: nothing is communicated and nothing added to the step.
  std::shared_ptr<ProcessGroup> group;
  std::vector<std::shared_ptr<GradientSync>> gradient_syncs;
  /// Prepared models, in the order of prepare (checkpoints refer to them by position).
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  std::shared_ptr<LoaderContext> loader_context;
  std::vector<torch::optim::Optimizer *> optimizers;
  std::vector<torch::optim::LRScheduler *> schedulers;

  // Gradient accumulation (Accelerator::accumulate).
  int accumulation_step = 0;      ///< steps since the last synchronised one
  bool sync_gradients = true;     ///< this training step communicates and steps
  bool optimizer_stepped = false; ///< an optimizer stepped in this training step
  /// A backward ran since the last synchronised step: its gradients wait for the optimizer,
  /// so zero_grad must keep them.
  bool unapplied_gradients = false;

  // Mixed precision.
  std::unique_ptr<GradScaler> scaler; ///< under fp16 only
  bool step_was_skipped = false;      ///< the latest step(optimizer) met an fp16 overflow

  int64_t global_step = 0; ///< calls of backward

  /// Warns when a step bypasses what gradient accumulation or mixed precision need.
  std::shared_ptr<SettingChecks> setting_checks;
};

/// How many Accelerators exist in this process now (notebook_launcher refuses to fork then).
int live_accelerators();

} // namespace accelerate::detail
