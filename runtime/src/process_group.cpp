#include "process_group.h"

#include "listen_socket.h"
#include "test_faults.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/utils/tensor_flatten.h>
#include <torch/torch.h>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace accelerate::detail {
namespace {

// Accelerate's ACCELERATE_LOG_LEVEL at INFO or DEBUG (`accel launch -v` sets it): start-up
// decisions are logged to stderr.
bool logs_info() {
  const char *level = std::getenv("ACCELERATE_LOG_LEVEL");
  if (level == nullptr) {
    return false;
  }
  std::string text(level);
  for (auto &c : text) {
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return text == "INFO" || text == "DEBUG";
}

std::string address_of(const ProcessInfo &info) {
  return info.master_addr + ":" + std::to_string(info.master_port);
}

// TCPStore's constructor waits for the server's answer to its first request without a time
// limit: a foreign service on the port (an HTTP server, which reads on and never answers)
// would hold this rank forever. So it runs on a helper thread, and past the timeout this rank
// gives up; the helper is abandoned, blocked in recv, and ends with the process.
c10::intrusive_ptr<c10d::Store> connect_within(const ProcessInfo &info,
                                               const c10d::TCPStoreOptions &options,
                                               std::chrono::milliseconds timeout) {
  using Result = std::promise<c10::intrusive_ptr<c10d::Store>>;
  auto result = std::make_shared<Result>();
  auto connected = result->get_future();
  std::thread([result, host = info.master_addr, options] {
    try {
      result->set_value(c10::make_intrusive<c10d::TCPStore>(host, options));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  // A little beyond the timeout, so that TCPStore's own connect timeout (nothing listens)
  // reports first.
  if (connected.wait_for(timeout + std::chrono::seconds(2)) != std::future_status::ready) {
    throw std::runtime_error(
        accepts_connections(info.master_addr, info.master_port, 1000)
            ? "something accepts connections there but does not answer as a rendezvous store "
              "(rank 0 hangs before starting it, or another service owns this port: choose "
              "another --main_process_port)"
            : "nothing accepts connections there (is machine 0 up, and are the address and "
              "port right?)");
  }
  return connected.get();
}

c10::intrusive_ptr<c10d::Store> open_store(const ProcessInfo &info,
                                           std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.master_port);
  options.isServer = info.rank == 0;
  options.numWorkers = info.world_size;
  // We check arrivals ourselves so that a timeout can name the missing ranks.
  options.waitWorkers = false;
  options.timeout = timeout;
  if (options.isServer) {
    // The store listens on master_addr only (a loopback job accepts no connection from outside
    // the machine): on the socket `accel launch` bound and handed down, or on one we bind.
    const char *inherited = std::getenv("ACCELERATE_STORE_LISTEN_FD");
    options.masterListenFd = inherited != nullptr ? inherited_listen_socket(inherited)
                                                  : listen_on(info.master_addr, info.master_port);
  }
  try {
    if (options.isServer) {
      return c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
    }
    return connect_within(info, options, timeout);
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: rank " + std::to_string(info.rank) +
                             " could not reach the rendezvous store at " + address_of(info) +
                             " within " + seconds_text(timeout) + ": " + message_of(error));
  }
}

bool store_has(c10d::Store &store, const std::vector<std::string> &keys, const ProcessInfo &info) {
  try {
    return store.check(keys);
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: rank " + std::to_string(info.rank) +
                             " lost the rendezvous store at " + address_of(info) +
                             " (rank 0 exited or failed): " + message_of(error));
  }
}

// Waits until the store holds every key of `keys` (one per rank in `ranks`); past the timeout,
// the ranks whose key is missing, by number ("1, 3"). Polled rather than store.wait(): after a
// timed-out wait the client connection is unusable, and we still need it to find out who is
// missing.
std::string ranks_missing_after(c10d::Store &store, const ProcessInfo &info,
                                std::chrono::milliseconds timeout,
                                const std::vector<std::string> &keys,
                                const std::vector<int> &ranks) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!store_has(store, keys, info)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!store_has(store, {keys[i]}, info)) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(ranks[i]);
        }
      }
      return missing;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

