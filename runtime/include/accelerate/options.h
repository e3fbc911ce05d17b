// Settings of an Accelerator. Each can also come from the environment that `accel launch`
// sets (ACCELERATE_*), which a value given here overrides.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace accelerate {

/// fp16's loss scaling (PyTorch's GradScaler defaults): the loss is multiplied by `init_scale`
/// before backward; a step whose gradients overflow is skipped and the scale multiplied by
/// `backoff_factor`; after `growth_interval` clean steps in a row it grows by `growth_factor`.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

/// PowerSGD's settings (Options::comm_hook = "powersgd"), named as DDP's PowerSGDState and
/// with its defaults (docs/runtime.md "Gradient compression").
struct PowerSgdOptions {
  /// r: each gradient matrix travels as two factors of r columns (rows × r and cols × r).
  /// Env: ACCELERATE_POWERSGD_RANK. Default 1.
  std::optional<int> matrix_approximation_rank;
  /// Synchronising steps summed uncompressed before compression starts (early training is
  /// the most sensitive to it). Env: ACCELERATE_POWERSGD_START_ITER. Default 1000.
  std::optional<int> start_powersgd_iter;
  /// A matrix is compressed only when its factors take less than 1/this of it.
  double min_compression_rate = 2.0;
  /// Add what earlier approximations missed to the next step's gradient.
  bool use_error_feedback = true;
  /// Start each step's power iteration from the last step's factor instead of random values.
  bool warm_start = true;
  /// Seeds the first factors (the same on every process).
  unsigned long long random_seed = 0;
};

struct Options {
  /// Options that keep the run on the CPU (cpu = true), also where CUDA is available: what
  /// accel-rewrite gives a program that never places anything on a device, whose tensors
  /// would otherwise meet a model moved to the GPU.
  static Options on_cpu() {
    Options options;
    options.cpu = true;
    return options;
  }

  /// "gloo", "nccl" or "" (choose: NCCL on CUDA, Gloo on CPU). Env: ACCELERATE_BACKEND.
  std::string backend;
  /// Train on the CPU even when CUDA is available. Env: ACCELERATE_USE_CPU=true.
  std::optional<bool> cpu;
  /// Rendezvous and collective timeout. Env: ACCELERATE_TIMEOUT (seconds). Default 30 min.
  std::optional<std::chrono::milliseconds> timeout;
  /// Steps whose gradients are summed locally before one synchronised optimizer step; see
  /// Accelerator::accumulate. Env: ACCELERATE_GRADIENT_ACCUMULATION_STEPS. Default 1.
  std::optional<int> gradient_accumulation_steps;
  /// Gradient bucket size for the all-reduce (DDP's bucket_cap_mb): larger buckets mean fewer
  /// collectives, smaller ones start communicating earlier in backward.
  double bucket_cap_mb = 25.0;
  /// The first bucket is smaller so that communication starts as early as possible.
  double first_bucket_cap_mb = 1.0;
  /// Gradient compression for the all-reduce, as DDP's communication hooks
  /// (fp16_compress_hook, bf16_compress_hook, powerSGD_hook; Accelerate's
  /// DDPCommunicationHookType): "no", "fp16", "bf16" or "powersgd". fp16/bf16: each bucket of
  /// averaged gradients is rounded to that dtype, summed in it and widened back, halving the
  /// bytes on the wire. powersgd: each gradient matrix is summed as two low-rank factors, with
  /// error feedback (power_sgd). Both cost precision (docs/runtime.md "Gradient compression").
  /// "" takes ACCELERATE_COMM_HOOK, else "no".
  std::string comm_hook;
  PowerSgdOptions power_sgd;
  /// When every process runs on this machine and trains on the CPU, gradients are summed
  /// through shared memory instead of Gloo's loopback TCP (the same sums, several times faster
  /// for small models). false keeps them on the backend. Env: ACCELERATE_SHARED_MEMORY=false.
  /// Default true.
  std::optional<bool> shared_memory;
  /// Before every collective the processes also compare what they call: a reduce of a number
  /// or wait_for_everyone on one process where another calls something else then stops with
  /// each rank's call named, instead of a backend error or a hang (gather, reduce, broadcast
  /// and pad_across_processes compare theirs always). One small exchange per call. Env:
  /// ACCELERATE_DEBUG_MODE=true (accel launch --debug). Default false.
  std::optional<bool> debug;
  /// Raise glibc malloc's mmap and trim thresholds once per process (32 MiB, 1 GiB), so that
  /// the tensors a step frees are reused by the next instead of being unmapped and faulted in
  /// again (docs/runtime.md "Host memory"). Left alone when GLIBC_TUNABLES or MALLOC_*_ set
  /// them, or when malloc is not glibc's. Env: ACCELERATE_MALLOC_TUNING=false. Default true.
  std::optional<bool> tune_malloc;
  /// Prepared loaders give every process the same number of equal-size batches by wrapping
  /// the tail of the dataset around to its start (see gather_for_metrics).
  bool even_batches = true;
  /// Prepared loaders split every batch across the processes (Accelerate's
  /// DataLoaderConfiguration(split_batches=True)): the global batch is the loader's batch
  /// size B, and process r takes rows [r*B/N, (r+1)*B/N) of each, so together the processes
  /// see exactly the batches one process would. B must be a multiple of the number of
  /// processes. false: every process takes whole batches, every N-th one (global batch N*B).
  /// Env: ACCELERATE_SPLIT_BATCHES (accel launch --split_batches). Default false.
  std::optional<bool> split_batches;
  /// Local SGD for the whole run (as a LocalSGD around all of training, see local_sgd.h):
  /// gradients stay on their process and every local_sgd_steps optimizer steps the processes
  /// average their parameters. 0: off. Env: ACCELERATE_LOCAL_SGD_STEPS (accel launch
  /// --local_sgd_steps). Default 0.
  std::optional<int> local_sgd_steps;
  /// Every process continues from process 0's module buffers (BatchNorm's running statistics)
  /// after each step that synchronises gradients, as DDP's broadcast_buffers (default true)
  /// makes them process 0's before each forward pass; false lets each process keep its own
  /// (docs/runtime.md "Gradient synchronisation"). Models without buffers cost nothing.
  bool broadcast_buffers = true;
  /// "no", "bf16" or "fp16" (see Accelerator::autocast); "" takes ACCELERATE_MIXED_PRECISION,
  /// else "no".
  std::string mixed_precision;
  /// Loss scaling under fp16.
  GradScalerOptions grad_scaler;
  /// Where save_state() with no directory writes `checkpoints/checkpoint_<n>`, and where
  /// load_state() with none looks for the newest. Env: ACCELERATE_PROJECT_DIR. Default ".".
  std::string project_dir;
  /// How many automatically named checkpoints to keep (the oldest go first); 0 keeps all.
  int total_limit = 0;
};

} // namespace accelerate
