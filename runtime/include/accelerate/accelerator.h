// accelerate::Accelerator: the one object a training program adds to run data-parallel.
#pragma once

#include "accelerate/data_loader.h"
#include "accelerate/options.h"
#include "accelerate/state.h"

#include <torch/torch.h>

#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace accelerate {

class Accelerator;
namespace detail {
struct Runtime;
class RuntimeAccess;
} // namespace detail

/// Joins the job the launcher started (or runs as the only process when there is none),
/// places the model, synchronises gradients and shards data. See docs/runtime.md.
class Accelerator {
public:
  Accelerator();
  explicit Accelerator(const Options &options);
  ~Accelerator();
  Accelerator(const Accelerator &) = delete;
  Accelerator &operator=(const Accelerator &) = delete;

  /// The device this process trains on: cuda:LOCAL_RANK when CUDA is available, else CPU.
  torch::Device device() const;

  int process_index() const;
  int local_process_index() const;
  int num_processes() const;
  bool is_main_process() const { return process_index() == 0; }
  bool is_local_main_process() const { return local_process_index() == 0; }
  /// True when more than one process takes part.
  bool distributed() const { return num_processes() > 1; }
  /// How gradients are summed across processes: "shared memory" (CPU processes on one
  /// machine), else the backend with the reason shared memory is not used, e.g.
  /// "gloo (not shared memory: rank 2 runs on another machine than rank 0)"; "none (one
  /// process)".
  std::string gradient_transport() const;
  /// The gradient compression in use: "no", "fp16", "bf16" or "powersgd" (Options::comm_hook).
  const std::string &comm_hook() const;
  /// The settings in use: those given in code, the rest filled from the environment that
  /// `accel launch` sets, then the defaults (every optional field set).
  const Options &options() const;

  // ---- prepare -------------------------------------------------------------------------
  /// Moves the model to device(), makes every process start from process 0's parameters and
  /// buffers, and installs gradient synchronisation. Works in place on the user's objects;
  /// optimizers built before prepare keep pointing at the same (moved) parameters.
  /// Preparing an object again is harmless (the model is broadcast again; its gradients keep
  /// their one synchronisation), and prepared objects may die: a new model and optimizer per
  /// fold is fine. A newly prepared optimizer replaces an older one over the same parameters.
  /// See docs/runtime.md, "prepare".
  template <typename Model, typename... Rest> void prepare(Model &model, Rest &...rest) {
    prepare_one(model);
    (prepare_one(rest), ...);
  }

  /// Creates a data loader that gives this process its shard of every epoch: the same shuffle
  /// on every process, a new one each epoch, batches on device(). Takes what
  /// torch::data::make_data_loader takes.
  template <typename Sampler = torch::data::samplers::RandomSampler, typename Dataset>
  std::unique_ptr<ShardedDataLoader<Dataset, Sampler>>
  prepare_data_loader(Dataset dataset, torch::data::DataLoaderOptions options) {
    const auto size = dataset.size();
    TORCH_CHECK(size.has_value(), "accelerate: prepare_data_loader needs a sized dataset");
    Sampler sampler(*size);
    return std::make_unique<ShardedDataLoader<Dataset, Sampler>>(
        std::move(dataset), std::move(sampler), std::move(options), loader_context());
  }
  template <typename Sampler = torch::data::samplers::RandomSampler, typename Dataset>
  std::unique_ptr<ShardedDataLoader<Dataset, Sampler>> prepare_data_loader(Dataset dataset,
                                                                           size_t batch_size) {
    return prepare_data_loader<Sampler>(std::move(dataset),
                                        torch::data::DataLoaderOptions(batch_size));
  }
  template <typename Sampler, typename Dataset>
  std::unique_ptr<ShardedDataLoader<Dataset, Sampler>>
  prepare_data_loader(Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options) {
    return std::make_unique<ShardedDataLoader<Dataset, Sampler>>(
        std::move(dataset), std::move(sampler), std::move(options), loader_context());
  }