// Every rank checks in as `stage` ("arrived", "joined") and waits for the others, so a missing
// peer is reported by name.
void wait_for_all_ranks(c10d::Store &store, const ProcessInfo &info,
                        std::chrono::milliseconds timeout, const std::string &stage) {
  store.set("accel/" + stage + "/" + std::to_string(info.rank), std::vector<uint8_t>{1});
  test_fault_point(stage);
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int rank = 0; rank < info.world_size; ++rank) {
    keys.push_back("accel/" + stage + "/" + std::to_string(rank));
    ranks.push_back(rank);
  }
  const auto missing = ranks_missing_after(store, info, timeout, keys, ranks);
  if (!missing.empty()) {
    throw std::runtime_error("accelerate: rendezvous at " + address_of(info) + " timed out after " +
                             seconds_text(timeout) + " on rank " + std::to_string(info.rank) +
                             " of " + std::to_string(info.world_size) +
                             "; never arrived: rank(s) " + missing);
  }
}

// The rendezvous' last step. Rank 0 hosts the store, which ends with rank 0's process, so rank 0
// may not leave as soon as it has seen every rank joined: a slower rank may not have seen that
// yet, and its next look would find the store gone ("lost the rendezvous store"). So every
// other rank, once it has seen all, confirms so (its last use of the store in the rendezvous,
// a round trip: it knows the store counted it), and rank 0 leaves only when every rank has
// confirmed.
void leave_rendezvous(c10d::Store &store, const ProcessInfo &info,
                      std::chrono::milliseconds timeout) {
  const std::string prefix = "accel/left/";
  if (info.rank != 0) {
    try {
      store.add(prefix + std::to_string(info.rank), 1);
    } catch (const std::exception &error) {
      throw std::runtime_error("accelerate: rank " + std::to_string(info.rank) +
                               " lost the rendezvous store at " + address_of(info) +
                               " (rank 0 exited or failed): " + message_of(error));
    }
    return;
  }
  std::vector<std::string> keys;
  std::vector<int> ranks;
  for (int rank = 1; rank < info.world_size; ++rank) {
    keys.push_back(prefix + std::to_string(rank));
    ranks.push_back(rank);
  }
  if (keys.empty()) {
    return;
  }
  const auto missing = ranks_missing_after(store, info, timeout, keys, ranks);
  if (!missing.empty()) {
    throw std::runtime_error(
        "accelerate: rendezvous at " + address_of(info) + " timed out after " +
        seconds_text(timeout) + " on rank 0 of " + std::to_string(info.world_size) + ": rank(s) " +
        missing +
        " joined but never confirmed they were done with the store (they exited or hang)");
  }
}

// Each rank's settings that must agree, as "name=value" lines.
std::string settings_text(const std::vector<std::pair<std::string, std::string>> &settings) {
  std::string text;
  for (const auto &[name, value] : settings) {
    text += name + "=" + value + "\n";
  }
  return text;
}

