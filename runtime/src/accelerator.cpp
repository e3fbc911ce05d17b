#include "accelerate/accelerator.h"

#include "atomic_file.h"
#include "collective_calls.h"
#include "comm_hook.h"
#include "environment_flag.h"
#include "host_allocator.h"
#include "mixed_precision.h"
#include "runtime.h"

#include <ATen/autocast_mode.h>
#ifdef ACCEL_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#else
#include <c10/core/impl/VirtualGuardImpl.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_set>

namespace accelerate {
namespace {

// An optimizer made before prepare moved its model may hold state where the parameters were:
// libtorch's Adagrad makes its `sum` tensors in its constructor, and its first step on the GPU
// then failed ("found at least two devices, cuda:0 and cpu", seen on an H200). The optimizer's
// own serialization, read back onto the device, moves every state tensor of a built-in
// optimizer; one that serializes nothing keeps its state as it is.
void move_state_to(torch::optim::Optimizer &optimizer, const torch::Device &device) {
  torch::serialize::OutputArchive saved;
  optimizer.save(saved);
  std::ostringstream bytes;
  saved.save_to(bytes);
  std::istringstream read(bytes.str());
  torch::serialize::InputArchive moved;
  moved.load_from(read, device);
  optimizer.load(moved);
}

std::optional<std::string> environment(const char *name) {
  const char *value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return std::string(value);
}

// PowerSGD's two settings people tune: from the code, else the environment, else DDP's defaults.
// Checked whatever comm_hook is, so that a mistyped value never waits to be used.
void resolve_power_sgd(PowerSgdOptions &power_sgd) {
  const auto whole_number = [](std::optional<int> &field, const char *variable, int fallback,
                               int minimum, const char *what) {
    std::string source = std::string(variable) + " or Options::power_sgd";
    if (!field) {
      const auto text = environment(variable);
      if (!text) {
        field = fallback;
        return;
      }
      size_t used = 0;
      try {
        field = std::stoi(*text, &used);
      } catch (const std::exception &) {
        used = 0;
      }
      if (used != text->size()) {
        throw std::invalid_argument("accelerate: " + std::string(variable) + "='" + *text +
                                    "' is not a whole number");
      }
    }
    if (*field < minimum) {
      throw std::invalid_argument("accelerate: PowerSGD's " + std::string(what) + " is " +
                                  std::to_string(*field) + "; it must be at least " +
                                  std::to_string(minimum) + " (" + source + ")");
    }
  };
  whole_number(power_sgd.matrix_approximation_rank, "ACCELERATE_POWERSGD_RANK", 1, 1,
               "matrix_approximation_rank");
  whole_number(power_sgd.start_powersgd_iter, "ACCELERATE_POWERSGD_START_ITER", 1000, 0,
               "start_powersgd_iter");
  if (!(power_sgd.min_compression_rate > 0)) {
    throw std::invalid_argument("accelerate: PowerSGD's min_compression_rate must be above 0 "
                                "(Options::power_sgd)");
  }
}

// Options given in code win; the launcher's ACCELERATE_* variables fill the rest.
Options resolve(Options options) {
  if (options.backend.empty()) {
    options.backend = environment("ACCELERATE_BACKEND").value_or("");
  }
  if (!options.cpu) {
    options.cpu = launch::environment_switch("ACCELERATE_USE_CPU", false);
  }
  if (!options.gradient_accumulation_steps) {
    const auto text = environment("ACCELERATE_GRADIENT_ACCUMULATION_STEPS").value_or("1");
    try {
      options.gradient_accumulation_steps = std::stoi(text);
    } catch (const std::exception &) {
      options.gradient_accumulation_steps = 0;
    }
  }
  if (*options.gradient_accumulation_steps < 1) {
    throw std::invalid_argument("accelerate: gradient_accumulation_steps must be at least 1 "
                                "(ACCELERATE_GRADIENT_ACCUMULATION_STEPS or Options)");
  }
  if (!options.shared_memory) {
    options.shared_memory = launch::environment_switch("ACCELERATE_SHARED_MEMORY", true);
  }
  if (!options.debug) {
    options.debug = launch::environment_switch("ACCELERATE_DEBUG_MODE", false);
  }
  if (!options.tune_malloc) {
    options.tune_malloc = launch::environment_switch("ACCELERATE_MALLOC_TUNING", true);
  }
  if (!options.split_batches) {
    options.split_batches = launch::environment_switch("ACCELERATE_SPLIT_BATCHES", false);
  }
  if (!options.local_sgd_steps) {
    const auto text = environment("ACCELERATE_LOCAL_SGD_STEPS").value_or("0");
    try {
      size_t used = 0;
      options.local_sgd_steps = std::stoi(text, &used);
      if (used != text.size()) {
        options.local_sgd_steps = -1;
      }
    } catch (const std::exception &) {
      options.local_sgd_steps = -1;
    }
  }
  if (*options.local_sgd_steps < 0) {
    throw std::invalid_argument("accelerate: local_sgd_steps must be 0 (off) or a number of "
                                "steps (ACCELERATE_LOCAL_SGD_STEPS or Options)");
  }
  if (options.mixed_precision.empty()) {
    options.mixed_precision = environment("ACCELERATE_MIXED_PRECISION").value_or("no");
  }
  detail::parse_mixed_precision(options.mixed_precision); // throws on anything else
  if (options.comm_hook.empty()) {
    options.comm_hook = environment("ACCELERATE_COMM_HOOK").value_or("no");
  }
  detail::parse_comm_hook(options.comm_hook); // throws on anything else
  resolve_power_sgd(options.power_sgd);
  if (options.project_dir.empty()) {
    options.project_dir = environment("ACCELERATE_PROJECT_DIR").value_or(".");
  }
  if (options.total_limit < 0) {
    throw std::invalid_argument("accelerate: total_limit must be 0 (keep every checkpoint) or "
                                "more");
  }
  if (!options.timeout) {
    if (auto seconds = environment("ACCELERATE_TIMEOUT")) {
      // 1 ms (below, it rounds to no time at all) to 7 days (far above, the milliseconds
      // overflow), as `accel launch --rdzv_timeout` allows; the whole text must be the number.
      char *end = nullptr;
      const double value = std::strtod(seconds->c_str(), &end);
      if (seconds->empty() || *end != '\0' || !(value >= 0.001 && value <= 604800.0)) {
        throw std::invalid_argument("accelerate: ACCELERATE_TIMEOUT='" + *seconds +
                                    "' is not a number of seconds from 0.001 to 604800 (7 days)");
      }
      options.timeout = std::chrono::milliseconds(std::llround(value * 1000.0));
    } else {
      options.timeout = std::chrono::minutes(30);
    }
  }
  return options;
}

torch::Device choose_device(const ProcessInfo &info, const Options &options) {
  if (*options.cpu || !torch::cuda::is_available()) {
    return torch::kCPU;
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(info.local_rank % count)};
}

// Makes `device` this process's current CUDA device, so that work the user or LibTorch puts on
// plain `torch::kCUDA`, and NCCL's communicators, land on the GPU of this process's local rank
// rather than all on GPU 0.
void use_cuda_device(const torch::Device &device) {
#ifdef ACCEL_WITH_CUDA
  c10::cuda::set_device(device.index());
#else
  // A CPU-built runtime linked into a program that loaded CUDA LibTorch: no CUDA headers here,
  // so go through the generic device guard (it dispatches to whatever CUDA backend is loaded).
  c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).setDevice(device);
#endif
}

// What every process must share: the gradient sync's shape (buckets are made collectively, a
// hook compresses on every rank), the steps that synchronise, the precision, the data split.
// Machines launched with different flags would otherwise fail in a collective, hang or train
// differently in silence; the rendezvous compares these and names both values.
std::vector<std::pair<std::string, std::string>> settings_that_must_agree(const Options &options) {
  const auto flag = [](bool value) { return std::string(value ? "true" : "false"); };
  const auto number = [](double value) {
    std::ostringstream text;
    text << value;
    return text.str();
  };
  std::vector<std::pair<std::string, std::string>> settings = {
      {"backend", options.backend.empty() ? "auto" : options.backend},
      {"cpu", flag(*options.cpu)},
      {"mixed_precision", options.mixed_precision},
      {"gradient_accumulation_steps", std::to_string(*options.gradient_accumulation_steps)},
      {"comm_hook", options.comm_hook},
      {"split_batches", flag(*options.split_batches)},
      {"local_sgd_steps", std::to_string(*options.local_sgd_steps)},
      {"even_batches", flag(options.even_batches)},
      {"broadcast_buffers", flag(options.broadcast_buffers)},
      {"bucket_cap_mb", number(options.bucket_cap_mb)},
      {"first_bucket_cap_mb", number(options.first_bucket_cap_mb)},
  };
  if (options.comm_hook == "powersgd") {
    const auto &power_sgd = options.power_sgd;
    settings.insert(settings.end(),
                    {{"powersgd_rank", std::to_string(*power_sgd.matrix_approximation_rank)},
                     {"powersgd_start_iter", std::to_string(*power_sgd.start_powersgd_iter)},
                     {"powersgd_min_compression_rate", number(power_sgd.min_compression_rate)},
                     {"powersgd_error_feedback", flag(power_sgd.use_error_feedback)},
                     {"powersgd_warm_start", flag(power_sgd.warm_start)},
                     {"powersgd_seed", std::to_string(power_sgd.random_seed)}});
  }
  return settings;
}

// One process group per process, joined by its first Accelerator and kept until the process
// ends, as Python Accelerate's shared state is: later Accelerators (one per call of a training
// helper, say) use it as well. Joining again would be a second rendezvous on the same port,
// which rank 0 cannot serve under `accel launch` (the listening socket it inherited closed with
// the first store), and which a faster rank could reach while rank 0's first store still
// listens. Never destroyed: at exit the backend's threads and the store end with the process,
// and the shared-memory segment's name was removed when every process had mapped it.
std::shared_ptr<detail::ProcessGroup>
shared_group(const ProcessInfo &info, const torch::Device &device, const Options &options) {
  struct Joined {
    std::shared_ptr<detail::ProcessGroup> group;
    Options options;
  };
  static std::mutex mutex;
  static auto *joined = new std::optional<Joined>();
  std::lock_guard<std::mutex> lock(mutex);
  if (*joined) {
    // The settings that shape the group cannot change for a later Accelerator: say so rather
    // than ignore them.
    const auto &first = (*joined)->options;
    std::string differs;
    if (!options.backend.empty() && options.backend != (*joined)->group->backend_name()) {
      differs = "backend '" + options.backend + "' (joined with '" +
                (*joined)->group->backend_name() + "')";
    } else if (*options.cpu != *first.cpu) {
      differs = std::string("cpu ") + (*options.cpu ? "true" : "false") + " (joined with " +
                (*first.cpu ? "true" : "false") + ")";
    } else if (*options.shared_memory != *first.shared_memory) {
      differs = std::string("shared_memory ") + (*options.shared_memory ? "on" : "off") +
                " (joined with it " + (*first.shared_memory ? "on" : "off") + ")";
    } else if (*options.timeout != *first.timeout) {
      differs = "timeout " + detail::seconds_text(*options.timeout) + " (joined with " +
                detail::seconds_text(*first.timeout) + ")";
    }
    if (!differs.empty()) {
      throw std::invalid_argument("accelerate: this process joined the job with an earlier "
                                  "Accelerator, whose process group every later one shares; "
                                  "this one asks for " +
                                  differs +
                                  ". Give every Accelerator of a process the same "
                                  "backend, cpu, shared_memory and timeout");
    }
    return (*joined)->group;
  }
  detail::ProcessGroupOptions group_options;
  group_options.backend = options.backend.empty() ? "auto" : options.backend;
  group_options.timeout = *options.timeout;
  group_options.shared_memory = *options.shared_memory;
  group_options.must_agree = settings_that_must_agree(options);
  auto group = detail::ProcessGroup::connect(info, device.type(), group_options);
  *joined = Joined{group, options};
  return group;
}

// One gradient sync per parameter. A model prepared again, or a part of a prepared model, keeps
// the sync it has. A model that shares parameters with models prepared before gets one sync over
// all of their parameters (and buffers), which replaces theirs: a parameter in two syncs would
// be summed twice. Every process makes the same decisions (the syncs' buckets are made
// collectively). `buffers`: those the sync makes process 0's after each synchronising step.
void synchronise_gradients(detail::Runtime &rt, const std::vector<torch::Tensor> &parameters,
                           const std::vector<torch::Tensor> &buffers) {
  std::vector<torch::Tensor> trainable;
  for (const auto &parameter : parameters) {
    if (parameter.requires_grad()) {
      trainable.push_back(parameter);
    }
  }
  if (trainable.empty()) {
    return;
  }
  auto &syncs = rt.gradients.live_syncs();
  const auto covers_all = [&](const auto &sync) {
    return std::all_of(trainable.begin(), trainable.end(),
                       [&](const auto &parameter) { return sync->covers(parameter); });
  };
  if (std::any_of(syncs.begin(), syncs.end(), covers_all)) {
    return;
  }
  const auto overlaps = [&](const auto &sync) {
    return std::any_of(trainable.begin(), trainable.end(),
                       [&](const auto &parameter) { return sync->covers(parameter); });
  };
  std::vector<torch::Tensor> synchronised, broadcast;
  std::unordered_set<const c10::TensorImpl *> seen;
  const auto add = [&seen](std::vector<torch::Tensor> &to, std::vector<torch::Tensor> tensors) {
    for (auto &tensor : tensors) {
      if (seen.insert(tensor.unsafeGetTensorImpl()).second) {
        to.push_back(std::move(tensor));
      }
    }
  };
  add(synchronised, trainable);
  add(broadcast, buffers);
  for (const auto &sync : syncs) {
    if (overlaps(sync)) {
      add(synchronised, sync->live_parameters());
      add(broadcast, sync->live_buffers());
    }
  }
  syncs.erase(std::remove_if(syncs.begin(), syncs.end(), overlaps), syncs.end());
  const auto &options = rt.process.options;
  detail::GradientSync::Limits limits;
  limits.first_bucket_bytes = static_cast<size_t>(options.first_bucket_cap_mb * (1 << 20));
  limits.bucket_bytes = static_cast<size_t>(options.bucket_cap_mb * (1 << 20));
  syncs.push_back(detail::GradientSync::create(rt.process.group, synchronised, limits,
                                               detail::compression_of(options), broadcast));
  syncs.back()->set_enabled(rt.gradients.communicates()); // off under Local SGD
}

std::atomic<int> g_live_accelerators{0};

} // namespace

