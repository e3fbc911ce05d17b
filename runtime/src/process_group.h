// The c10d communication base: a TCPStore rendezvous and a Gloo (CPU) or NCCL (CUDA) backend.
// Internal: c10d and gloo types never reach the public headers.
#pragma once

#include "accelerate/state.h"

#include <c10/core/DeviceType.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace accelerate::detail {

struct ProcessGroupOptions {
  /// "gloo", "nccl", or "auto" (NCCL for CUDA devices, Gloo otherwise).
  std::string backend = "auto";
  /// Rendezvous and collective timeout.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
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

  /// Waits for `work`, turning c10d's errors into one that says which collective failed.
  void wait(const c10::intrusive_ptr<c10d::Work> &work, const std::string &what) const;

  void barrier();

private:
  ProcessGroup() = default;

  int rank_ = 0;
  int size_ = 1;
  std::string backend_name_;
  std::chrono::milliseconds timeout_{0};
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
};

/// Resolves "auto" and checks that the backend was compiled in; throws otherwise.
std::string choose_backend(const std::string &requested, c10::DeviceType device);

} // namespace accelerate::detail
