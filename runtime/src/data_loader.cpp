#include "accelerate/data_loader.h"

#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>

namespace accelerate::detail {
namespace {

// The order, extended from its start (round and round for a tiny dataset) to `size` samples.
std::vector<int64_t> wrapped(const std::vector<int64_t> &order, size_t size) {
  std::vector<int64_t> extended = order;
  for (size_t i = 0; extended.size() < size; i = (i + 1) % order.size()) {
    extended.push_back(order[i]);
  }
  return extended;
}

// split_batches: global batch k is order[k*B, (k+1)*B); this process takes its consecutive
// B/N rows of each, so the processes' slices of batch k, in rank order, are that batch.
ShardPlan plan_split(const std::vector<int64_t> &order, size_t batch_size, size_t rank,
                     size_t world, bool even_batches, bool drop_last) {
  ShardPlan plan;
  const size_t samples = order.size();
  const size_t slice = batch_size / world;
  const size_t full = samples / batch_size;
  const size_t tail = samples % batch_size;
  std::vector<int64_t> extended = order;
  size_t batches = full;
  if (tail != 0 && !drop_last && even_batches) {
    // The partial batch is filled from the start of the epoch: every process gets B/N rows,
    // and gather_for_metrics keeps the first `tail` rows of the gathered batch.
    batches = full + 1;
    extended = wrapped(order, batches * batch_size);
    plan.remainder = static_cast<int64_t>(tail);
    plan.repeated = batches * batch_size - samples;
  }
  for (size_t k = 0; k < batches; ++k) {
    const auto begin =
        extended.begin() + static_cast<std::ptrdiff_t>(k * batch_size + rank * slice);
    plan.batches.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(slice));
  }
  if (tail != 0 && !drop_last && !even_batches && rank * slice < tail) {
    // Without even_batches the partial batch is cut as it is: the processes whose rows it
    // reaches get them (the last of those fewer than B/N), the others one batch fewer.
    const auto begin =
        order.begin() + static_cast<std::ptrdiff_t>(full * batch_size + rank * slice);
    const size_t rows = std::min(slice, tail - rank * slice);
    plan.batches.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(rows));
  }
  return plan;
}

} // namespace