int detail::live_accelerators() { return g_live_accelerators.load(); }

Accelerator::Accelerator() : Accelerator(Options{}) {}

Accelerator::Accelerator(const Options &options) : runtime_(std::make_unique<detail::Runtime>()) {
  auto &rt = *runtime_;
  auto &process = rt.process;
  process.info = detect_process_info();
  process.options = resolve(options);
  rt.gradients.local_sgd_run = *process.options.local_sgd_steps > 0;
  process.device = choose_device(process.info, process.options);
  launch::tune_host_allocator(*process.options.tune_malloc);
  rt.setting_checks = detail::SettingChecks::create(
      process.info.rank == 0, process.accumulation_steps(), process.mixed_precision());
  if (process.mixed_precision() == detail::MixedPrecision::FP16) {
    rt.prepared.scaler =
        std::make_unique<detail::GradScaler>(process.options.grad_scaler, process.device);
  }
  if (process.device.is_cuda()) {
    use_cuda_device(process.device);
  }
  if (process.info.distributed()) {
    process.group = shared_group(process.info, process.device, process.options);
  }
  auto &loader_context = rt.prepared.loader_context;
  loader_context = std::make_shared<detail::LoaderContext>();
  loader_context->device = process.device;
  loader_context->rank = process.info.rank;
  loader_context->world_size = process.info.world_size;
  loader_context->even_batches = process.options.even_batches;
  loader_context->split_batches = *process.options.split_batches;
  if (process.group) {
    std::weak_ptr<detail::ProcessGroup> weak_group = process.group;
    loader_context->broadcast_indices = [weak_group](std::vector<int64_t> &indices) {
      auto group = weak_group.lock();
      TORCH_CHECK(group, "accelerate: a prepared data loader outlived its Accelerator");
      // The length first, then the indices.
      const auto length = torch::tensor({static_cast<int64_t>(indices.size())});
      group->broadcast(length, 0, "broadcast of the epoch's order");
      const auto order = group->rank() == 0
                             ? torch::tensor(indices, torch::kInt64)
                             : torch::empty({length[0].item<int64_t>()}, torch::kInt64);
      if (order.numel() > 0) {
        group->broadcast(order, 0, "broadcast of the epoch's order");
      }
      indices.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    };
    loader_context->synchronise_random_state = [weak_group]() {
      auto group = weak_group.lock();
      TORCH_CHECK(group, "accelerate: a prepared data loader or a batch_range outlived its Accelerator");
      auto generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      auto state = generator.get_state();
      group->broadcast(state, 0, "broadcast of the random generator's state");
      generator.set_state(state);
    };
  }
  // Counted last: a constructor that throws leaves no live Accelerator behind.
  ++g_live_accelerators;
}

