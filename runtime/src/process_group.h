// The c10d communication base: a TCPStore rendezvous and a Gloo (CPU) or NCCL (CUDA) backend.
// Internal: c10d and gloo types never reach the public headers.
#pragma once

#include "accelerate/state.h"
#include "shared_memory_allreduce.h"

#include <c10/core/DeviceType.h>
#include <c10/core/TensorOptions.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace accelerate::detail {

struct ProcessGroupOptions {
  /// "gloo", "nccl", or "auto" (NCCL for CUDA devices, Gloo otherwise).
  std::string backend = "auto";
  /// Rendezvous and collective timeout.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// Sum CPU gradients through shared memory when every process runs on this machine.
  bool shared_memory = true;
  /// Settings every process must share, as name and value (gradient accumulation, mixed
  /// precision, the comm hook, ...). Compared at the rendezvous: processes started with
  /// different ones would fail later in a collective, hang, or train differently in silence.
  std::vector<std::pair<std::string, std::string>> must_agree;
};

class ProcessGroup;

/// What the reducer asks of ProcessGroup::allocate_buckets for one gradient bucket.
struct BucketRequest {
  int64_t numel = 0;
  at::TensorOptions options;
  /// Whether the bucket itself is what is summed (by start_average), rather than a compressed
  /// form of it: only such a bucket may be placed where the group sums it as it lies.
  bool averaged_as_it_lies = false;
};

/// A gradient bucket's memory, as ProcessGroup::allocate_buckets placed it, and what
/// ProcessGroup::start_average needs to average it there.
class BucketMemory {
public:
  /// Zeroed and contiguous, with the requested dtype and device.
  const at::Tensor &flat() const { return flat_; }
  /// What this process's contributions are multiplied by as they are written into flat(), for
  /// start_average to leave their average: 1 / size() where it sums shares, 1 where the group
  /// divides the sum as it writes it (one pass over the gradients less).
  double input_scale() const { return input_scale_; }

private:
  friend class ProcessGroup;
  at::Tensor flat_;
  double input_scale_ = 1.0;
  /// Non-null: flat_ lies in this process's area of memory every process maps, and is summed
  /// there.
  std::shared_ptr<SharedMemoryAllreduce> areas_;
};

class ProcessGroup {
public:
  /// Joins the job described by `info`: rank 0 hosts the TCPStore at master_addr:master_port,
  /// every rank checks in, then the backend is created. Throws std::runtime_error naming the
  /// address and the ranks that did not arrive when the rendezvous fails or times out.
  static std::shared_ptr<ProcessGroup> connect(const ProcessInfo &info, c10::DeviceType device,
                                               const ProcessGroupOptions &options);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string &backend_name() const { return backend_name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  c10d::Backend &backend() { return *backend_; }
  c10d::Store &store() { return *store_; }
  /// The all-reduce for CPU gradients when all processes share this machine, else nullptr
  /// (then shared_memory_unused_because() says why).
  SharedMemoryAllreduce *shared_memory() const { return shared_memory_.get(); }
  const std::string &shared_memory_unused_because() const { return shared_memory_unused_; }
  /// Which path CPU gradient sums take, in words: "shared memory", or the backend and why not.
  std::string gradient_transport() const;
  /// Memory for one model's gradient buckets, one per request, in order. The group decides
  /// where each lives: with shared memory, a CPU bucket averaged as it lies is placed in this
  /// process's area of a segment every process maps, and summed there (no copy in or out);
  /// everything else is an ordinary tensor. Collective: every process calls it with the same
  /// requests, in the same order as its other collectives.
  std::vector<BucketMemory> allocate_buckets(const std::vector<BucketRequest> &requests);

  // Collectives. `what` names the collective in errors. The group picks the transport, as
  // ProcessGroupNCCL hides its intra-node path: CPU sums and broadcasts go through shared
  // memory when the group has it, everything else through the backend (Gloo or NCCL).

  /// Starts replacing `tensor` by its sum over the processes. Returns the work to wait for, or
  /// null when the sum is already done (shared memory sums at once: on the CPU it is memory
  /// copies the cores would do anyway, so there is nothing to overlap it with).
  c10::intrusive_ptr<c10d::Work> start_sum(const at::Tensor &tensor, const std::string &what);
  /// Starts replacing `bucket` (from allocate_buckets), which holds this process's
  /// contributions multiplied by its input_scale(), by their average over the processes.
  /// Returns the work to wait for, or null when the average is already done.
  c10::intrusive_ptr<c10d::Work> start_average(const BucketMemory &bucket, const std::string &what);
  /// Replaces `tensor` by its sum over the processes.
  void sum(const at::Tensor &tensor, const std::string &what);
  /// Replaces `tensor` by its minimum, maximum, ... over the processes (SUM as sum()).
  void all_reduce(const at::Tensor &tensor, c10d::ReduceOp op, const std::string &what);
  /// Replaces `tensor` by process `root`'s.
  void broadcast(const at::Tensor &tensor, int root, const std::string &what);
  /// Replaces each of `tensors` by process `root`'s, in one broadcast per dtype and device
  /// (a model's parameters, its buffers). Empty tensors are left alone. `keep_versions`: the
  /// values are written below autograd, so that their version counters do not move (for
  /// tensors a kept graph may have saved; see GradientSync::broadcast_buffers).
  void broadcast_coalesced(const std::vector<at::Tensor> &tensors, int root,
                           const std::string &what, bool keep_versions = false);
  /// Every process's `tensor` (same shape everywhere), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor &tensor, const std::string &what);
  void barrier();

  /// Waits for `work`, turning c10d's errors into one that says which collective failed.
  void wait(const c10::intrusive_ptr<c10d::Work> &work, const std::string &what) const;
  /// The error for a collective `what` that failed with `error`: which, where, why.
  std::runtime_error failure(const std::string &what, const std::exception &error) const;

private:
  ProcessGroup() = default;
  /// Memory for CPU gradient buckets that every process maps, one area of `bytes` each, so
  /// that they are summed where they lie (SharedMemoryAllreduce::sum_in_place). Collective
  /// like allocate_buckets. Null without shared memory or when /dev/shm has no room for it
  /// (the buckets then stay in private memory).
  std::shared_ptr<SharedMemoryAllreduce> shared_bucket_areas(size_t bytes);
  /// After a timeout: "; rank(s) 2 did not reach it: ..." for the ranks that did not time out
  /// with this one, or nothing.
  std::string peers_that_never_came() const;

  int rank_ = 0;
  int size_ = 1;
  std::string backend_name_;
  std::chrono::milliseconds timeout_{0};
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  std::unique_ptr<SharedMemoryAllreduce> shared_memory_;
  std::string shared_memory_unused_;
  int bucket_areas_made_ = 0; ///< names each segment's keys in the store
};

/// "12.5 s", for error messages.
std::string seconds_text(std::chrono::milliseconds timeout);

/// An exception's message without the C++ backtrace c10's errors append.
std::string message_of(const std::exception &error);

/// Resolves "auto" and checks that the backend was compiled in; throws otherwise.
std::string choose_backend(const std::string &requested, c10::DeviceType device);

} // namespace accelerate::detail