  /// A loader the program made itself (a factory function's torch::data::make_data_loader),
  /// as this process's share for a training loop:
  ///   auto loader = accelerator.prepare_data_loader(make_loader(dataset, 64));
  /// Every process runs the whole loader and keeps its batches (LoaderShard says how); prefer
  /// prepare_data_loader(dataset, options), which loads each process's batches only.
  template <typename Loader>
  std::unique_ptr<LoaderShard<Loader>> prepare_data_loader(std::unique_ptr<Loader> loader) {
    return std::make_unique<LoaderShard<Loader>>(std::move(loader), loader_context());
  }

  /// Batches the program made itself (a std::vector of tensors, of Examples, of pairs or
  /// tuples of tensors, of vectors of tensors), as this process's share for a training loop,
  /// each moved to device() as it is read:
  ///   for (auto &[x, y] : accelerator.prepare_batches(batches)) { ... }
  /// As a prepared loader shares its batches: batch k goes to process k % N (even_batches
  /// repeats the first batches until every process has as many), or with split_batches every
  /// process takes its rows of every batch (B/N each when N divides B). Keeps its own copy of
  /// the list (the tensors are shared).
  template <typename Batch> BatchShard<Batch> prepare_batches(std::vector<Batch> batches) {
    return BatchShard<Batch>(std::move(batches), loader_context());
  }

  /// A training loop that cuts its batches itself, by a counter, from tensors it holds whole:
  ///   for (int64_t i : accelerator.batch_range(0, n, batch_size)) {
  ///     auto idx = accelerator.batch_rows(perm.slice(0, i, std::min(i + batch_size, n)));
  /// batch_range(begin, end, step) gives the counter values this process runs, shared as a
  /// prepared loader shares its batches (iteration k to process k % N, with even_batches the
  /// first ones repeated until every process has as many; all of them under split_batches);
  /// batch_rows takes this process's rows of a batch under split_batches and returns it whole
  /// otherwise. At the end of each pass the CPU random generator is made process 0's on every
  /// process (BatchRange says why). The step must be positive.
  BatchRange batch_range(int64_t begin, int64_t end, int64_t step = 1) {
    return BatchRange(begin, end, step, loader_context());
  }
  torch::Tensor batch_rows(const torch::Tensor &batch);
  /// The same for a batch of several tensors taken from a list (an Example, a pair, a tuple, a
  /// vector of tensors): the same rows of each.
  template <typename Batch> Batch batch_rows(const Batch &batch) {
    const int64_t rows = detail::rows_of(batch);
    const std::pair<int64_t, int64_t> range = rows_of_this_process(rows);
    if (range.first == 0 && range.second == rows) {
      return batch;
    }
    detail::check_rows(batch, rows);
    return detail::slice_rows(batch, range.first, range.second);
  }