Accelerator::~Accelerator() { --g_live_accelerators; }

torch::Device Accelerator::device() const { return runtime_->process.device; }
int Accelerator::process_index() const { return runtime_->process.info.rank; }
int Accelerator::local_process_index() const { return runtime_->process.info.local_rank; }
int Accelerator::num_processes() const { return runtime_->process.info.world_size; }

void Accelerator::prepare_module(torch::nn::Module &module,
                                 const std::shared_ptr<torch::nn::Module> &owner) {
  auto &rt = *runtime_;
  const auto &process = rt.process;
  module.to(process.device);
  rt.prepared.training.add_model(module, owner);
  const auto parameters = module.parameters();
  rt.setting_checks->watch(parameters);
  if (!process.group) {
    return;
  }
  // Every process starts from process 0's parameters and buffers; again when the model was
  // prepared before, since a program that prepares it per fold may have re-initialised it
  // (one broadcast per dtype: the cost of one step's gradient sum).
  const auto buffers = module.buffers();
  std::vector<torch::Tensor> state = parameters;
  state.insert(state.end(), buffers.begin(), buffers.end());
  process.group->broadcast_coalesced(state, 0, "broadcast of the model's state");
  synchronise_gradients(rt, parameters,
                        process.options.broadcast_buffers ? buffers : std::vector<torch::Tensor>{});
}

