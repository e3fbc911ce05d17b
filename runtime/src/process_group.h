// The c10d communication base: a TCPStore rendezvous and a Gloo (CPU) or NCCL (CUDA) backend.
// Internal: c10d and gloo types never reach the public headers.
#pragma once

#include "accelerate/state.h"
#include "shared_memory_allreduce.h"

#include <c10/core/DeviceType.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
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
  /// Memory for CPU gradient buckets that every process maps, one area of `bytes` each, so
  /// that they are summed where they lie (SharedMemoryAllreduce::sum_in_place). Collective:
  /// every process calls it, with the same size, in the same order. Null without shared memory
  /// or when /dev/shm has no room for it (the buckets then stay in private memory).
  std::shared_ptr<SharedMemoryAllreduce> shared_bucket_areas(size_t bytes);

  // Collectives. `what` names the collective in errors. The group picks the transport, as
  // ProcessGroupNCCL hides its intra-node path: CPU sums and broadcasts go through shared
  // memory when the group has it, everything else through the backend (Gloo or NCCL).

  /// Starts replacing `tensor` by its sum over the processes. Returns the work to wait for, or
  /// null when the sum is already done (shared memory sums at once: on the CPU it is memory
  /// copies the cores would do anyway, so there is nothing to overlap it with).
  c10::intrusive_ptr<c10d::Work> start_sum(const at::Tensor &tensor, const std::string &what);
  /// Replaces `tensor` by its sum over the processes.
  void sum(const at::Tensor &tensor, const std::string &what);
  /// Replaces `tensor` by its minimum, maximum, ... over the processes (SUM as sum()).
  void all_reduce(const at::Tensor &tensor, c10d::ReduceOp op, const std::string &what);
  /// Replaces `tensor` by process `root`'s.
  void broadcast(const at::Tensor &tensor, int root, const std::string &what);
  /// Every process's `tensor` (same shape everywhere), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor &tensor, const std::string &what);
  void barrier();

  /// Waits for `work`, turning c10d's errors into one that says which collective failed.
  void wait(const c10::intrusive_ptr<c10d::Work> &work, const std::string &what) const;
  /// The error for a collective `what` that failed with `error`: which, where, why.
  std::runtime_error failure(const std::string &what, const std::exception &error) const;

private:
  ProcessGroup() = default;

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
