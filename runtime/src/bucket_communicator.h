// How one gradient bucket is communicated: the seam between the reducer (gradient_sync.h), which
// fills buckets from autograd's hooks and finalizes them, and what travels between processes.
// One implementation per kind, chosen for each bucket once, at prepare, from Options::comm_hook:
// a plain all-reduce (the average), a 16-bit cast (fp16/bf16, as DDP's compression hooks) and
// PowerSGD (power_sgd.h). None of them knows the transport: the process group places each
// bucket's memory and chooses the path of every sum (process_group.h).
#pragma once

#include "comm_hook.h"
#include "power_sgd.h"
#include "process_group.h"

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace accelerate::detail {

/// A bucket as the reducer laid it out.
struct BucketLayout {
  /// The parameters' gradients, then one "has a gradient" flag per parameter.
  int64_t numel = 0;
  /// The parameters' dtype and device.
  at::TensorOptions options;
  /// Every parameter of two or more dimensions, as a matrix (PowerSGD compresses them).
  std::vector<BucketMatrix> matrices;
};

/// One bucket's communication. The reducer writes each gradient into flat() multiplied by
/// input_scale(), calls start() once the bucket is full and finish() before the optimizer reads
/// the gradients; then flat() holds the average over the processes, in the parameters' dtype.
/// Every process starts and finishes its buckets in bucket order, so that the collectives match.
class BucketCommunicator {
public:
  virtual ~BucketCommunicator() = default;
  /// The bucket's memory, where the process group placed it; .grad shares it after finish().
  virtual const torch::Tensor &flat() const = 0;
  /// What a gradient is multiplied by on its way into the bucket: 1 / processes where the
  /// average is a sum of shares, 1 where the sum is divided as it is written.
  virtual double input_scale() const = 0;
  /// Starts the bucket's reduction; `what` names it in errors.
  virtual void start(const std::string &what) = 0;
  /// Completes it: flat() holds the average.
  virtual void finish(const std::string &what) = 0;
};

/// The communicators of one model's buckets, in the same order, each with its memory from
/// `group` (ProcessGroup::allocate_buckets). `compression` chooses the kind: a 16-bit cast or
/// PowerSGD for floating-point buckets, the plain all-reduce for the others and without it.
/// Collective, as allocate_buckets is: every process calls it with the same buckets.
std::vector<std::unique_ptr<BucketCommunicator>>
make_bucket_communicators(const std::shared_ptr<ProcessGroup> &group,
                          const Compression &compression, const std::vector<BucketLayout> &buckets);

} // namespace accelerate::detail
