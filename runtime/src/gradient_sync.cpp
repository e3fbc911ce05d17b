#include "gradient_sync.h"

#include "parameter_hooks.h"

#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace accelerate::detail {
namespace {

std::string bucket_text(size_t bucket) {
  return "gradient all-reduce of bucket " + std::to_string(bucket);
}

} // namespace

std::shared_ptr<GradientSync> GradientSync::create(std::shared_ptr<ProcessGroup> group,
                                                   const std::vector<torch::Tensor> &parameters,
                                                   Limits limits, Compression compression,
                                                   const std::vector<torch::Tensor> &buffers) {
  std::shared_ptr<GradientSync> sync(
      new GradientSync(std::move(group), limits, std::move(compression)));
  for (const auto &buffer : buffers) {
    sync->buffers_.emplace_back(buffer.getIntrusivePtr());
  }
  sync->assign_buckets(parameters);
  sync->install_hooks(parameters);
  return sync;
}

GradientSync::GradientSync(std::shared_ptr<ProcessGroup> group, Limits limits,
                           Compression compression)
    : group_(std::move(group)), limits_(limits), compression_(std::move(compression)) {}

void GradientSync::assign_buckets(const std::vector<torch::Tensor> &parameters) {
  // Gradients arrive roughly in reverse registration order (the last layer's first), so
  // buckets are filled in that order; a bucket holds one dtype on one device.
  std::map<std::pair<c10::ScalarType, std::string>, size_t> open_bucket;
  std::vector<size_t> bucket_bytes;
  for (auto it = parameters.rbegin(); it != parameters.rend(); ++it) {
    const auto &parameter = *it;
    if (!parameter.requires_grad()) {
      continue;
    }
    const auto key = std::make_pair(parameter.scalar_type(), parameter.device().str());
    const size_t bytes = parameter.numel() * parameter.element_size();
    auto found = open_bucket.find(key);
    if (found != open_bucket.end()) {
      const size_t cap = found->second == 0 ? limits_.first_bucket_bytes : limits_.bucket_bytes;
      if (bucket_bytes[found->second] + bytes > cap && !buckets_[found->second].slots.empty()) {
        open_bucket.erase(found);
        found = open_bucket.end();
      }
    }
    if (found == open_bucket.end()) {
      found = open_bucket.emplace(key, buckets_.size()).first;
      buckets_.emplace_back();
      bucket_bytes.push_back(0);
    }
    const size_t bucket = found->second;
    Slot slot;
    slot.parameter = WeakParameter(parameter.getIntrusivePtr());
    slot.dtype = parameter.scalar_type();
    slot.device = parameter.device();
    slot.sizes = parameter.sizes().vec();
    slot.bucket = bucket;
    slot.offset = static_cast<int64_t>(bucket_bytes[bucket] / parameter.element_size());
    slot.position = static_cast<int64_t>(buckets_[bucket].slots.size());
    slot.numel = parameter.numel();
    buckets_[bucket].slots.push_back(slots_.size());
    bucket_bytes[bucket] += bytes;
    slots_.push_back(slot);
  }
  std::vector<BucketLayout> layouts;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    // After the gradients, one flag per parameter: 1 where this process has a gradient for it.
    // Summed with the gradients, it tells which parameters no process used, whose .grad is
    // then left as it is, as in a single process.
    auto &bucket = buckets_[b];
    const auto &first = slots_[bucket.slots.front()];
    const auto elements = static_cast<int64_t>(bucket_bytes[b] / c10::elementSize(first.dtype));
    bucket.flags_offset = elements;
    bucket.pending = bucket.slots.size();
    BucketLayout layout;
    layout.numel = elements + static_cast<int64_t>(bucket.slots.size());
    layout.options = at::TensorOptions().dtype(first.dtype).device(first.device);
    for (size_t index : bucket.slots) {
      const auto &slot = slots_[index];
      if (slot.sizes.size() >= 2 && slot.numel > 0) {
        // As DDP: shape[0] rows, everything else (a convolution's kernel too) in the columns.
        layout.matrices.push_back({slot.offset, slot.sizes[0], slot.numel / slot.sizes[0]});
      }
    }
    layouts.push_back(std::move(layout));
  }
  // Every process asks for the same buckets, so that all agree on where they live.
  auto communicators = make_bucket_communicators(group_, compression_, layouts);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].communicator = std::move(communicators[b]);
    buckets_[b].flat = buckets_[b].communicator->flat();
  }
}

