#include "accelerate/data_loader.h"

namespace accelerate::detail {

ShardPlan plan_shard(const std::vector<int64_t> &order, size_t batch_size, int rank, int world_size,
                     bool even_batches, bool drop_last) {
  TORCH_CHECK(batch_size > 0, "accelerate: the batch size must be positive");
  ShardPlan plan;
  const size_t samples = order.size();
  const size_t world = static_cast<size_t>(world_size);
  if (samples == 0) {
    return plan;
  }
  std::vector<int64_t> extended = order;
  size_t batches = 0;
  if (drop_last) {
    // Only full batches, and only as many as every process can have.
    batches = (samples / batch_size) / world * world;
  } else if (even_batches && world > 1) {
    const size_t total = (samples + batch_size - 1) / batch_size;
    batches = (total + world - 1) / world * world;
    const size_t needed = batches * batch_size;
    for (size_t i = 0; extended.size() < needed; i = (i + 1) % samples) {
      extended.push_back(order[i]);
    }
    const size_t step = batch_size * world;
    plan.remainder = needed == samples ? -1 : static_cast<int64_t>(samples % step);
    if (plan.remainder == 0) {
      plan.remainder = -1;
    }
  } else {
    batches = (samples + batch_size - 1) / batch_size;
  }
  for (size_t k = static_cast<size_t>(rank); k < batches; k += world) {
    const size_t begin = k * batch_size;
    const size_t end = std::min(begin + batch_size, extended.size());
    plan.batches.emplace_back(extended.begin() + begin, extended.begin() + end);
  }
  return plan;
}

} // namespace accelerate::detail