  // ---- training step -------------------------------------------------------------------
  /// Runs backward and completes the gradient all-reduce that started during it, so that
  /// optimizer.step() reads averaged gradients; with Options::broadcast_buffers, the prepared
  /// models' buffers are then process 0's on every process.
  void backward(const torch::Tensor &loss, const torch::Tensor &gradient = {},
                std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

  // ---- gradient accumulation and the optimizer step -------------------------------------
  /// Marks one training step inside an accumulation cycle of gradient_accumulation_steps:
  ///   for (auto& batch : *loader) {
  ///     auto guard = accelerator.accumulate(model);
  ///     accelerator.backward(loss);          // loss scaled by 1/N
  ///     accelerator.step(optimizer);         // steps only when sync_gradients()
  ///     accelerator.step(scheduler);
  ///     accelerator.zero_grad(optimizer);
  ///   }
  /// Gradients are communicated only on every N-th step and on the last batch of a prepared
  /// loader; on the others they accumulate locally. The models are named for code written
  /// for Python Accelerate; the cycle applies to every prepared model.
  class AccumulateGuard {
  public:
    explicit AccumulateGuard(Accelerator &accelerator);
    ~AccumulateGuard();
    AccumulateGuard(const AccumulateGuard &) = delete;
    AccumulateGuard &operator=(const AccumulateGuard &) = delete;
    AccumulateGuard(AccumulateGuard &&other) noexcept;
    AccumulateGuard &operator=(AccumulateGuard &&) = delete;

  private:
    Accelerator *accelerator_;
  };
  template <typename... Models> [[nodiscard]] AccumulateGuard accumulate(Models &...) {
    return AccumulateGuard(*this);
  }
  /// Whether this step communicates gradients and moves the optimizer (always true outside
  /// accumulate()).
  bool sync_gradients() const;
  int gradient_accumulation_steps() const;

  /// optimizer.step() on steps that synchronise gradients; nothing on the others. Under fp16
  /// it first unscales the gradients and skips the update when they overflowed. Returns
  /// whether it stepped.
  bool step(torch::optim::Optimizer &optimizer);
  /// scheduler.step() once per optimizer step, whatever the number of processes or
  /// accumulation steps; nothing when the optimizer did not step in this training step.
  bool step(torch::optim::LRScheduler &scheduler);
  /// optimizer.zero_grad(), except while a cycle of gradient accumulation holds gradients
  /// the optimizer has not used yet: those must stay. So it may be called first in the step
  /// or after accelerator.step(optimizer).
  void zero_grad(torch::optim::Optimizer &optimizer, bool set_to_none = true);
  /// module.zero_grad(), with the same exception: for loops that clear the gradients through
  /// the model (`model->zero_grad()`, as DCGAN-style code does) rather than the optimizer.
  void zero_grad(torch::nn::Module &module, bool set_to_none = true);
  /// Clips the gradients' total norm to max_norm and returns the norm before clipping. Under
  /// fp16 these parameters' gradients are unscaled first (the norm is the true one). On a step
  /// that does not synchronise gradients (inside accumulate(), before the cycle's last step)
  /// each process holds a partial sum: nothing is clipped, and the norm returned is that of
  /// the partial sum, as it stands (scaled under fp16).
  double clip_grad_norm_(const std::vector<torch::Tensor> &parameters, double max_norm,
                         double norm_type = 2.0);
  /// Clamps each gradient to [-clip_value, clip_value]; unscaled first under fp16, and only on
  /// steps that synchronise gradients, like clip_grad_norm_.
  void clip_grad_value_(const std::vector<torch::Tensor> &parameters, double clip_value);

  // ---- mixed precision -------------------------------------------------------------------
  /// Runs what the program computes while it lives (the forward pass and the loss) in the
  /// mixed_precision dtype, bf16 or fp16, the way torch.autocast does; parameters stay fp32:
  ///   for (auto& batch : *loader) {
  ///     auto autocast = accelerator.autocast();
  ///     auto loss = torch::nll_loss(model->forward(batch.data), batch.target);
  ///     accelerator.backward(loss);          // backward itself runs outside autocast
  ///     accelerator.step(optimizer);         // under fp16: unscales, skips on overflow
  ///   }
  /// Does nothing under mixed_precision "no". LibTorch modules have no forward hooks, so
  /// prepare cannot wrap the forward pass; the program holds the guard (accel-rewrite inserts
  /// it). See docs/design.md, "Mixed precision".
  class AutocastGuard {
  public:
    explicit AutocastGuard(Accelerator &accelerator);
    ~AutocastGuard();
    AutocastGuard(const AutocastGuard &) = delete;
    AutocastGuard &operator=(const AutocastGuard &) = delete;
    AutocastGuard(AutocastGuard &&other) noexcept;
    AutocastGuard &operator=(AutocastGuard &&) = delete;

  private:
    bool active_ = false;
    c10::DeviceType device_type_ = c10::DeviceType::CPU;
    bool previous_enabled_ = false;
    c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
  };
  [[nodiscard]] AutocastGuard autocast() { return AutocastGuard(*this); }
  /// "no", "bf16" or "fp16".
  const std::string &mixed_precision() const;
  /// Under fp16, the factor the loss is multiplied by before backward; 1 otherwise.
  double loss_scale() const;
  /// True when the latest step(optimizer) did not update because fp16 gradients overflowed
  /// (the scale was lowered; training goes on with the next batch).
  bool optimizer_step_was_skipped() const;

  // ---- checkpoints -----------------------------------------------------------------------
  /// Saves what it takes to continue training exactly where it is: every prepared model,
  /// optimizer and scheduler, the fp16 loss scale, every process's random generators (CPU and
  /// CUDA), each prepared loader's epoch and position in it, and the step counters. With no
  /// directory: <project_dir>/checkpoints/checkpoint_<n>, keeping the newest total_limit.
  /// Atomic: the files are written into a temporary directory, flushed to disk and renamed into
  /// place, so a crash at any moment leaves the previous checkpoint whole. Every process calls
  /// it (each writes its own random state and loader position); returns the directory.
  std::string save_state(const std::string &directory = "");
  /// Restores a save_state directory into the prepared objects (call it after prepare and
  /// prepare_data_loader, before the loop); the next epoch of a loader continues at the batch
  /// after the one the checkpoint was taken in. With no directory: the newest automatically
  /// named checkpoint. Refuses a checkpoint of another world size or with other objects, saying
  /// why. Returns the directory.
  std::string load_state(const std::string &directory = "");
  /// Training steps so far (calls of backward), kept by save_state and load_state.
  int64_t global_step() const;

  // ---- collectives ---------------------------------------------------------------------
  /// Concatenates every process's tensor along dim 0, in process order.
  torch::Tensor gather(const torch::Tensor &tensor);
  /// gather, minus the samples a prepared loader repeated to even out its last batches, so
  /// that an evaluation metric counts every sample exactly once.
  torch::Tensor gather_for_metrics(const torch::Tensor &tensor);
  /// "sum", "mean", "max" or "min" of the tensor across processes; returns a new tensor.
  torch::Tensor reduce(const torch::Tensor &tensor, const std::string &op = "sum");
  /// "sum", "mean", "max" or "min" of a number across processes, e.g. a running loss, a count
  /// of correct predictions or the largest loss of a batch: integral types are combined exactly
  /// (as int64; a mean rounds toward zero, as integer division does), floating-point ones as
  /// double. Returns the value unchanged, with
  /// no communication, when there is one process. A collective: every process must call it,
  /// so never inside an `if (accelerator.is_main_process())` block.
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  T reduce(T value, const std::string &op = "sum") {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(reduce_integer(static_cast<int64_t>(value), op));
    } else {
      return static_cast<T>(reduce_floating(static_cast<double>(value), op));
    }
  }
  /// Process `src`'s tensor, on every process.
  torch::Tensor broadcast(const torch::Tensor &tensor, int src = 0);
  /// Pads `dim` to the largest size across processes so that the tensors can be gathered.
  torch::Tensor pad_across_processes(const torch::Tensor &tensor, int64_t dim = 0,
                                     double pad_index = 0, bool pad_first = false);
  /// Blocks until every process arrives.
  void wait_for_everyone();