void GradientSync::install_hooks(const std::vector<torch::Tensor> &parameters) {
  // Through the parameters' own hooks (parameter_hooks.h), which outlive neither the parameter
  // nor this sync; a sync made later over the same parameter takes them over.
  std::weak_ptr<GradientSync> weak = shared_from_this();
  std::unordered_map<const c10::TensorImpl *, size_t> slot_of;
  for (size_t i = 0; i < slots_.size(); ++i) {
    slot_of.emplace(slots_[i].parameter._unsafe_get_target(), i);
  }
  for (const auto &parameter : parameters) {
    const auto found = slot_of.find(parameter.unsafeGetTensorImpl());
    if (found != slot_of.end()) { // parameters that need no gradient have no slot
      auto &targets = parameter_hooks(parameter);
      targets.sync = weak;
      targets.slot = found->second;
    }
  }
}

bool GradientSync::alive() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const Slot &slot) { return !slot.parameter.expired(); });
}

bool GradientSync::covers(const torch::Tensor &parameter) const {
  return std::any_of(slots_.begin(), slots_.end(), [&](const Slot &slot) {
    return !slot.parameter.expired() &&
           slot.parameter._unsafe_get_target() == parameter.unsafeGetTensorImpl();
  });
}

std::vector<torch::Tensor> GradientSync::live_buffers() const {
  std::vector<torch::Tensor> buffers;
  for (const auto &weak : buffers_) {
    if (torch::Tensor buffer(weak.lock()); buffer.defined()) {
      buffers.push_back(std::move(buffer));
    }
  }
  return buffers;
}

std::vector<torch::Tensor> GradientSync::live_parameters() const {
  std::vector<torch::Tensor> parameters;
  // Slots were filled in reverse registration order.
  for (auto slot = slots_.rbegin(); slot != slots_.rend(); ++slot) {
    if (auto parameter = parameter_of(*slot); parameter.defined()) {
      parameters.push_back(std::move(parameter));
    }
  }
  return parameters;
}

void GradientSync::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = enabled;
}

bool GradientSync::enabled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return enabled_;
}

void GradientSync::start_backward_locked() {
  in_backward_ = true;
  events_.clear();
  // finalize() runs when this backward pass ends, whoever called backward.
  std::weak_ptr<GradientSync> weak = shared_from_this();
  torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto sync = weak.lock()) {
      sync->finalize();
    }
  });
}

bool GradientSync::lives_in_bucket(const torch::Tensor &grad, const Slot &slot) const {
  const auto &flat = buckets_[slot.bucket].flat;
  return grad.defined() && grad.is_alias_of(flat) &&
         grad.storage_offset() == flat.storage_offset() + slot.offset && grad.is_contiguous();
}

torch::Tensor GradientSync::bucket_alias(const Slot &slot) const {
  const auto &flat = buckets_[slot.bucket].flat;
  const auto shaped = flat.narrow(0, slot.offset, slot.numel).view(slot.sizes);
  // set_ rather than the view itself: a view's .grad makes LibTorch's zero_grad fail (detach_).
  torch::NoGradGuard no_grad;
  return torch::empty({0}, flat.options())
      .set_(flat.storage(), shaped.storage_offset(), shaped.sizes(), shaped.strides());
}

torch::autograd::variable_list
GradientSync::place_in_bucket(size_t index, const torch::autograd::variable_list &grads) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto &slot = slots_[index];
  // Only a parameter's first gradient of a synchronising step, dense and in its own dtype;
  // with create_graph autograd keeps its own copy anyway. Anything else is accumulated by
  // autograd as usual and copied into the bucket when ready.
  const auto parameter = parameter_of(slot);
  if (!enabled_ || slot.ready || grads.size() != 1 || !parameter.defined() ||
      parameter.grad().defined() || torch::GradMode::is_enabled()) {
    return grads;
  }
  const auto &grad = grads[0];
  if (!grad.defined() || grad.layout() != c10::kStrided || grad.scalar_type() != slot.dtype ||
      grad.device() != slot.device || !grad.sizes().equals(slot.sizes)) {
    return grads;
  }
  auto alias = bucket_alias(slot);
  const double scale = bucket_scale(buckets_[slot.bucket]);
  torch::NoGradGuard no_grad;
  if (scale == 1.0) {
    alias.copy_(grad);
  } else {
    at::mul_out(alias, grad, scale);
  }
  slot.scaled = true;
  // The alias is the only reference to its tensor, so autograd adopts it as .grad (a detached
  // alias of the bucket) instead of cloning it; the fresh gradient is freed by the caller.
  return {std::move(alias)};
}