ShardPlan plan_shard(const std::vector<int64_t> &order, size_t batch_size, int rank, int world_size,
                     bool even_batches, bool drop_last, bool split_batches) {
  TORCH_CHECK(batch_size > 0, "accelerate: the batch size must be positive");
  ShardPlan plan;
  const size_t samples = order.size();
  const size_t world = static_cast<size_t>(world_size);
  if (samples == 0) {
    return plan;
  }
  if (split_batches && world > 1) {
    check_split_batch_size(batch_size, world_size);
    return plan_split(order, batch_size, static_cast<size_t>(rank), world, even_batches, drop_last);
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
    extended = wrapped(order, needed);
    plan.repeated = needed - samples;
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

void note_repeated_samples(size_t repeated, size_t samples, size_t global_batch) {
  std::cerr << "accel: note: the " << samples << " samples do not fill the last global batch of "
            << global_batch << ": " << repeated << (repeated == 1 ? " sample" : " samples")
            << " from the start of the epoch are repeated so that every process gets its share "
               "(even_batches, as in Accelerate); epoch statistics count them and training "
               "sees them twice. A data set size that is a multiple of "
            << global_batch << ", or drop_last, makes the run match one process exactly.\n";
}

void check_split_batch_size(size_t batch_size, int world_size) {
  const auto world = static_cast<size_t>(world_size);
  if (batch_size % world == 0) {
    return;
  }
  const size_t below = batch_size / world * world;
  const size_t above = below + world;
  throw std::invalid_argument(
      "accelerate: prepare_data_loader: split_batches gives each of the " +
      std::to_string(world_size) + " processes an equal part of every batch, but the batch size " +
      std::to_string(batch_size) + " is not a multiple of " + std::to_string(world_size) +
      "; use a batch size that is (" + (below > 0 ? std::to_string(below) + " or " : "") +
      std::to_string(above) + "), or turn split_batches off (Options::split_batches, " +
      "ACCELERATE_SPLIT_BATCHES, accel launch --split_batches)");
}

std::vector<int64_t> plan_iterations(int64_t iterations, int rank, int world_size,
                                     bool even_batches, bool split_batches) {
  std::vector<int64_t> picks;
  if (iterations <= 0) {
    return picks;
  }
  if (split_batches || world_size == 1) {
    picks.resize(static_cast<size_t>(iterations));
    std::iota(picks.begin(), picks.end(), int64_t{0});
    return picks;
  }
  int64_t count = iterations;
  if (even_batches && count % world_size != 0) {
    count = (count + world_size - 1) / world_size * world_size; // wraps around to the first
  }
  for (int64_t k = rank; k < count; k += world_size) {
    picks.push_back(k % iterations);
  }
  return picks;
}

std::pair<int64_t, int64_t> row_range_of_process(int64_t rows, int rank, int world_size,
                                                 bool &repeated) {
  repeated = false;
  if (world_size == 1 || rows == 0) {
    return {0, rows};
  }
  const int64_t begin = rank * rows / world_size, end = (rank + 1) * rows / world_size;
  if (begin == end) {
    repeated = true;
    return {rank % rows, rank % rows + 1};
  }
  return {begin, end};
}

torch::Tensor rows_of_process(const torch::Tensor &batch, int rank, int world_size,
                              bool &repeated) {
  repeated = false;
  if (batch.dim() == 0) {
    return batch;
  }
  const auto range = row_range_of_process(batch.size(0), rank, world_size, repeated);
  return range.first == 0 && range.second == batch.size(0)
             ? batch
             : batch.slice(0, range.first, range.second);
}

void check_rows_agree(const char *what, int64_t rows, int64_t other) {
  TORCH_CHECK(rows == other,
              "accelerate: split_batches cuts each tensor of a batch by its rows "
              "between the processes, and this batch's first tensor has ",
              rows, " rows where another ", what, " has ",
              other < 0 ? std::string("none (no dimensions)") : std::to_string(other),
              ": dimension 0 is not the batch in every one of them (token ids of the whole "
              "batch beside per-sequence offsets, say), so the parts would not belong "
              "together. Make dimension 0 the batch in each tensor, or run without "
              "split_batches");
}

} // namespace accelerate::detail

namespace accelerate {

BatchRange::BatchRange(int64_t begin, int64_t end, int64_t step,
                       std::shared_ptr<detail::LoaderContext> context)
    : begin_(begin), step_(step), context_(std::move(context)) {
  if (step <= 0) {
    throw std::invalid_argument("accelerate: batch_range: the step must be positive, not " +
                                std::to_string(step));
  }
  const int64_t iterations = end > begin ? (end - begin + step - 1) / step : 0;
  picks_ = detail::plan_iterations(iterations, context_->rank, context_->world_size,
                                   context_->even_batches, context_->split_batches);
  const int64_t runs = static_cast<int64_t>(picks_.size()) * context_->world_size;
  if (!context_->split_batches && context_->world_size > 1 && runs > iterations &&
      context_->rank == 0 && !context_->noted_repeated_iterations) {
    context_->noted_repeated_iterations = true;
    std::cerr << "accel: note: a loop's " << iterations << " batches do not divide among the "
              << context_->world_size << " processes: the first " << runs - iterations
              << " are run again so that every process runs as many (even_batches, as in "
                 "Accelerate); a number of batches that is a multiple of "
              << context_->world_size << " makes the run match one process exactly.\n";
  }
}

BatchRange::Iterator BatchRange::begin() {
  finished_ = false;
  context_->end_of_dataloader = false;
  return Iterator(this, 0);
}

int64_t BatchRange::Iterator::operator*() const {
  range_->context_->end_of_dataloader = at_ + 1 == range_->picks_.size();
  range_->context_->remainder = -1;
  return range_->begin_ + range_->picks_[at_] * range_->step_;
}

bool BatchRange::Iterator::operator==(const Iterator &other) const {
  const bool equal = at_ == other.at_;
  if (equal && at_ == range_->picks_.size()) {
    range_->finish_pass();
  }
  return equal;
}

void BatchRange::finish_pass() {
  if (finished_) {
    return;
  }
  finished_ = true;
  if (context_->synchronise_random_state) {
    context_->synchronise_random_state();
  }
}

} // namespace accelerate
