// Sharded data loading: every process takes its own batches of one shared shuffle per epoch,
// like Hugging Face Accelerate's BatchSamplerShard, and gets them on its device.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace accelerate {
namespace detail {

/// Where a prepared loader is in its epochs: what save_state keeps and load_state restores.
struct LoaderProgress {
  size_t dataset_size = 0; ///< what the loader was made with, to match it at load_state
  size_t batch_size = 0;
  bool split_batches = false; ///< batches split across processes: `delivered` counts slices
  std::vector<int64_t> order; ///< the current epoch's sample order, the same on every process
  size_t delivered = 0;       ///< batches of the current epoch handed to the program
  size_t batches = 0;         ///< batches of the current epoch for this process
  int64_t epochs_begun = 0;
  /// Set by load_state in the middle of an epoch: the next begin() continues that epoch
  /// after the last delivered batch instead of drawing a new order.
  bool resume = false;

  int64_t completed_epochs() const { return epochs_begun - (delivered < batches ? 1 : 0); }
};

/// What loaders share with their accelerator.
struct LoaderContext {
  torch::Device device = torch::kCPU;
  int rank = 0;
  int world_size = 1;
  bool even_batches = true;
  /// Each batch of the loader's batch size is split across the processes (Options::split_batches).
  bool split_batches = false;
  /// Replaces `indices` on every process with process 0's.
  std::function<void(std::vector<int64_t> &indices)> broadcast_indices;
  /// Gives every process process 0's state of the CPU random generator (BatchRange, at the end
  /// of each pass; a prepared loader, when it draws an epoch's order).
  std::function<void()> synchronise_random_state;
  /// Whether the main process has said that a counted loop's iterations were repeated.
  bool noted_repeated_iterations = false;
  /// Every loader made by the accelerator, in order of creation (for checkpoints).
  std::vector<std::weak_ptr<LoaderProgress>> loaders;

