// DDP-grade gradient synchronisation for one model: gradients are packed into buckets as
// autograd produces them (a first gradient is written straight into its bucket, which autograd
// then adopts as .grad), each full bucket's communication starts at once (while backward still
// runs), and everything is waited for when backward ends; the averages stay in the buckets,
// which .grad shares. How a bucket is communicated (a plain all-reduce, a 16-bit cast,
// PowerSGD) and where its memory lives is not this file's business: each bucket has its
// BucketCommunicator (bucket_communicator.h), chosen at prepare.
//
// The sync holds its parameters weakly, and autograd reaches it through the parameters' own
// hooks (parameter_hooks.h): it never keeps a model alive, and once every parameter is gone
// the Accelerator drops it (alive()).
#pragma once

#include "bucket_communicator.h"
#include "comm_hook.h"
#include "process_group.h"

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace accelerate::detail {

class GradientSync : public std::enable_shared_from_this<GradientSync> {
public:
  struct Limits {
    size_t first_bucket_bytes = 1 << 20;
    size_t bucket_bytes = 25 << 20;
  };

  /// What happened during the last backward, in order, for tests and debugging.
  struct Event {
    enum Kind { GradientReady, BucketLaunched, Finalized } kind;
    size_t index; ///< parameter index, or bucket index
  };

  /// `parameters` in the model's registration order; those that need no gradient are skipped.
  /// `compression` chooses the buckets' communicators (make_bucket_communicators). `buffers`
  /// (Options::broadcast_buffers) become process 0's on every process at the end of each
  /// synchronising backward, after the gradients (finalize).
  static std::shared_ptr<GradientSync> create(std::shared_ptr<ProcessGroup> group,
                                              const std::vector<torch::Tensor> &parameters,
                                              Limits limits, Compression compression = {},
                                              const std::vector<torch::Tensor> &buffers = {});

  /// When disabled (accumulation steps that do not sync) gradients stay local.
  void set_enabled(bool enabled);
  bool enabled() const;

  /// Completes a backward pass: launches the buckets still waiting (parameters that got no
  /// gradient contribute zeros), finishes every bucket and writes the averages into .grad.
  /// Called by autograd when backward ends; safe to call again (does nothing then).
  void finalize();

  size_t bucket_count() const { return buckets_.size(); }
  std::vector<Event> last_events() const;

  /// Whether any of its parameters still exists (a model that died takes them all).
  bool alive() const;
  /// Whether `parameter` is one of its parameters.
  bool covers(const torch::Tensor &parameter) const;
  /// Its parameters that still exist, in the model's registration order.
  std::vector<torch::Tensor> live_parameters() const;
  /// Its buffers that still exist.
  std::vector<torch::Tensor> live_buffers() const;

  /// The parameter hooks' calls (parameter_hooks.h). Before autograd accumulates a gradient:
  /// a first gradient is written into its bucket and handed on in its place, so that autograd
  /// adopts the bucket as .grad (one pass over the gradient, where a zeroed .grad put in place
  /// first would cost two).
  torch::autograd::variable_list place_in_bucket(size_t slot,
                                                 const torch::autograd::variable_list &grads);
  /// After it accumulated: the gradient is in .grad; its bucket may start.
  void on_gradient_ready(size_t slot);

private:
  using WeakParameter = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  struct Slot {
    WeakParameter parameter{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
    c10::ScalarType dtype = c10::ScalarType::Float;
    c10::Device device = c10::kCPU;
    std::vector<int64_t> sizes;
    size_t bucket;
    int64_t offset;
    int64_t numel;
    int64_t position; ///< index within its bucket
    bool ready = false;
    bool scaled = false; ///< place_in_bucket wrote this step's gradient already divided
  };
  struct Bucket {
    torch::Tensor flat; ///< communicator->flat()
    std::unique_ptr<BucketCommunicator> communicator;
    std::vector<size_t> slots;
    int64_t flags_offset = 0; ///< where the per-parameter "has a gradient" flags start
    size_t pending = 0;
  };

  GradientSync(std::shared_ptr<ProcessGroup> group, Limits limits, Compression compression);
  void assign_buckets(const std::vector<torch::Tensor> &parameters);
  void install_hooks(const std::vector<torch::Tensor> &parameters);
  /// The slot's parameter, or an undefined tensor once it is gone.
  static torch::Tensor parameter_of(const Slot &slot) {
    return torch::Tensor(slot.parameter.lock());
  }
  void launch_ready_buckets();
  /// Makes the buffers process 0's, leaving their autograd version counters as they were.
  void broadcast_buffers();
  /// What a bucket's gradients are multiplied by on their way in (its communicator says).
  double bucket_scale(const Bucket &bucket) const;
  void copy_into_bucket(Slot &slot);
  torch::Tensor bucket_alias(const Slot &slot) const;
  /// Whether grad is the slot's own part of its bucket (what finalize leaves in .grad).
  bool lives_in_bucket(const torch::Tensor &grad, const Slot &slot) const;
  void start_backward_locked();

  std::shared_ptr<ProcessGroup> group_;
  Limits limits_;
  Compression compression_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<WeakParameter> buffers_; ///< weak, as the parameters
  size_t next_bucket_to_launch_ = 0;
  bool in_backward_ = false;
  bool enabled_ = true;
  std::vector<Event> events_;
  mutable std::mutex mutex_;
};

} // namespace accelerate::detail
