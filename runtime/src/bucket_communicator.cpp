#include "bucket_communicator.h"

#include <utility>

namespace accelerate::detail {
namespace {

// The bucket itself is averaged, by the group, wherever the group placed it.
class AllReduceCommunicator final : public BucketCommunicator {
public:
  AllReduceCommunicator(std::shared_ptr<ProcessGroup> group, BucketMemory memory)
      : group_(std::move(group)), memory_(std::move(memory)) {}
  const torch::Tensor &flat() const override { return memory_.flat(); }
  double input_scale() const override { return memory_.input_scale(); }
  void start(const std::string &what) override {
    // Waited for in finish(), unless the group averaged it at once (no work then).
    work_ = group_->start_average(memory_, what);
  }
  void finish(const std::string &what) override {
    if (work_) {
      group_->wait(work_, what);
      work_.reset();
    }
  }

private:
  std::shared_ptr<ProcessGroup> group_;
  BucketMemory memory_;
  c10::intrusive_ptr<c10d::Work> work_;
};

// fp16/bf16 (DDP's fp16_compress_hook, bf16_compress_hook): the bucket, holding this process's
// share of the average, is rounded into a 16-bit twin of itself, the twins are summed, and the
// sum is widened back into the bucket. The twin is allocated once.
class CastCommunicator final : public BucketCommunicator {
public:
  CastCommunicator(std::shared_ptr<ProcessGroup> group, BucketMemory memory,
                   c10::ScalarType wire_dtype)
      : group_(std::move(group)), flat_(memory.flat()),
        wire_(torch::empty(flat_.sizes(), flat_.options().dtype(wire_dtype))) {}
  const torch::Tensor &flat() const override { return flat_; }
  double input_scale() const override { return 1.0 / group_->size(); }
  void start(const std::string &what) override {
    wire_.copy_(flat_); // rounded to the wire dtype
    work_ = group_->start_sum(wire_, what);
  }
  void finish(const std::string &what) override {
    if (work_) {
      group_->wait(work_, what);
      work_.reset();
    }
    flat_.copy_(wire_); // widened back: the gradients stay in the parameters' dtype
  }

private:
  std::shared_ptr<ProcessGroup> group_;
  torch::Tensor flat_;
  torch::Tensor wire_;
  c10::intrusive_ptr<c10d::Work> work_;
};

// PowerSGD: the bucket's matrices are summed as low-rank factors (power_sgd.h).
class PowerSgdCommunicator final : public BucketCommunicator {
public:
  PowerSgdCommunicator(std::shared_ptr<ProcessGroup> group, BucketMemory memory,
                       const PowerSgdSettings &settings, const std::vector<BucketMatrix> &matrices)
      : group_(std::move(group)), flat_(memory.flat()), low_rank_(settings, matrices, flat_) {}
  const torch::Tensor &flat() const override { return flat_; }
  double input_scale() const override { return 1.0 / group_->size(); }
  void start(const std::string &what) override { low_rank_.launch(*group_, flat_, what); }
  void finish(const std::string &what) override { low_rank_.finish(*group_, flat_, what); }

private:
  std::shared_ptr<ProcessGroup> group_;
  torch::Tensor flat_;
  PowerSgdBucket low_rank_;
};

enum class Kind { AllReduce, Cast, PowerSgd };

Kind kind_of(const Compression &compression, const BucketLayout &bucket) {
  const auto dtype = c10::typeMetaToScalarType(bucket.options.dtype());
  if (!c10::isFloatingType(dtype)) {
    return Kind::AllReduce;
  }
  if (compression.power_sgd) {
    return Kind::PowerSgd;
  }
  if (compression.wire_dtype && dtype != *compression.wire_dtype) {
    return Kind::Cast;
  }
  return Kind::AllReduce;
}

} // namespace

std::vector<std::unique_ptr<BucketCommunicator>>
make_bucket_communicators(const std::shared_ptr<ProcessGroup> &group,
                          const Compression &compression,
                          const std::vector<BucketLayout> &buckets) {
  std::vector<Kind> kinds;
  std::vector<BucketRequest> requests;
  for (const auto &bucket : buckets) {
    kinds.push_back(kind_of(compression, bucket));
    // Only a bucket that is summed itself, not a compressed form of it, can be summed where it
    // lies.
    requests.push_back({bucket.numel, bucket.options, kinds.back() == Kind::AllReduce});
  }
  auto memory = group->allocate_buckets(requests);
  std::vector<std::unique_ptr<BucketCommunicator>> communicators;
  for (size_t b = 0; b < buckets.size(); ++b) {
    switch (kinds[b]) {
    case Kind::AllReduce:
      communicators.push_back(std::make_unique<AllReduceCommunicator>(group, std::move(memory[b])));
      break;
    case Kind::Cast:
      communicators.push_back(
          std::make_unique<CastCommunicator>(group, std::move(memory[b]), *compression.wire_dtype));
      break;
    case Kind::PowerSgd:
      communicators.push_back(std::make_unique<PowerSgdCommunicator>(
          group, std::move(memory[b]), *compression.power_sgd, buckets[b].matrices));
      break;
    }
  }
  return communicators;
}

} // namespace accelerate::detail