  /// Lets the main process run a block first (e.g. a download), the others after it:
  ///   { auto guard = accelerator.main_process_first(); ... }
  class MainProcessFirst {
  public:
    explicit MainProcessFirst(Accelerator &accelerator);
    ~MainProcessFirst();
    MainProcessFirst(const MainProcessFirst &) = delete;
    MainProcessFirst &operator=(const MainProcessFirst &) = delete;
    MainProcessFirst(MainProcessFirst &&other) noexcept;
    MainProcessFirst &operator=(MainProcessFirst &&) = delete;

  private:
    Accelerator *accelerator_;
  };
  MainProcessFirst main_process_first() { return MainProcessFirst(*this); }

  // ---- output ----------------------------------------------------------------------------
  /// std::cout on the main process, a stream that discards everything on the others, so that
  /// a line is printed once per job, not once per process:
  ///   accelerator.print() << "epoch " << epoch << " loss " << loss << '\n';
  /// The operands are still evaluated on every process (a collective among them, such as
  /// accelerator.reduce, runs everywhere, as it must). std::cerr is left alone: an error
  /// reported by any process stays visible.
  std::ostream &print();
  /// Prints the arguments and a newline once, on the main process (Accelerate's
  /// accelerator.print): print("loss ", loss) writes what std::cout << "loss " << loss << '\n'
  /// would. The arguments are evaluated on every process.
  template <typename First, typename... Rest> void print(const First &first, const Rest &...rest) {
    if (!is_main_process()) {
      return;
    }
    std::ostringstream line;
    line << first;
    ((line << rest), ...);
    line << '\n';
    std::cout << line.str() << std::flush;
  }