  // State of the loader that delivered the latest batch, read by gather_for_metrics.
  bool end_of_dataloader = false;
  /// How many samples of the last global step are real; the rest repeat the start of the
  /// epoch to even the batches out. Negative: nothing repeated.
  int64_t remainder = -1;
};

/// This process's batches of one epoch, given the epoch's order of sample indices.
struct ShardPlan {
  std::vector<std::vector<size_t>> batches;
  int64_t remainder = -1; ///< see LoaderContext::remainder
  /// Samples of the epoch's start repeated to even the batches out (all processes together).
  size_t repeated = 0;
};

/// The main process's note, once per loader, that an epoch repeats samples (on stderr).
void note_repeated_samples(size_t repeated, size_t samples, size_t global_batch);

/// Batch k of the epoch goes to process k % world_size. With even_batches (and not drop_last)
/// the order is extended from its start until every process has equally many full batches;
/// with drop_last the partial batch and the batches that cannot be shared evenly are dropped.
/// With split_batches every process takes rows [rank*B/N, (rank+1)*B/N) of every batch k
/// instead; even_batches fills the partial last batch from the start of the epoch, drop_last
/// drops it, and neither cuts it as it is (processes past its end get one batch fewer).
ShardPlan plan_shard(const std::vector<int64_t> &order, size_t batch_size, int rank, int world_size,
                     bool even_batches, bool drop_last, bool split_batches = false);

/// The iterations of a counted loop that this process runs (BatchRange): iteration k goes to
/// process k % world_size; with even_batches the first iterations are repeated until every
/// process has as many; with split_batches (or one process) every process runs all of them.
std::vector<int64_t> plan_iterations(int64_t iterations, int rank, int world_size,
                                     bool even_batches, bool split_batches);

/// This process's rows of a batch (Accelerator::batch_rows): rows [rank*R/N, (rank+1)*R/N)
/// of R; a process left without a row (R < N) gets row rank % R again, so that none computes
/// on an empty batch. `repeated` is set when that happens.
torch::Tensor rows_of_process(const torch::Tensor &batch, int rank, int world_size, bool &repeated);
/// The same rows as a range [first, second) of a batch of `rows` rows.
std::pair<int64_t, int64_t> row_range_of_process(int64_t rows, int rank, int world_size,
                                                 bool &repeated);

/// Throws std::invalid_argument, saying what to do, when split_batches cannot split batches of
/// `batch_size` evenly across `world_size` processes.
void check_split_batch_size(size_t batch_size, int world_size);

/// Moves a batch to the device. Examples and tensors move; other batch types are returned as
/// they are (the program moves them itself).
inline torch::Tensor to_device(torch::Tensor batch, const torch::Device &device) {
  return batch.defined() ? batch.to(device) : batch;
}
template <typename Data, typename Target>
torch::data::Example<Data, Target> to_device(torch::data::Example<Data, Target> batch,
                                             const torch::Device &device) {
  if constexpr (std::is_same_v<Data, torch::Tensor>) {
    batch.data = to_device(std::move(batch.data), device);
  }
  if constexpr (std::is_same_v<Target, torch::Tensor>) {
    batch.target = to_device(std::move(batch.target), device);
  }
  return batch;
}
/// Pairs and tuples move to the device like Examples.
template <typename First, typename Second>
std::pair<First, Second> to_device(std::pair<First, Second> batch, const torch::Device &device);
template <typename... Items>
std::tuple<Items...> to_device(std::tuple<Items...> batch, const torch::Device &device);
/// Anything else (an example type of the program's own) stays as it is; declared before the
/// vector's overload, whose lookup of to_device for its items happens where it is defined.
template <typename T> T to_device(T batch, const torch::Device &);
template <typename T> std::vector<T> to_device(std::vector<T> batch, const torch::Device &device) {
  for (auto &item : batch) {
    item = to_device(std::move(item), device);
  }
  return batch;
}
template <typename T> T to_device(T batch, const torch::Device &) { return batch; }

/// The rows [begin, end) of a batch a program made itself: of a tensor, of each tensor of an
/// Example, a pair, a tuple or a vector of tensors.
inline torch::Tensor slice_rows(const torch::Tensor &batch, int64_t begin, int64_t end) {
  return batch.slice(0, begin, end);
}
template <typename Data, typename Target>
torch::data::Example<Data, Target> slice_rows(torch::data::Example<Data, Target> batch,
                                              int64_t begin, int64_t end) {
  return {slice_rows(batch.data, begin, end), slice_rows(batch.target, begin, end)};
}
template <typename Data>
torch::data::Example<Data, torch::data::example::NoTarget>
slice_rows(torch::data::Example<Data, torch::data::example::NoTarget> batch, int64_t begin,
           int64_t end) {
  return {slice_rows(batch.data, begin, end)};
}
template <typename First, typename Second>
std::pair<First, Second> slice_rows(const std::pair<First, Second> &batch, int64_t begin,
                                    int64_t end) {
  return {slice_rows(batch.first, begin, end), slice_rows(batch.second, begin, end)};
}
template <typename... Items>
std::tuple<Items...> slice_rows(const std::tuple<Items...> &batch, int64_t begin, int64_t end) {
  return std::apply(
      [&](const auto &...item) { return std::tuple<Items...>(slice_rows(item, begin, end)...); },
      batch);
}
template <typename T>
std::vector<T> slice_rows(const std::vector<T> &batch, int64_t begin, int64_t end) {
  std::vector<T> rows;
  for (const auto &item : batch) {
    rows.push_back(slice_rows(item, begin, end));
  }
  return rows;
}

template <typename T> struct is_std_vector : std::false_type {};
template <typename T, typename A> struct is_std_vector<std::vector<T, A>> : std::true_type {};

/// The number of rows of a batch: its first tensor's size(0).
inline int64_t rows_of(const torch::Tensor &batch) { return batch.size(0); }
template <typename Data, typename Target>
int64_t rows_of(const torch::data::Example<Data, Target> &batch) {
  return rows_of(batch.data);
}
template <typename First, typename Second> int64_t rows_of(const std::pair<First, Second> &batch) {
  return rows_of(batch.first);
}
template <typename... Items> int64_t rows_of(const std::tuple<Items...> &batch) {
  return rows_of(std::get<0>(batch));
}
template <typename T> int64_t rows_of(const std::vector<T> &batch) {
  TORCH_CHECK(!batch.empty(), "accelerate: prepare_batches: a batch is an empty vector");
  return rows_of(batch.front());
}

/// Before a batch of several tensors is cut by rows between the processes (split_batches):
/// that each has the batch's rows, or the parts would not belong together (token ids of a
/// whole batch beside per-sequence offsets, an EmbeddingBag's input).
void check_rows_agree(const char *what, int64_t rows, int64_t other);
inline void check_rows(const torch::Tensor &batch, int64_t rows) {
  check_rows_agree("tensor", rows, batch.dim() > 0 ? batch.size(0) : -1);
}
template <typename T> void check_rows(const T &, int64_t) {} // not cut: the program's own
template <typename Data, typename Target>
void check_rows(const torch::data::Example<Data, Target> &batch, int64_t rows) {
  check_rows(batch.data, rows);
  check_rows(batch.target, rows);
}
template <typename First, typename Second>
void check_rows(const std::pair<First, Second> &batch, int64_t rows) {
  check_rows(batch.first, rows);
  check_rows(batch.second, rows);
}
template <typename... Items> void check_rows(const std::tuple<Items...> &batch, int64_t rows) {
  std::apply([&](const auto &...item) { (check_rows(item, rows), ...); }, batch);
}
template <typename T> void check_rows(const std::vector<T> &batch, int64_t rows) {
  for (const auto &item : batch) {
    check_rows(item, rows);
  }
}

template <typename First, typename Second>
std::pair<First, Second> to_device(std::pair<First, Second> batch, const torch::Device &device) {
  return {to_device(std::move(batch.first), device), to_device(std::move(batch.second), device)};
}
template <typename... Items>
std::tuple<Items...> to_device(std::tuple<Items...> batch, const torch::Device &device) {
  return std::apply(
      [&](auto &...item) { return std::tuple<Items...>(to_device(std::move(item), device)...); },
      batch);
}

/// The sampler the inner LibTorch loader uses: it hands out this process's planned batches.
/// Copies share one state, so the copy LibTorch's loader keeps is the one we plan into (the
/// set_epoch trap of DistributedRandomSampler does not exist here).
template <typename UserSampler>
class ShardSampler : public torch::data::samplers::Sampler<std::vector<size_t>> {
public:
  struct State {
    UserSampler sampler;
    size_t dataset_size;
    size_t batch_size;
    bool drop_last;
    std::shared_ptr<LoaderContext> context;
    std::shared_ptr<LoaderProgress> progress;
    ShardPlan plan;
    size_t next = 0;
  };