std::map<std::string, std::string> settings_of(const std::vector<uint8_t> &bytes) {
  std::map<std::string, std::string> settings;
  std::istringstream lines(std::string(bytes.begin(), bytes.end()));
  for (std::string line; std::getline(lines, line);) {
    const auto equals = line.find('=');
    if (equals != std::string::npos) {
      settings[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  return settings;
}

// Every rank reads every rank's settings (published before it arrived) and compares them with
// rank 0's, so that all reach the same verdict: the first difference, or nothing.
std::string settings_disagreement(c10d::Store &store, const ProcessInfo &info,
                                  const std::vector<std::pair<std::string, std::string>> &own) {
  if (own.empty()) {
    return {};
  }
  const auto first = settings_of(store.get("accel/settings/0"));
  for (int rank = 1; rank < info.world_size; ++rank) {
    auto other = settings_of(store.get("accel/settings/" + std::to_string(rank)));
    for (const auto &[name, ignored] : own) {
      const auto at_zero = first.count(name) ? first.at(name) : "(not set)";
      const auto at_rank = other.count(name) ? other.at(name) : "(not set)";
      if (at_zero != at_rank) {
        return "accelerate: the processes were started with different settings: " + name + " is " +
               at_zero + " on rank 0 but " + at_rank + " on rank " + std::to_string(rank) +
               ". Every process must train with the same ones: give every machine's `accel "
               "launch` the same flags and config file (and every process the same Options)";
      }
    }
  }
  return {};
}

c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store> &store,
                                            const ProcessInfo &info,
                                            std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // The device is the address peers reach this process on: loopback for a one-machine job,
  // GLOO_SOCKET_IFNAME's interface or the host name's address otherwise.
  if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (is_loopback(info.master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, info.rank, info.world_size, options);
}

#ifdef USE_C10D_NCCL
c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store> &store,
                                            const ProcessInfo &info,
                                            std::chrono::milliseconds timeout) {
  // ProcessGroupNCCL::Options (2.14): create(is_high_priority_stream); the collective
  // timeout is Backend::Options::timeout (the watchdog aborts a collective that exceeds it).
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto backend =
      c10::make_intrusive<c10d::ProcessGroupNCCL>(store, info.rank, info.world_size, options);
  // The Accelerator made this process's GPU current before connecting. Binding it tells NCCL
  // which device barrier() and the communicators use, instead of guessing from the rank (which
  // is wrong when processes per machine and GPUs per machine differ).
  backend->setBoundDeviceId(at::Device(at::kCUDA, c10::cuda::current_device()));
  return backend;
}
#endif

} // namespace

// c10's errors carry a C++ backtrace after the message; the launcher shows a failed worker's
// last lines, which must be the message.
std::string message_of(const std::exception &error) {
  if (const auto *c10_error = dynamic_cast<const c10::Error *>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(timeout.count()) / 1000.0);
  return text;
}

std::string choose_backend(const std::string &requested, c10::DeviceType device) {
  std::string backend = requested;
  if (backend == "auto" || backend.empty()) {
    backend = device == c10::DeviceType::CUDA ? "nccl" : "gloo";
  }
  if (backend == "gloo") {
    return backend;
  }
  if (backend == "nccl") {
#ifdef USE_C10D_NCCL
    return backend;
#else
    throw std::runtime_error("accelerate: the NCCL backend was requested but this runtime was "
                             "built without it (configure with -DACCEL_WITH_CUDA=ON against a "
                             "CUDA LibTorch)");
#endif
  }
  throw std::invalid_argument("accelerate: unknown backend '" + requested +
                              "' (expected gloo, nccl or auto)");
}

std::shared_ptr<ProcessGroup> ProcessGroup::connect(const ProcessInfo &info, c10::DeviceType device,
                                                    const ProcessGroupOptions &options) {
  std::shared_ptr<ProcessGroup> group(new ProcessGroup());
  group->rank_ = info.rank;
  group->size_ = info.world_size;
  group->timeout_ = options.timeout;
  group->backend_name_ = choose_backend(options.backend, device);

  test_fault_point("rendezvous");
  auto store = open_store(info, options.timeout);
  store->set("accel/settings/" + std::to_string(info.rank), settings_text(options.must_agree));
  wait_for_all_ranks(*store, info, options.timeout, "arrived");
  if (auto disagreement = settings_disagreement(*store, info, options.must_agree);
      !disagreement.empty()) {
    // Every rank has the same verdict; none leaves before all have read what they compared.
    wait_for_all_ranks(*store, info, options.timeout, "compared");
    leave_rendezvous(*store, info, options.timeout);
    throw std::invalid_argument(disagreement);
  }
  // The backend's own keys live under a prefix so that ours never collide with them.
  group->store_ = c10::make_intrusive<c10d::PrefixStore>("accel/pg", store);
#ifdef USE_C10D_NCCL
  if (group->backend_name_ == "nccl") {
    group->backend_ = make_nccl(group->store_, info, options.timeout);
  }
#endif
  if (!group->backend_) {
    group->backend_ = make_gloo(group->store_, info, options.timeout);
  }
  // Every rank takes part in the decision, also one that will not use shared memory: the
  // answer must be the same everywhere.
  std::string refusal;
  if (group->backend_name_ != "gloo" || device != c10::DeviceType::CPU) {
    refusal = "trains on " + c10::DeviceTypeName(device) + " with " + group->backend_name_;
  } else if (!options.shared_memory) {
    refusal = "shared memory turned off (Options::shared_memory, ACCELERATE_SHARED_MEMORY)";
  }
  auto shm_store = c10::make_intrusive<c10d::PrefixStore>("accel/shm", store);
  auto verdict = SharedMemoryAllreduce::connect(*shm_store, info.rank, info.world_size,
                                                options.timeout, refusal);
  group->shared_memory_ = std::move(verdict.allreduce);
  group->shared_memory_unused_ = verdict.why_not;
  // Rank 0 hosts the store: no rank leaves before every rank is done reading from it, so that
  // a rank 0 that ends (or fails) right after cannot cut a slower rank off mid-rendezvous.
  // Seeing every rank joined is not enough for rank 0 (a slower rank may still be looking for
  // the others' keys): it leaves only when every rank has confirmed that it saw them all.
  wait_for_all_ranks(*store, info, options.timeout, "joined");
  leave_rendezvous(*store, info, options.timeout);
  if (logs_info()) {
    // What `accel launch -v` shows: the transport is recorded by the program, never assumed.
    std::fprintf(stderr, "accelerate: rank %d of %d: gradients are summed through %s\n", info.rank,
                 info.world_size, group->gradient_transport().c_str());
  }
  if (verdict.failed && info.rank == 0) {
    // Training works, only slower: say so once, with the fix.
    std::fprintf(stderr,
                 "accelerate: warning: gradients go through Gloo, not shared memory (slower): "
                 "%s. Give /dev/shm more room (Docker: --shm-size) or set "
                 "ACCELERATE_SHARED_MEMORY=false to silence this.\n",
                 verdict.why_not.c_str());
  }
  return group;
}

std::string ProcessGroup::gradient_transport() const {
  if (shared_memory_) {
    return "shared memory";
  }
  return backend_name_ + " (not shared memory: " + shared_memory_unused_ + ")";
}

std::shared_ptr<SharedMemoryAllreduce> ProcessGroup::shared_bucket_areas(size_t bytes) {
  if (!shared_memory_) {
    return nullptr;
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "buckets/" + std::to_string(bucket_areas_made_++), store_);
  auto verdict = SharedMemoryAllreduce::connect_areas(*store, rank_, size_, timeout_, bytes);
  if (!verdict.allreduce && logs_info()) {
    std::fprintf(stderr, "accelerate: rank %d: gradient buckets stay in private memory: %s\n",
                 rank_, verdict.why_not.c_str());
  }
  return std::shared_ptr<SharedMemoryAllreduce>(std::move(verdict.allreduce));
}

std::vector<BucketMemory>
ProcessGroup::allocate_buckets(const std::vector<BucketRequest> &requests) {
  // With shared memory, CPU buckets averaged as they lie live in this process's area of a
  // segment every process maps, and are summed where they lie: no copy in or out (for `wide`'s
  // 21 MB, two of a step's passes over the gradients). Every process asks, so that all agree.
  std::vector<size_t> area_offset(requests.size(), SIZE_MAX);
  std::shared_ptr<SharedMemoryAllreduce> areas;
  if (shared_memory_) {
    size_t area_bytes = 0;
    for (size_t b = 0; b < requests.size(); ++b) {
      const auto &request = requests[b];
      if (request.averaged_as_it_lies && request.options.device().is_cpu()) {
        area_offset[b] = area_bytes;
        const size_t bytes =
            static_cast<size_t>(request.numel) * request.options.dtype().itemsize();
        area_bytes += (bytes + 63) / 64 * 64;
      }
    }
    areas = shared_bucket_areas(std::max<size_t>(area_bytes, 64));
  }
  std::vector<BucketMemory> buckets(requests.size());
  for (size_t b = 0; b < requests.size(); ++b) {
    const auto &request = requests[b];
    auto &bucket = buckets[b];
    if (areas && area_offset[b] != SIZE_MAX) {
      // The tensors keep the mapping alive, .grad aliases included.
      bucket.flat_ = torch::from_blob(
          areas->own_area() + area_offset[b], {request.numel}, [areas](void *) {}, request.options);
      bucket.flat_.zero_();
      bucket.areas_ = areas;
      // Divided by the number of processes in the pass that writes the sum (sum_in_place).
      bucket.input_scale_ = 1.0;
    } else {
      bucket.flat_ = torch::zeros({request.numel}, request.options);
      // Averaged as it goes in: pre-divided (as DDP does, to keep sums in range) in the same
      // pass as the copy into the bucket.
      bucket.input_scale_ = 1.0 / size_;
    }
  }
  return buckets;
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::start_average(const BucketMemory &bucket,
                                                           const std::string &what) {
  if (bucket.areas_) {
    try {
      bucket.areas_->sum_in_place(bucket.flat_, 1.0 / size_); // the average
    } catch (const std::exception &error) {
      throw failure(what, error);
    }
    return {};
  }
  return start_sum(bucket.flat_, what);
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work> &work, const std::string &what) const {
  try {
    work->wait(timeout_);
  } catch (const std::exception &error) {
    // A work whose wait timed out is still Gloo's: its run loop completes the work's future
    // later, and destroying the work meanwhile races with that (TSan saw it). The job is
    // failing, so the work is kept for the rest of the process.
    static std::mutex mutex;
    static auto *abandoned = new std::vector<c10::intrusive_ptr<c10d::Work>>();
    {
      std::lock_guard<std::mutex> lock(mutex);
      abandoned->push_back(work);
    }
    throw failure(what, error);
  }
}

std::runtime_error ProcessGroup::failure(const std::string &what,
                                         const std::exception &error) const {
  const std::string message = message_of(error);
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool timed_out = lower.find("timed out") != std::string::npos;
  return std::runtime_error("accelerate: " + what + " failed on rank " + std::to_string(rank_) +
                            " of " + std::to_string(size_) +
                            " (a peer may have exited or timed out): " + message +
                            (timed_out ? peers_that_never_came() : std::string()));
}

// After a collective timed out: the ranks that waited in it time out too, within moments of
// each other, and check in at the store; a rank that has not within a few seconds never
// called it (it is busy or hung in its own code, or far behind). Gloo's "Operation timed out!"
// names no one.
std::string ProcessGroup::peers_that_never_came() const {
  const std::string prefix = "timed-out/";
  try {
    store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
    const auto window = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5));
    const auto deadline = std::chrono::steady_clock::now() + window;
    std::vector<int> missing;
    while (true) {
      missing.clear();
      for (int rank = 0; rank < size_; ++rank) {
        if (rank != rank_ && !store_->check({prefix + std::to_string(rank)})) {
          missing.push_back(rank);
        }
      }
      if (missing.empty() || std::chrono::steady_clock::now() >= deadline) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (missing.empty()) {
      return {};
    }
    std::string ranks;
    for (int rank : missing) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    }
    return "; rank(s) " + ranks +
           " did not reach it: busy or hung in their own code, far behind, or in another "
           "collective";
  } catch (const std::exception &) {
    return "; the rendezvous store is gone too (rank 0 exited or is unreachable)";
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::start_sum(const at::Tensor &tensor,
                                                       const std::string &what) {
  // The choice depends only on what every rank shares (the group, the device type), never on
  // one rank's tensor layout: ranks that chose differently would wait for each other forever.
  if (shared_memory_ && tensor.is_cpu()) {
    try {
      if (tensor.is_contiguous()) {
        shared_memory_->sum(tensor);
      } else {
        auto dense = tensor.contiguous();
        shared_memory_->sum(dense);
        tensor.copy_(dense);
      }
    } catch (const std::exception &error) {
      throw failure(what, error);
    }
    return {};
  }
  std::vector<at::Tensor> tensors{tensor};
  auto work = backend_->allreduce(tensors);
  test_fault_point("all-reduce");
  return work;
}

void ProcessGroup::sum(const at::Tensor &tensor, const std::string &what) {
  if (auto work = start_sum(tensor, what)) {
    wait(work, what);
  }
}

void ProcessGroup::all_reduce(const at::Tensor &tensor, c10d::ReduceOp op,
                              const std::string &what) {
  if (op == c10d::ReduceOp::SUM) {
    sum(tensor, what);
    return;
  }
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  wait(backend_->allreduce(tensors, options), what);
}

void ProcessGroup::broadcast(const at::Tensor &tensor, int root, const std::string &what) {
  // CPU tensors through shared memory, like sums and for the same reason: over Gloo each is a
  // loopback TCP round trip with thread hand-offs (the loader broadcasts every epoch's order).
  if (shared_memory_ && tensor.is_cpu()) {
    try {
      if (tensor.is_contiguous()) {
        shared_memory_->broadcast(tensor, root);
      } else {
        auto dense = tensor.contiguous();
        shared_memory_->broadcast(dense, root);
        tensor.copy_(dense);
      }
    } catch (const std::exception &error) {
      throw failure(what, error);
    }
    return;
  }
  if (backend_name_ == "nccl" && tensor.is_cpu()) {
    // NCCL takes CUDA tensors only: what the runtime broadcasts from the host (a loader's
    // order, a generator's state) goes through the current GPU.
    auto staged = tensor.to(c10::Device(c10::DeviceType::CUDA));
    broadcast(staged, root, what);
    tensor.copy_(staged);
    return;
  }
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  wait(backend_->broadcast(tensors, options), what);
}

void ProcessGroup::broadcast_coalesced(const std::vector<at::Tensor> &tensors, int root,
                                       const std::string &what, bool keep_versions) {
  std::map<std::pair<c10::ScalarType, std::string>, std::vector<at::Tensor>> by_kind;
  for (const auto &tensor : tensors) {
    if (tensor.defined() && tensor.numel() > 0) {
      by_kind[{tensor.scalar_type(), tensor.device().str()}].push_back(tensor);
    }
  }
  at::NoGradGuard no_grad;
  for (auto &[kind, group_tensors] : by_kind) {
    const auto flat = torch::utils::flatten_dense_tensors(group_tensors);
    broadcast(flat, root, what);
    const auto pieces = torch::utils::unflatten_dense_tensors(flat, group_tensors);
    std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd;
    if (keep_versions) {
      below_autograd.emplace();
    }
    for (size_t i = 0; i < group_tensors.size(); ++i) {
      group_tensors[i].copy_(pieces[i]);
    }
  }
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor &tensor,
                                                 const std::string &what) {
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size_; ++r) {
    outputs[0].push_back(at::empty_like(tensor));
  }
  std::vector<at::Tensor> inputs{tensor};
  wait(backend_->allgather(outputs, inputs), what);
  return std::move(outputs[0]);
}

void ProcessGroup::barrier() {
  c10d::BarrierOptions options;
  options.timeout = timeout_;
  wait(backend_->barrier(options), "barrier");
}

} // namespace accelerate::detail