  /// std::printf on the main process; nothing (and 0) on the others: the C way of printing
  /// once, which accel-rewrite's accel-print rule writes for a program's printf calls. The
  /// format is checked like printf's.
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  int printf(const char *format, ...);

  /// The model itself: prepare works in place, so this is the identity; kept for code written
  /// for Python Accelerate.
  template <typename Model> Model &unwrap_model(Model &model) { return model; }

  /// torch::save on the main process only, written to a temporary file and renamed, so a
  /// crash never leaves a half-written file at `path`. Other processes wait for it.
  template <typename Value> void save(const Value &value, const std::string &path) {
    save_on_main_process(path, [&value](const std::string &file) { torch::save(value, file); });
  }

private:
  // The runtime's tests reach the state through RuntimeAccess (runtime/src/runtime_access.h,
  // not installed); the guards (nested classes) through runtime().
  friend class detail::RuntimeAccess;
  friend class LocalSGD;
  detail::Runtime &runtime() { return *runtime_; }
  /// The rows [first, second) of a batch of `rows` rows that batch_rows gives this process.
  std::pair<int64_t, int64_t> rows_of_this_process(int64_t rows);

  template <typename M> void prepare_one(std::shared_ptr<M> &model) {
    if constexpr (std::is_base_of_v<torch::nn::Module, M>) {
      prepare_module(*model, model);
    } else {
      prepare_one(*model);
    }
  }
  // A model or optimizer held by a unique_ptr is prepared in place, as one held by value.
  template <typename M> void prepare_one(std::unique_ptr<M> &object) { prepare_one(*object); }
  template <typename T> void prepare_one(T &object) {
    if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, T>) {
      prepare_module(*object.ptr(), object.ptr()); // Net model; (TORCH_MODULE)
    } else if constexpr (std::is_base_of_v<torch::nn::Module, T>) {
      // A model held by value, or a reference to one a shared_ptr holds (then followed by it).
      prepare_module(object, object.weak_from_this().lock());
    } else if constexpr (std::is_base_of_v<torch::optim::Optimizer, T>) {
      prepare_optimizer(object);
    } else if constexpr (std::is_base_of_v<torch::optim::LRScheduler, T>) {
      prepare_scheduler(object);
    } else {
      static_assert(std::is_base_of_v<torch::nn::Module, T>,
                    "accelerate::Accelerator::prepare takes models (ModuleHolder, Module, "
                    "std::shared_ptr<Module>), optimizers and LR schedulers");
    }
  }

  /// `owner`: the shared_ptr that holds `module`, null for a model held by value.
  void prepare_module(torch::nn::Module &module, const std::shared_ptr<torch::nn::Module> &owner);
  void prepare_optimizer(torch::optim::Optimizer &optimizer);
  void prepare_scheduler(torch::optim::LRScheduler &scheduler);
  std::shared_ptr<detail::LoaderContext> loader_context();
  int64_t reduce_integer(int64_t value, const std::string &op);
  double reduce_floating(double value, const std::string &op);
  /// save's work: `write` fills a temporary file on the main process, which then becomes
  /// `path` atomically; every process returns once it is in place.
  void save_on_main_process(const std::string &path,
                            const std::function<void(const std::string &)> &write);

  std::unique_ptr<detail::Runtime> runtime_;
};

/// Seeds every generator the program's randomness uses (CPU and CUDA), the same way on every
/// process.
void set_seed(uint64_t seed);

} // namespace accelerate