  explicit ShardSampler(std::shared_ptr<State> state) : state_(std::move(state)) {}

  /// A new epoch: process 0 draws the order from the user's sampler (so one process consumes
  /// randomness exactly as the plain loop would), every process receives it and takes its part,
  /// and process 0's CPU random generator state with it: the others drew nothing, and would
  /// otherwise draw other dropout masks, other gradient noise and other permutations from
  /// here on (as Accelerate synchronises its generators at each epoch). After load_state, the
  /// restored epoch continues instead, drawing nothing.
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    auto &s = *state_;
    auto &progress = *s.progress;
    if (new_size) {
      s.dataset_size = *new_size;
    }
    if (!progress.resume) {
      std::vector<int64_t> order;
      if (s.context->rank == 0) {
        s.sampler.reset(s.dataset_size);
        while (auto indices = s.sampler.next(s.dataset_size)) {
          order.insert(order.end(), indices->begin(), indices->end());
        }
      }
      if (s.context->world_size > 1) {
        s.context->broadcast_indices(order);
        if (s.context->synchronise_random_state) {
          s.context->synchronise_random_state();
        }
      }
      progress.order = std::move(order);
      progress.delivered = 0;
      ++progress.epochs_begun;
    }
    s.plan = plan_shard(progress.order, s.batch_size, s.context->rank, s.context->world_size,
                        s.context->even_batches, s.drop_last, progress.split_batches);
    // A run that does not match one process should say why where the user looks first.
    if (s.plan.repeated > 0 && s.context->rank == 0 && progress.epochs_begun == 1) {
      note_repeated_samples(s.plan.repeated, progress.order.size(),
                            progress.split_batches
                                ? s.batch_size
                                : s.batch_size * static_cast<size_t>(s.context->world_size));
    }
    progress.batches = s.plan.batches.size();
    s.next = progress.resume ? progress.delivered : 0;
    progress.resume = false;
  }