double GradientSync::bucket_scale(const Bucket &bucket) const {
  // Averaged as it goes in, in the same pass as the copy, unless the communicator divides the
  // sum itself.
  return bucket.communicator->input_scale();
}

void GradientSync::copy_into_bucket(Slot &slot) {
  auto &bucket = buckets_[slot.bucket];
  auto view = bucket.flat.narrow(0, slot.offset, slot.numel);
  // A parameter that is gone (its model died mid-step) contributes nothing, as an unused one.
  const auto parameter = parameter_of(slot);
  const auto grad = parameter.defined() ? parameter.grad() : torch::Tensor();
  const bool has_gradient = grad.defined();
  // A gradient place_in_bucket wrote is divided already, also when autograd cloned it.
  const double scale = std::exchange(slot.scaled, false) ? 1.0 : bucket_scale(bucket);
  if (!has_gradient) {
    view.zero_();
  } else if (!lives_in_bucket(grad, slot)) {
    if (scale == 1.0) {
      view.copy_(grad.reshape({-1}));
    } else {
      at::mul_out(view, grad.reshape({-1}), scale);
    }
  } else if (scale != 1.0) {
    view.mul_(scale); // accumulated in place into the average of an earlier step
  }
  bucket.flat[bucket.flags_offset + slot.position].fill_(has_gradient ? 1.0 : 0.0);
  slot.ready = true;
  --bucket.pending;
}

void GradientSync::on_gradient_ready(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_) {
    return;
  }
  if (!in_backward_) {
    start_backward_locked();
  }
  if (slots_[index].ready) {
    return;
  }
  events_.push_back({Event::GradientReady, index});
  copy_into_bucket(slots_[index]);
  launch_ready_buckets();
}

void GradientSync::launch_ready_buckets() {
  // Buckets start in index order on every process: collectives must match across processes.
  while (next_bucket_to_launch_ < buckets_.size() &&
         buckets_[next_bucket_to_launch_].pending == 0) {
    events_.push_back({Event::BucketLaunched, next_bucket_to_launch_});
    buckets_[next_bucket_to_launch_].communicator->start(bucket_text(next_bucket_to_launch_));
    ++next_bucket_to_launch_;
  }
}

void GradientSync::finalize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) {
    return;
  }
  // Parameters autograd never reached in this step still take part, with what they have.
  for (auto &slot : slots_) {
    if (!slot.ready) {
      copy_into_bucket(slot);
    }
  }
  launch_ready_buckets();
  in_backward_ = false;
  next_bucket_to_launch_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    auto &bucket = buckets_[b];
    bucket.communicator->finish(bucket_text(b));
    bucket.pending = bucket.slots.size();
    const auto used_tensor =
        bucket.flat.narrow(0, bucket.flags_offset, bucket.slots.size()).gt(0).to(torch::kCPU);
    const auto used = used_tensor.accessor<bool, 1>();
    for (size_t index : bucket.slots) {
      auto &slot = slots_[index];
      slot.ready = false;
      if (!used[slot.position]) {
        continue; // no process used it: .grad stays as it was (undefined), as in one process
      }
      // The average becomes the gradient where it lies, in the bucket: no copy back (for a
      // 21 MB model, one memcpy a step). The tensor shares the bucket's storage without being an
      // autograd view, so the optimizer's zero_grad (detach_, zero_ or reset) works on it.
      const auto parameter = parameter_of(slot);
      if (!parameter.defined()) {
        continue;
      }
      auto &grad = parameter.mutable_grad();
      if (!lives_in_bucket(grad, slot)) {
        grad = bucket_alias(slot);
      }
    }
  }
  broadcast_buffers();
  events_.push_back({Event::Finalized, 0});
}

void GradientSync::broadcast_buffers() {
  if (buffers_.empty()) {
    return; // the common case (no BatchNorm): no collective at all
  }
  // DDP broadcasts buffers from process 0 before each forward pass; LibTorch has no forward
  // hooks, so this happens at the end of each synchronising backward instead, and the next
  // forward starts from process 0's buffers just the same. Written below autograd, so that
  // their version counters do not move: a graph kept with retain_graph saved BatchNorm's
  // running statistics, and would refuse a second backward if they had been written (its
  // backward in training mode does not read them; in eval mode they are not updated, so every
  // process holds the same values and the copy changes nothing).
  group_->broadcast_coalesced(live_buffers(), 0, "broadcast of the model's buffers",
                              /*keep_versions=*/true);
}

std::vector<GradientSync::Event> GradientSync::last_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

} // namespace accelerate::detail