void Accelerator::prepare_optimizer(torch::optim::Optimizer &optimizer) {
  const auto &device = runtime_->process.device;
  if (!optimizer.state().empty() && !device.is_cpu()) {
    move_state_to(optimizer, device);
  }
  runtime_->prepared.training.add_optimizer(optimizer);
}

void Accelerator::prepare_scheduler(torch::optim::LRScheduler &scheduler) {
  runtime_->prepared.training.add_scheduler(scheduler);
}

torch::Tensor Accelerator::batch_rows(const torch::Tensor &batch) {
  if (batch.dim() == 0) {
    return batch;
  }
  const int64_t rows = batch.size(0);
  const std::pair<int64_t, int64_t> range = rows_of_this_process(rows);
  return range.first == 0 && range.second == rows ? batch
                                                   : batch.slice(0, range.first, range.second);
}

std::pair<int64_t, int64_t> Accelerator::rows_of_this_process(int64_t rows) {
  auto &context = *runtime_->prepared.loader_context;
  if (!context.split_batches || context.world_size == 1) {
    return {0, rows};
  }
  bool repeated = false;
  auto range = detail::row_range_of_process(rows, context.rank, context.world_size, repeated);
  if (repeated && !context.noted_repeated_iterations) {
    context.noted_repeated_iterations = true;
    std::cerr << "accel: note: process " << context.rank << " got no row of a batch of "
              << rows << " rows split among " << context.world_size
              << " processes (split_batches) and computes on one row again; a data set size "
                 "that is a multiple of the batch size avoids such a last batch.\n";
  }
  return range;
}