  std::optional<std::vector<size_t>> next(size_t /*batch_size*/) override {
    auto &s = *state_;
    if (s.next >= s.plan.batches.size()) {
      return std::nullopt;
    }
    return s.plan.batches[s.next++];
  }

  void save(torch::serialize::OutputArchive &archive) const override {
    archive.write("accelerate_shard_next", torch::tensor(static_cast<int64_t>(state_->next)));
  }
  void load(torch::serialize::InputArchive &archive) override {
    torch::Tensor next;
    archive.read("accelerate_shard_next", next);
    state_->next = static_cast<size_t>(next.item<int64_t>());
  }

private:
  std::shared_ptr<State> state_;
};

} // namespace detail

/// The loader Accelerator::prepare_data_loader returns. Iterate it like a LibTorch loader:
///   for (auto& batch : *loader) { ... }   // batch already on accelerator.device()
template <typename Dataset, typename Sampler> class ShardedDataLoader {
  using ShardSampler = detail::ShardSampler<Sampler>;
  using Inner = torch::data::StatelessDataLoader<Dataset, ShardSampler>;

public:
  using BatchType = typename Dataset::BatchType;

  ShardedDataLoader(Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options,
                    std::shared_ptr<detail::LoaderContext> context)
      : context_(std::move(context)) {
    const auto size = dataset.size();
    TORCH_CHECK(size.has_value(), "accelerate: prepare_data_loader needs a sized dataset");
    if (context_->split_batches) {
      detail::check_split_batch_size(options.batch_size(), context_->world_size);
    }
    progress_ = std::make_shared<detail::LoaderProgress>();
    progress_->dataset_size = *size;
    progress_->batch_size = options.batch_size();
    progress_->split_batches = context_->split_batches && context_->world_size > 1;
    // Loaders made per epoch come and go: keep the list to the living.
    auto &loaders = context_->loaders;
    loaders.erase(std::remove_if(loaders.begin(), loaders.end(),
                                 [](const auto &weak) { return weak.expired(); }),
                  loaders.end());
    loaders.push_back(progress_);
    state_ = std::make_shared<typename ShardSampler::State>(
        typename ShardSampler::State{std::move(sampler),
                                     *size,
                                     options.batch_size(),
                                     options.drop_last(),
                                     context_,
                                     progress_,
                                     {},
                                     0});
    // The plan already applies drop_last; the inner loader must not drop a second time.
    options.drop_last(false);
    inner_ = std::make_unique<Inner>(std::move(dataset), ShardSampler(state_), options);
  }

  class Iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = BatchType;
    using difference_type = std::ptrdiff_t;
    using pointer = BatchType *;
    using reference = BatchType &;

    Iterator(ShardedDataLoader *loader, torch::data::Iterator<BatchType> inner)
        : loader_(loader), inner_(std::move(inner)) {}

    BatchType &operator*() {
      if (!current_) {
        current_ = detail::to_device(*inner_, loader_->context_->device);
        auto &progress = *loader_->progress_;
        ++progress.delivered;
        // gather_for_metrics and accumulation need to know when the last batch is out.
        loader_->context_->end_of_dataloader = progress.delivered == progress.batches;
        loader_->context_->remainder = loader_->state_->plan.remainder;
      }
      return *current_;
    }
    BatchType *operator->() { return &**this; }
    Iterator &operator++() {
      if (!current_) {
        **this; // count a batch that was skipped without being read
      }
      current_.reset();
      ++inner_;
      return *this;
    }
    bool operator==(const Iterator &other) const { return inner_ == other.inner_; }
    bool operator!=(const Iterator &other) const { return !(*this == other); }

  private:
    ShardedDataLoader *loader_;
    torch::data::Iterator<BatchType> inner_;
    std::optional<BatchType> current_;
  };

  /// Starts an epoch: a new shuffle, the same on every process (or, after load_state, the rest
  /// of the epoch the checkpoint was taken in).
  Iterator begin() {
    context_->end_of_dataloader = false;
    return Iterator(this, inner_->begin());
  }
  Iterator end() { return Iterator(this, inner_->end()); }

  /// Number of batches this process gets in the current epoch (with split_batches, its slices
  /// of the epoch's batches); before the first epoch, in each epoch (a schedule's length).
  size_t size() const {
    if (progress_->epochs_begun == 0 && !progress_->resume) {
      // The count does not depend on the order: plan one over 0..n-1.
      std::vector<int64_t> order(state_->dataset_size);
      std::iota(order.begin(), order.end(), int64_t{0});
      return detail::plan_shard(order, state_->batch_size, context_->rank, context_->world_size,
                                context_->even_batches, state_->drop_last, progress_->split_batches)
          .batches.size();
    }
    return state_->plan.batches.size();
  }

  /// Epochs whose every batch was handed out; an epoch in progress does not count. After
  /// load_state, the loop that resumes starts from here:
  ///   for (int64_t epoch = loader->completed_epochs(); epoch < epochs; ++epoch)
  int64_t completed_epochs() const { return progress_->completed_epochs(); }

