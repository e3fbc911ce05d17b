// The state behind an Accelerator (kept out of the public header so that c10d never reaches
// users' code), split by what it is: the process and its job, the gradients and the step, and
// the objects the program prepared. Each part of the runtime takes the parts it works on; the
// checkpoint code (checkpoint.cpp) takes the process, the prepared objects and the step
// position, which are what it saves and what it needs to save them.
#pragma once

#include "accelerate/data_loader.h"
#include "accelerate/options.h"
#include "accelerate/state.h"
#include "grad_scaler.h"
#include "gradient_sync.h"
#include "mixed_precision.h"
#include "process_group.h"
#include "setting_checks.h"
#include "training_objects.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace accelerate::detail {

/// Who this process is in the job and how the job runs: set when the Accelerator is made.
struct ProcessState {
  ProcessInfo info;
  /// As resolved from the code and the environment (every optional set, every value checked):
  /// the one place the settings live.
  Options options;
  int accumulation_steps() const { return *options.gradient_accumulation_steps; }
  MixedPrecision mixed_precision() const { return parse_mixed_precision(options.mixed_precision); }

  torch::Device device = torch::kCPU;
  /// Null in a one-process job: nothing is communicated and nothing added to the step.
  std::shared_ptr<ProcessGroup> group;
};

/// What the program handed to prepare and prepare_data_loader, and the fp16 loss scaler: the
/// objects a checkpoint saves and restores.
struct PreparedObjects {
  /// Prepared models, optimizers and schedulers, held weakly, in the order of prepare
  /// (checkpoints refer to them by position among the live ones).
  TrainingObjects training;
  /// What the prepared loaders share with the Accelerator, their progress included.
  std::shared_ptr<LoaderContext> loader_context;
  std::unique_ptr<GradScaler> scaler; ///< under fp16 only
};

/// Where training is: saved in each process's part of a checkpoint.
struct StepPosition {
  int accumulation_step = 0; ///< steps since the last synchronised one
  int64_t global_step = 0;   ///< calls of backward
  /// A backward ran since the last synchronised step: its gradients wait for the optimizer,
  /// so zero_grad must keep them.
  bool unapplied_gradients = false;
  /// Optimizer steps of the run's Local SGD (Options::local_sgd_steps): a resumed run averages
  /// at the same steps as one that went through.
  int64_t local_sgd_steps_taken = 0;
};

/// The gradients' synchronisation and the step (Accelerator::accumulate, backward, step).
struct GradientState {
  /// One per prepared model of a multi-process job (models that share parameters share one);
  /// a sync whose parameters are all gone is dropped before the next use (live_syncs).
  std::vector<std::shared_ptr<GradientSync>> syncs;
  /// syncs, without those whose model died.
  std::vector<std::shared_ptr<GradientSync>> &live_syncs() {
    syncs.erase(
        std::remove_if(syncs.begin(), syncs.end(), [](const auto &sync) { return !sync->alive(); }),
        syncs.end());
    return syncs;
  }
  StepPosition position;
  /// accumulate() guards alive: outside every guard there is no accumulation cycle (a step
  /// written out once, or a loop rewritten by hand without one), so backward does not scale
  /// the loss and every step synchronises and steps.
  int open_accumulate_guards = 0;
  bool sync_gradients = true; ///< this training step communicates and steps
  /// Local SGD (local_sgd.h): for the whole run (Options::local_sgd_steps), or while LocalSGD
  /// scopes live; gradients then stay on their process.
  bool local_sgd_run = false;
  int local_sgd_scopes = 0;
  /// Whether backward communicates gradients now.
  bool communicates() const { return sync_gradients && !local_sgd_run && local_sgd_scopes == 0; }
  bool optimizer_stepped = false; ///< an optimizer stepped in this training step
  bool step_was_skipped = false;  ///< the latest step(optimizer) met an fp16 overflow
};

struct Runtime {
  ProcessState process;
  GradientState gradients;
  PreparedObjects prepared;
  /// Warns when a step bypasses what gradient accumulation or mixed precision need.
  std::shared_ptr<SettingChecks> setting_checks;
};

/// Averages the prepared models' parameters across the processes (Local SGD).
void average_parameters(Runtime &rt);

/// How many Accelerators exist in this process now (notebook_launcher refuses to fork then).
int live_accelerators();

} // namespace accelerate::detail