std::shared_ptr<detail::LoaderContext> Accelerator::loader_context() {
  return runtime_->prepared.loader_context;
}

void Accelerator::backward(const torch::Tensor &loss, const torch::Tensor &gradient,
                           std::optional<bool> retain_graph, bool create_graph) {
  auto &rt = *runtime_;
  // Accumulating N steps sums N gradients: each contributes 1/N, as one step over N batches.
  // Outside accumulate() there is no cycle: the step is whole.
  const int steps = rt.gradients.open_accumulate_guards > 0 ? rt.process.accumulation_steps() : 1;
  auto scaled = steps > 1 ? loss / steps : loss;
  if (rt.prepared.scaler) {
    scaled = rt.prepared.scaler->scale(scaled); // fp16: keep small gradients above underflow
  }
  {
    // Checks the guards of this step, and marks this backward as the accelerator's own.
    detail::SettingChecks::Backward checked(
        *rt.setting_checks, at::autocast::is_autocast_enabled(rt.process.device.type()));
    // Backward runs in the dtypes autocast chose for the forward pass, not under autocast.
    detail::AutocastOff autocast_off(rt.process.device.type());
    // Gradient synchronisation completes inside: autograd runs it when backward ends.
    scaled.backward(gradient, retain_graph, create_graph);
  }
  ++rt.gradients.position.global_step;
  rt.gradients.position.unapplied_gradients = true;
}