private:
  std::shared_ptr<detail::LoaderContext> context_;
  std::shared_ptr<detail::LoaderProgress> progress_;
  std::shared_ptr<typename ShardSampler::State> state_;
  std::unique_ptr<Inner> inner_;
};

/// This process's share of a loader the program made itself (one a factory function returns),
/// from Accelerator::prepare_data_loader(std::move(loader)). Every process runs the whole
/// loader and keeps its own batches: batch k of an epoch goes to process k % N, and with
/// even_batches a process left without a batch in the last round takes one of the epoch's
/// first batches again (a partial last batch stays as it is); with split_batches every process
/// takes its rows of every batch. Each epoch starts from process 0's CPU random generator
/// state on every process, so that a shuffling sampler draws the same order everywhere. The
/// cost: every process loads every batch (as Accelerate's IterableDatasetShard reads every
/// sample), and up to 2N batches are held at a time. save_state does not record a place in
/// its epoch: a resumed run starts the epoch again. Batches are moved to the device.
template <typename Loader> class LoaderShard {
public:
  using BatchType = typename Loader::BatchType;

  LoaderShard(std::unique_ptr<Loader> loader, std::shared_ptr<detail::LoaderContext> context)
      : loader_(std::move(loader)), context_(std::move(context)) {
    TORCH_CHECK(loader_ != nullptr, "accelerate: prepare_data_loader was given no loader (a "
                                    "null pointer)");
  }

  class Iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = BatchType;
    using difference_type = std::ptrdiff_t;
    using pointer = BatchType *;
    using reference = BatchType &;

    explicit Iterator(LoaderShard *shard) : shard_(shard) { ++*this; }
    BatchType &operator*() { return *current_; }
    BatchType *operator->() { return &*current_; }
    Iterator &operator++() {
      current_ = shard_ ? shard_->next() : std::nullopt;
      return *this;
    }
    /// Only "is it the end" is compared: an input iterator.
    bool operator==(const Iterator &other) const {
      return current_.has_value() == other.current_.has_value();
    }
    bool operator!=(const Iterator &other) const { return !(*this == other); }

  private:
    LoaderShard *shard_;
    std::optional<BatchType> current_;
  };

  /// Starts an epoch of the loader (a new shuffle, the same on every process).
  Iterator begin() {
    if (context_->world_size > 1 && context_->synchronise_random_state) {
      context_->synchronise_random_state();
    }
    context_->end_of_dataloader = false;
    first_round_.clear();
    inner_.emplace(loader_->begin());
    inner_end_.emplace(loader_->end());
    return Iterator(this);
  }
  Iterator end() { return Iterator(nullptr); }

private:
  /// A loader without Stack gives a batch as a std::vector of samples: its samples are its
  /// elements. Any other batch (a tensor, an Example of tensors, ...) has them as rows.
  static constexpr bool kSampleList = detail::is_std_vector<BatchType>::value;
  static int64_t samples_in(const BatchType &batch) {
    if constexpr (kSampleList) {
      return static_cast<int64_t>(batch.size());
    } else {
      return detail::rows_of(batch);
    }
  }
  static BatchType samples(const BatchType &batch, int64_t begin, int64_t end) {
    if constexpr (kSampleList) {
      return BatchType(batch.begin() + begin, batch.begin() + end);
    } else {
      detail::check_rows(batch, detail::rows_of(batch));
      return detail::slice_rows(batch, begin, end);
    }
  }

  bool inner_done() { return *inner_ == *inner_end_; }
  BatchType take() {
    BatchType batch = std::move(**inner_);
    ++*inner_;
    return batch;
  }

  std::optional<BatchType> next() {
    const auto world = static_cast<size_t>(context_->world_size);
    const auto rank = static_cast<size_t>(context_->rank);
    if (!inner_ || inner_done()) {
      return std::nullopt;
    }
    if (world == 1 || context_->split_batches) {
      BatchType whole = take();
      context_->end_of_dataloader = inner_done();
      context_->remainder = -1;
      if (world == 1) {
        return detail::to_device(std::move(whole), context_->device);
      }
      bool repeated = false;
      const auto range = detail::row_range_of_process(samples_in(whole), context_->rank,
                                                      context_->world_size, repeated);
      return detail::to_device(samples(whole, range.first, range.second), context_->device);
    }
    // A round: the next N batches, one per process.
    std::vector<BatchType> round;
    while (round.size() < world && !inner_done()) {
      round.push_back(take());
    }
    const size_t real = round.size();
    if (first_round_.empty()) {
      first_round_ = round; // the tensors are shared, not copied
    }
    context_->end_of_dataloader = inner_done();
    context_->remainder = -1;
    if (real < world) {
      if (!context_->even_batches && rank >= real) {
        return std::nullopt;
      }
      // The samples of the last global step that are real (gather_for_metrics drops the rest).
      int64_t rows = 0;
      for (const auto &batch : round) {
        rows += samples_in(batch);
      }
      context_->remainder = rows;
      for (size_t k = 0; round.size() < world; ++k) {
        round.push_back(first_round_[k % first_round_.size()]);
      }
      inner_.reset(); // this process's epoch ends with this batch
    }
    return detail::to_device(std::move(round[rank]), context_->device);
  }

  std::unique_ptr<Loader> loader_;
  std::shared_ptr<detail::LoaderContext> context_;
  std::optional<torch::data::Iterator<BatchType>> inner_, inner_end_;
  std::vector<BatchType> first_round_;
};