int64_t Accelerator::global_step() const { return runtime_->gradients.position.global_step; }

void Accelerator::wait_for_everyone() {
  if (auto *group = runtime_->process.group.get()) {
    if (*runtime_->process.options.debug) {
      detail::require_same_calls(*group, detail::Collective::Barrier, nullptr);
    }
    group->barrier();
  }
}

Accelerator::MainProcessFirst::MainProcessFirst(Accelerator &accelerator)
    : accelerator_(&accelerator) {
  if (!accelerator_->is_main_process()) {
    accelerator_->wait_for_everyone(); // the others wait until the main process is done
  }
}

Accelerator::MainProcessFirst::MainProcessFirst(MainProcessFirst &&other) noexcept
    : accelerator_(other.accelerator_) {
  other.accelerator_ = nullptr;
}

Accelerator::MainProcessFirst::~MainProcessFirst() {
  if (accelerator_ != nullptr && accelerator_->is_main_process()) {
    accelerator_->wait_for_everyone(); // the main process is done: release the others
  }
}

void Accelerator::save_on_main_process(const std::string &path,
                                       const std::function<void(const std::string &)> &write) {
  if (is_main_process()) {
    detail::write_atomically(path, write);
  }
  wait_for_everyone();
}

void set_seed(uint64_t seed) { torch::manual_seed(seed); }

} // namespace accelerate