/// This process's share of batches a program made itself, from Accelerator::prepare_batches:
/// batch k goes to process k % N (with even_batches the first batches are repeated until every
/// process has as many), or with split_batches every process takes its rows of every batch.
/// Each batch is moved to the accelerator's device as it is read. Iterate it again for each
/// epoch; it holds its own copy of the list (tensors are shared, not copied).
template <typename Batch> class BatchShard {
public:
  BatchShard(std::vector<Batch> batches, std::shared_ptr<detail::LoaderContext> context)
      : batches_(std::move(batches)), context_(std::move(context)) {
    const auto world = static_cast<size_t>(context_->world_size);
    const auto rank = static_cast<size_t>(context_->rank);
    if (context_->split_batches || world == 1) {
      for (size_t k = 0; k < batches_.size(); ++k) {
        picks_.push_back(k);
      }
      return;
    }
    size_t count = batches_.size();
    if (context_->even_batches && count % world != 0) {
      count = (count + world - 1) / world * world; // wraps around to the first batches
    }
    for (size_t k = rank; k < count && !batches_.empty(); k += world) {
      picks_.push_back(k % batches_.size());
    }
  }

  class Iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch *;
    using reference = Batch &;

    Iterator(BatchShard *shard, size_t at) : shard_(shard), at_(at) {}
    Batch &operator*() {
      if (!current_) {
        current_ = shard_->batch(at_);
        shard_->context_->end_of_dataloader = at_ + 1 == shard_->picks_.size();
        shard_->context_->remainder = -1;
      }
      return *current_;
    }
    Batch *operator->() { return &**this; }
    Iterator &operator++() {
      current_.reset();
      ++at_;
      return *this;
    }
    bool operator==(const Iterator &other) const { return at_ == other.at_; }
    bool operator!=(const Iterator &other) const { return !(*this == other); }

  private:
    BatchShard *shard_;
    size_t at_;
    std::optional<Batch> current_;
  };

  Iterator begin() {
    context_->end_of_dataloader = false;
    return Iterator(this, 0);
  }
  Iterator end() { return Iterator(this, picks_.size()); }
  /// Batches this process gets per pass.
  size_t size() const { return picks_.size(); }

private:
  Batch batch(size_t at) const {
    const Batch &whole = batches_[picks_[at]];
    if (!context_->split_batches || context_->world_size == 1) {
      return detail::to_device(whole, context_->device);
    }
    // Rows [r*B/N, (r+1)*B/N): equal parts when N divides B, one row more for the first
    // processes otherwise (detail::row_range_of_process).
    bool repeated = false;
    const int64_t rows = detail::rows_of(whole);
    detail::check_rows(whole, rows);
    const auto range =
        detail::row_range_of_process(rows, context_->rank, context_->world_size, repeated);
    return detail::to_device(detail::slice_rows(whole, range.first, range.second),
                             context_->device);
  }

  std::vector<Batch> batches_;
  std::vector<size_t> picks_;
  std::shared_ptr<detail::LoaderContext> context_;
};

/// The values of a counted loop's counter that this process runs, from
/// Accelerator::batch_range: the loop `for (i = begin; i < end; i += step)` has iterations
/// k = 0, 1, ... with values begin + k*step, and they are shared as a prepared loader shares
/// batches (iteration k to process k % N, the first ones repeated until every process has as
/// many; every one of them on every process under split_batches, where Accelerator::batch_rows
/// takes each process's rows of the batch the body cuts).
///
/// At the end of each pass every process takes process 0's CPU random generator state: a
/// permutation the program draws for the next epoch (`torch::randperm(n)`) must be the same
/// everywhere, and dropout on batches of different sizes (a last partial batch) would
/// otherwise have drawn the generators apart. Iterate it once per epoch, to its end.
class BatchRange {
public:
  BatchRange(int64_t begin, int64_t end, int64_t step,
             std::shared_ptr<detail::LoaderContext> context);

  class Iterator {
  public:
    using iterator_category = std::input_iterator_tag;
    using value_type = int64_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const int64_t *;
    using reference = int64_t;

    Iterator(BatchRange *range, size_t at) : range_(range), at_(at) {}
    int64_t operator*() const;
    Iterator &operator++() {
      ++at_;
      return *this;
    }
    /// Comparing with the end at the end of the pass synchronises the random state (once).
    bool operator==(const Iterator &other) const;
    bool operator!=(const Iterator &other) const { return !(*this == other); }

  private:
    BatchRange *range_;
    size_t at_;
  };

  Iterator begin();
  Iterator end() { return Iterator(this, picks_.size()); }
  /// Iterations this process runs per pass.
  size_t size() const { return picks_.size(); }

private:
  void finish_pass();

  int64_t begin_, step_;
  std::vector<int64_t> picks_;
  std::shared_ptr<detail::LoaderContext> context_;
  bool finished_ = false;
};

} // namespace accelerate
