// Sharded loading: Accelerate's BatchSamplerShard vectors, checked on the plan and on real
// processes, and gather_for_metrics counting every sample once.
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

namespace {

using accelerate::detail::plan_shard;
using Batches = std::vector<std::vector<size_t>>;

std::vector<int64_t> range(int64_t n) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

TEST(ShardPlan, TwentyFourSamplesBatchThreeTwoProcesses) {
  EXPECT_EQ(plan_shard(range(24), 3, 0, 2, true, false).batches,
            (Batches{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}));
  EXPECT_EQ(plan_shard(range(24), 3, 1, 2, true, false).batches,
            (Batches{{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 22, 23}}));
  EXPECT_EQ(plan_shard(range(24), 3, 1, 2, true, false).remainder, -1);
}

TEST(ShardPlan, TheTailWrapsAroundToTheStart) {
  const auto plan = plan_shard(range(22), 3, 1, 2, true, false);
  ASSERT_EQ(plan.batches.size(), 4u);
  EXPECT_EQ(plan.batches.back(), (std::vector<size_t>{21, 0, 1}));
  EXPECT_EQ(plan.remainder, 4); // [18,19,20] + [21] are real; [0,1] repeat
  EXPECT_EQ(plan.repeated, 2u);
  // An odd number of full batches: process 1 gets the first batch again.
  EXPECT_EQ(plan_shard(range(21), 3, 1, 2, true, false).batches.back(),
            (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(plan_shard(range(21), 3, 1, 2, true, false).repeated, 3u);
  // Whole global batches repeat nothing; neither do drop_last and one process.
  EXPECT_EQ(plan_shard(range(24), 3, 0, 2, true, false).repeated, 0u);
  EXPECT_EQ(plan_shard(range(22), 3, 0, 2, true, true).repeated, 0u);
  EXPECT_EQ(plan_shard(range(22), 3, 0, 1, true, false).repeated, 0u);
  // split_batches fills the last batch of 4 (here [20, 21]) from the start: 2 repeated.
  EXPECT_EQ(plan_shard(range(22), 4, 0, 2, true, false, true).repeated, 2u);
}

// A run that repeats samples says so, with the numbers and what makes it exact.
TEST(ShardPlan, RepeatedSamplesAreNoted) {
  testing::internal::CaptureStderr();
  accelerate::detail::note_repeated_samples(4, 300, 16);
  const std::string note = testing::internal::GetCapturedStderr();
  EXPECT_NE(note.find("the 300 samples do not fill the last global batch of 16: 4 samples from "
                      "the start of the epoch are repeated"),
            std::string::npos)
      << note;
  EXPECT_NE(note.find("a multiple of 16, or drop_last"), std::string::npos) << note;
}

TEST(ShardPlan, DropLastAndUnevenBatches) {
  // drop_last: the partial batch goes, and so does the batch that cannot be shared evenly.
  EXPECT_EQ(plan_shard(range(22), 3, 0, 2, true, true).batches,
            (Batches{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}}));
  EXPECT_EQ(plan_shard(range(22), 3, 1, 2, true, true).batches.back(),
            (std::vector<size_t>{15, 16, 17}));
  // even_batches off: the last process simply gets fewer, and the partial batch as it is.
  EXPECT_EQ(plan_shard(range(22), 3, 1, 2, false, false).batches.back(), (std::vector<size_t>{21}));
  EXPECT_EQ(plan_shard(range(19), 3, 1, 2, false, false).batches.size(), 3u);
  EXPECT_EQ(plan_shard(range(19), 3, 0, 2, false, false).batches.size(), 4u);
}

// split_batches: every process takes its consecutive B/N rows of every batch.
TEST(ShardPlan, SplitBatchesGiveEachProcessItsRowsOfEveryBatch) {
  // 22 samples in batches of 4: five full batches and [20, 21], filled from the start.
  const auto first = plan_shard(range(22), 4, 0, 2, true, false, true);
  const auto second = plan_shard(range(22), 4, 1, 2, true, false, true);
  EXPECT_EQ(first.batches, (Batches{{0, 1}, {4, 5}, {8, 9}, {12, 13}, {16, 17}, {20, 21}}));
  EXPECT_EQ(second.batches, (Batches{{2, 3}, {6, 7}, {10, 11}, {14, 15}, {18, 19}, {0, 1}}));
  EXPECT_EQ(second.remainder, 2); // [20, 21] are real; [0, 1] repeat
  EXPECT_EQ(plan_shard(range(24), 4, 1, 2, true, false, true).remainder, -1);
  // A dataset smaller than one batch goes round as often as it takes.
  EXPECT_EQ(plan_shard(range(3), 8, 1, 2, true, false, true).batches, (Batches{{1, 2, 0, 1}}));
  // drop_last drops the partial batch only: every full one is shared.
  EXPECT_EQ(plan_shard(range(22), 4, 1, 2, true, true, true).batches.size(), 5u);
  EXPECT_EQ(plan_shard(range(22), 4, 1, 2, true, true, true).batches.back(),
            (std::vector<size_t>{18, 19}));
  // even_batches off: the partial batch is cut as it is; a process it does not reach gets one
  // batch fewer, and the last one it reaches may get fewer rows.
  EXPECT_EQ(plan_shard(range(22), 4, 0, 2, false, false, true).batches.back(),
            (std::vector<size_t>{20, 21}));
  EXPECT_EQ(plan_shard(range(22), 4, 1, 2, false, false, true).batches.size(), 5u);
  EXPECT_EQ(plan_shard(range(23), 4, 1, 2, false, false, true).batches.back(),
            (std::vector<size_t>{22}));
  EXPECT_EQ(plan_shard(range(23), 4, 1, 2, false, false, true).remainder, -1);
  // One process: the plain loader's batches.
  EXPECT_EQ(plan_shard(range(7), 3, 0, 1, true, false, true).batches,
            (Batches{{0, 1, 2}, {3, 4, 5}, {6}}));
}

TEST(ShardPlan, OneProcessTakesEverythingInOrder) {
  const auto plan = plan_shard(range(7), 3, 0, 1, true, false);
  EXPECT_EQ(plan.batches, (Batches{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(plan.remainder, -1);
}

/// Sample i is the tensor [i].
class IndexDataset : public torch::data::datasets::Dataset<IndexDataset> {
public:
  explicit IndexDataset(size_t size) : size_(size) {}
  torch::data::Example<> get(size_t index) override {
    return {torch::tensor({static_cast<int64_t>(index)}), torch::tensor(0)};
  }
  std::optional<size_t> size() const override { return size_; }

private:
  size_t size_;
};

std::vector<std::vector<int64_t>>
epoch_batches(accelerate::Accelerator &accelerator,
              accelerate::ShardedDataLoader<
                  torch::data::datasets::MapDataset<IndexDataset, torch::data::transforms::Stack<>>,
                  torch::data::samplers::SequentialSampler> &loader) {
  std::vector<std::vector<int64_t>> batches;
  for (auto &batch : loader) {
    EXPECT_EQ(batch.data.device(), accelerator.device());
    auto flat = batch.data.reshape({-1}).contiguous();
    batches.emplace_back(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  }
  return batches;
}

TEST(ShardedLoader, RealProcessesGetTheDocumentedBatches) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        IndexDataset(22).map(torch::data::transforms::Stack<>()), 3);
    EXPECT_EQ(loader->size(), 4u); // known before the first epoch, for a schedule's length
    const auto batches = epoch_batches(accelerator, *loader);
    EXPECT_EQ(loader->size(), 4u);
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(batches, (V{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}));
    } else {
      EXPECT_EQ(batches, (V{{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 0, 1}}));
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

/// An example type of the program's own, batched without Stack: a batch is a vector of them.
struct OwnSample {
  torch::Tensor features;
  int64_t label = 0;
};
struct OwnSamples : torch::data::datasets::Dataset<OwnSamples, OwnSample> {
  OwnSample get(size_t index) override {
    return {torch::full({2}, static_cast<double>(index)), static_cast<int64_t>(index)};
  }
  torch::optional<size_t> size() const override { return 5; }
};

TEST(ShardedLoader, BatchesOfTheProgramsOwnExampleTypeComeAsTheyAre) {
  accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
  auto loader =
      accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(OwnSamples(), 2);
  std::vector<int64_t> labels;
  for (std::vector<OwnSample> &batch : *loader) {
    for (const OwnSample &sample : batch) {
      labels.push_back(sample.label);
      EXPECT_EQ(sample.features[0].item<double>(), static_cast<double>(sample.label));
    }
  }
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(ShardedLoader, ShuffleIsSharedAcrossProcessesAndNewEachEpoch) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    torch::manual_seed(100 + peer.rank); // different local randomness must not matter
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
        IndexDataset(40).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions(4).workers(2));
    std::vector<torch::Tensor> epochs;
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<torch::Tensor> mine;
      for (auto &batch : *loader) {
        mine.push_back(batch.data.reshape({-1}));
      }
      // All processes together see every sample exactly once per epoch.
      auto all = accelerator.gather(torch::cat(mine));
      EXPECT_TRUE(torch::equal(std::get<0>(all.sort()), torch::arange(40)));
      epochs.push_back(all);
    }
    EXPECT_FALSE(torch::equal(epochs[0], epochs[1])) << "the shuffle did not change per epoch";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(ShardedLoader, GatherForMetricsCountsEverySampleOnce) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    accelerate::Accelerator accelerator;
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        IndexDataset(22).map(torch::data::transforms::Stack<>()), 3);
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<torch::Tensor> seen, seen_plain;
      for (auto &batch : *loader) {
        seen.push_back(accelerator.gather_for_metrics(batch.data.reshape({-1})));
        seen_plain.push_back(accelerator.gather(batch.data.reshape({-1})));
      }
      auto all = std::get<0>(torch::cat(seen).sort());
      EXPECT_TRUE(torch::equal(all, torch::arange(22))) << all;
      EXPECT_EQ(torch::cat(seen_plain).numel(), 24) << "gather keeps the repeated samples";
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

using SplitLoader = accelerate::ShardedDataLoader<
    torch::data::datasets::MapDataset<IndexDataset, torch::data::transforms::Stack<>>,
    torch::data::samplers::RandomSampler>;

accelerate::Options split_batches(bool even_batches = true) {
  accelerate::Options options;
  options.split_batches = true;
  options.even_batches = even_batches;
  return options;
}

std::vector<int64_t> values(const torch::Tensor &tensor) {
  auto flat = tensor.reshape({-1}).to(torch::kCPU).contiguous();
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

// What the plain LibTorch loader of one process gives: `epochs` epochs of batches.
std::vector<std::vector<int64_t>> plain_batches(size_t size, torch::data::DataLoaderOptions options,
                                                int epochs, uint64_t seed) {
  torch::manual_seed(seed);
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      IndexDataset(size).map(torch::data::transforms::Stack<>()), options);
  std::vector<std::vector<int64_t>> batches;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto &batch : *loader) {
      batches.push_back(values(batch.data));
    }
  }
  return batches;
}

std::unique_ptr<SplitLoader> split_loader(accelerate::Accelerator &accelerator, size_t size,
                                          torch::data::DataLoaderOptions options, uint64_t seed) {
  // The sampler draws from the global generator, on process 0 only, as the plain loader does.
  torch::manual_seed(seed);
  return accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      IndexDataset(size).map(torch::data::transforms::Stack<>()), options);
}

// Process 0 alone draws an epoch's order from the sampler; every process then takes its
// generator state with the order, so what the program draws next (dropout, gradient noise, the
// next permutation) is the same everywhere, as it is for one process.
TEST(ShardedLoader, EveryProcessDrawsAlikeAfterTheEpochsOrder) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    accelerate::Accelerator accelerator(accelerate::Options::on_cpu());
    torch::manual_seed(3);
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
        IndexDataset(16).map(torch::data::transforms::Stack<>()), 4);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &batch : *loader) {
        (void)batch;
        const auto drawn = torch::rand({8}, torch::kDouble);
        EXPECT_TRUE(torch::equal(accelerator.reduce(drawn, "sum"), drawn * 2))
            << "the processes drew apart in epoch " << epoch;
      }
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// The whole point of split_batches: the processes' rows of batch k, in rank order, are the
// plain loader's batch k, shuffles included; the last batch is filled from the start of the
// epoch, and gather_for_metrics drops exactly those rows.
TEST(ShardedLoader, SplitBatchesTogetherAreThePlainLoadersBatches) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    const auto expected = plain_batches(22, 4, 2, 5);
    accelerate::Accelerator accelerator(split_batches());
    auto loader = split_loader(accelerator, 22, 4, 5);
    std::vector<std::vector<int64_t>> together, counted;
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &batch : *loader) {
        EXPECT_EQ(batch.data.size(0), 2) << "every process gets B/N rows";
        together.push_back(values(accelerator.gather(batch.data)));
        counted.push_back(values(accelerator.gather_for_metrics(batch.data)));
      }
    }
    ASSERT_EQ(counted.size(), expected.size());
    EXPECT_EQ(counted, expected);
    // The filled-up last batch of each epoch: its 2 real rows, then the epoch's first 2.
    for (size_t last : {size_t{5}, size_t{11}}) {
      const auto &first_of_epoch = expected[last - 5];
      EXPECT_EQ(together[last], (std::vector<int64_t>{expected[last][0], expected[last][1],
                                                      first_of_epoch[0], first_of_epoch[1]}));
    }
    EXPECT_NE(expected[0], expected[6]) << "a new shuffle each epoch";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(ShardedLoader, SplitBatchesWithDropLastDropTheOnePartialBatch) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    const auto options = torch::data::DataLoaderOptions(4).drop_last(true);
    const auto expected = plain_batches(22, options, 1, 6);
    ASSERT_EQ(expected.size(), 5u);
    accelerate::Accelerator accelerator(split_batches());
    auto loader = split_loader(accelerator, 22, options, 6);
    std::vector<std::vector<int64_t>> together;
    for (auto &batch : *loader) {
      together.push_back(values(accelerator.gather_for_metrics(batch.data)));
    }
    EXPECT_EQ(together, expected);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// even_batches off: the partial batch (3 rows of 4) is cut as it is, rank 0 gets 2 rows and
// rank 1 one; with 1 row, rank 1 gets no sixth batch at all.
TEST(ShardedLoader, SplitBatchesWithoutEvenBatchesCutTheLastBatchAsItIs) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator(split_batches(/*even_batches=*/false));
    for (const size_t size : {23, 21}) {
      const auto expected = plain_batches(size, 4, 1, 7);
      auto loader = split_loader(accelerator, size, 4, 7);
      std::vector<std::vector<int64_t>> mine;
      for (auto &batch : *loader) {
        mine.push_back(values(batch.data));
      }
      const auto &tail = expected.back();
      if (size == 21 && peer.rank == 1) {
        ASSERT_EQ(mine.size(), 5u);
        continue;
      }
      ASSERT_EQ(mine.size(), 6u);
      const auto begin = tail.begin() + 2 * peer.rank;
      EXPECT_EQ(mine.back(), std::vector<int64_t>(begin, std::min(begin + 2, tail.end())));
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(ShardedLoader, SplitBatchesRefuseABatchSizeTheProcessesCannotShare) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    accelerate::Accelerator accelerator(split_batches());
    try {
      split_loader(accelerator, 22, 5, 1);
      ADD_FAILURE() << "a batch of 5 was split across 2 processes";
    } catch (const std::invalid_argument &error) {
      EXPECT_EQ(std::string(error.what()),
                "accelerate: prepare_data_loader: split_batches gives each of the 2 processes an "
                "equal part of every batch, but the batch size 5 is not a multiple of 2; use a "
                "batch size that is (4 or 6), or turn split_batches off (Options::split_batches, "
                "ACCELERATE_SPLIT_BATCHES, accel launch --split_batches)");
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// A checkpoint in the middle of a split epoch: the resumed loader continues with the rows it
// would have had, and the next epoch's shuffle is the same too. Resuming it without
// split_batches is refused (a position counts slices, not whole batches).
TEST(ShardedLoader, SplitBatchesResumeInTheMiddleOfAnEpoch) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    const auto dir = (std::filesystem::temp_directory_path() /
                      ("accel-split-resume-" + std::to_string(accel_test::job_id())))
                         .string();
    std::vector<std::vector<int64_t>> straight;
    {
      accelerate::Accelerator accelerator(split_batches());
      auto loader = split_loader(accelerator, 22, 4, 8);
      for (int epoch = 0; epoch < 2; ++epoch) {
        size_t seen = 0;
        for (auto &batch : *loader) {
          if (epoch == 0 && ++seen == 3) {
            accelerator.save_state(dir);
            straight.clear(); // what follows the checkpoint
            continue;
          }
          straight.push_back(values(batch.data));
        }
      }
    }
    {
      accelerate::Accelerator accelerator(split_batches());
      auto loader = split_loader(accelerator, 22, 4, 99); // the checkpoint decides the order
      accelerator.load_state(dir);
      EXPECT_EQ(loader->completed_epochs(), 0);
      std::vector<std::vector<int64_t>> resumed;
      for (int epoch = loader->completed_epochs(); epoch < 2; ++epoch) {
        for (auto &batch : *loader) {
          resumed.push_back(values(batch.data));
        }
      }
      EXPECT_EQ(resumed, straight);
    }
    {
      accelerate::Options whole;
      whole.split_batches = false;
      accelerate::Accelerator accelerator(whole);
      auto loader = split_loader(accelerator, 22, 4, 8);
      try {
        accelerator.load_state(dir);
        ADD_FAILURE() << "a split position was resumed by a loader of whole batches";
      } catch (const std::runtime_error &error) {
        EXPECT_NE(std::string(error.what())
                      .find("holds a loader of 22 samples in batches of 4 split across the "
                            "processes in the middle of an epoch, and this program has it with "
                            "split_batches off"),
                  std::string::npos)
            << error.what();
      }
      accelerator.wait_for_everyone();
      if (accelerator.is_main_process()) {
        std::filesystem::remove_all(dir);
      }
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// prepare_batches: batches a program made itself, shared like a prepared loader's.
// Batch k holds the rows 10k, 10k+1, ... of its size.
accelerate::Options long_cycles(accelerate::Options options = {}) {
  options.gradient_accumulation_steps = 100; // a cycle ends only with the pass
  return options;
}

std::vector<std::pair<torch::Tensor, torch::Tensor>> hand_made_batches(std::vector<int64_t> sizes) {
  std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
  for (size_t k = 0; k < sizes.size(); ++k) {
    auto rows =
        torch::arange(static_cast<int64_t>(k) * 10, static_cast<int64_t>(k) * 10 + sizes[k]);
    batches.emplace_back(rows, rows * 2);
  }
  return batches;
}

std::vector<std::vector<int64_t>> rows_seen(accelerate::Accelerator &accelerator,
                                            std::vector<int64_t> sizes, bool &ended) {
  std::vector<std::vector<int64_t>> seen;
  for (auto &[x, y] : accelerator.prepare_batches(hand_made_batches(std::move(sizes)))) {
    EXPECT_TRUE(torch::equal(y, x * 2)); // the pair's halves stay together
    seen.emplace_back(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel());
    // The last batch ends the pass, as a loader's: an accumulation cycle closes there.
    auto guard = accelerator.accumulate();
    ended = accelerator.sync_gradients();
  }
  return seen;
}

TEST(PreparedBatches, EveryNthBatchAndTheFirstRepeatedToEvenThemOut) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator(long_cycles());
    bool ended = false;
    const auto seen = rows_seen(accelerator, {2, 2, 2, 2, 1}, ended);
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(seen, (V{{0, 1}, {20, 21}, {40}}));
    } else {
      EXPECT_EQ(seen, (V{{10, 11}, {30, 31}, {0, 1}}));
    }
    EXPECT_TRUE(ended);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(PreparedBatches, SplitBatchesGiveEachProcessItsRowsOfEveryBatch) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator(long_cycles(split_batches()));
    bool ended = false;
    const auto seen = rows_seen(accelerator, {4, 4, 3}, ended);
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(seen, (V{{0, 1}, {10, 11}, {20}}));
    } else {
      EXPECT_EQ(seen, (V{{2, 3}, {12, 13}, {21, 22}}));
    }
    EXPECT_TRUE(ended);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(PreparedBatches, OneProcessTakesEveryBatchAsItIs) {
  accelerate::Accelerator accelerator(long_cycles());
  bool ended = false;
  EXPECT_EQ(rows_seen(accelerator, {2, 1}, ended),
            (std::vector<std::vector<int64_t>>{{0, 1}, {10}}));
  EXPECT_TRUE(ended);
  // Tensors alone, and tuples, too.
  std::vector<torch::Tensor> plain = {torch::ones({2, 3}), torch::zeros({2, 3})};
  int64_t count = 0;
  for (const auto &x : accelerator.prepare_batches(plain)) {
    count += x.size(0);
  }
  EXPECT_EQ(count, 4);
  std::vector<std::tuple<torch::Tensor, torch::Tensor, torch::Tensor>> triples = {
      {torch::ones(2), torch::ones(2), torch::ones(2)}};
  for (auto &[a, b, c] : accelerator.prepare_batches(triples)) {
    EXPECT_EQ((a + b + c).sum().item<double>(), 6.0);
  }
}

// prepare_data_loader(std::move(loader)): a loader a factory function made, shared by every
// process running the whole of it and keeping its own batches.
auto made_by_a_factory(size_t size, size_t batch_size) {
  return torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      IndexDataset(size).map(torch::data::transforms::Stack<>()), batch_size);
}

TEST(MadeLoader, EveryNthBatchOfOneShuffleAndTheFirstRepeatedToEvenThemOut) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    const auto expected = plain_batches(10, 2, 2, 7); // 5 batches per epoch
    accelerate::Accelerator accelerator(long_cycles());
    // The shuffles come from process 0's generator, as one process's would from its own.
    torch::manual_seed(peer.rank == 0 ? 7 : 1234);
    auto loader = accelerator.prepare_data_loader(made_by_a_factory(10, 2));
    std::vector<std::vector<int64_t>> seen;
    bool ended = false;
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &batch : *loader) {
        seen.push_back(values(batch.data));
        auto guard = accelerator.accumulate();
        ended = accelerator.sync_gradients();
      }
      EXPECT_TRUE(ended) << "the last batch must close an accumulation cycle";
    }
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(seen,
                (V{expected[0], expected[2], expected[4], expected[5], expected[7], expected[9]}));
    } else {
      // Process 1 has no fifth batch: it takes the epoch's first one again.
      EXPECT_EQ(seen,
                (V{expected[1], expected[3], expected[0], expected[6], expected[8], expected[5]}));
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(MadeLoader, SplitBatchesGiveEachProcessItsRowsOfEveryBatch) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    const auto expected = plain_batches(10, 4, 1, 9); // 4, 4, 2 rows
    accelerate::Accelerator accelerator(split_batches());
    torch::manual_seed(peer.rank == 0 ? 9 : 4321);
    auto loader = accelerator.prepare_data_loader(made_by_a_factory(10, 4));
    std::vector<std::vector<int64_t>> together;
    for (auto &batch : *loader) {
      EXPECT_EQ(batch.data.size(0), expected[together.size()].size() / 2);
      together.push_back(values(accelerator.gather(batch.data)));
    }
    EXPECT_EQ(together, expected);
    // Without Stack a batch is a list of samples: each process takes its part of the list.
    auto unstacked = accelerator.prepare_data_loader(
        torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(IndexDataset(10),
                                                                                4));
    std::vector<int64_t> first_samples;
    for (auto &batch : *unstacked) {
      first_samples.push_back(batch.front().data.item<int64_t>());
    }
    EXPECT_EQ(first_samples,
              peer.rank == 0 ? (std::vector<int64_t>{0, 4, 8}) : (std::vector<int64_t>{2, 6, 9}));
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(MadeLoader, OneProcessTakesEveryBatchAsItIsAndANullLoaderIsRefused) {
  accelerate::Accelerator accelerator;
  auto loader = accelerator.prepare_data_loader(made_by_a_factory(5, 2));
  std::vector<int64_t> rows;
  for (auto &batch : *loader) {
    rows.push_back(batch.data.size(0));
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{2, 2, 1}));
  decltype(made_by_a_factory(5, 2)) none;
  EXPECT_THROW(accelerator.prepare_data_loader(std::move(none)), c10::Error);
}

// batch_range and batch_rows: a loop that cuts its batches itself from a tensor it holds whole
// (`for (i = 0; i < n; i += b) x = data.slice(0, i, i + b)`), shared like a list of batches.
std::vector<std::vector<int64_t>> rows_cut(accelerate::Accelerator &accelerator, int64_t n,
                                           int64_t batch, bool &ended) {
  const auto data = torch::arange(n);
  std::vector<std::vector<int64_t>> seen;
  for (int64_t i : accelerator.batch_range(0, n, batch)) {
    const auto x = accelerator.batch_rows(data.slice(0, i, std::min(i + batch, n)));
    seen.emplace_back(x.data_ptr<int64_t>(), x.data_ptr<int64_t>() + x.numel());
    auto guard = accelerator.accumulate();
    ended = accelerator.sync_gradients();
  }
  return seen;
}

TEST(BatchRange, IterationKGoesToProcessKModNAndTheFirstAreRepeatedToEvenThemOut) {
  using V = std::vector<int64_t>;
  using accelerate::detail::plan_iterations;
  EXPECT_EQ(plan_iterations(5, 0, 2, true, false), (V{0, 2, 4}));
  EXPECT_EQ(plan_iterations(5, 1, 2, true, false), (V{1, 3, 0}));
  EXPECT_EQ(plan_iterations(5, 1, 2, false, false), (V{1, 3}));
  EXPECT_EQ(plan_iterations(5, 1, 2, true, true), (V{0, 1, 2, 3, 4}));
  EXPECT_EQ(plan_iterations(0, 0, 2, true, false), V{});
  EXPECT_EQ(plan_iterations(3, 0, 1, true, false), (V{0, 1, 2}));
  // Rows of a batch: equal parts, one more for the first processes, and a row again for a
  // process that would get none (fewer rows than processes).
  bool repeated = false;
  const auto rows = torch::arange(5);
  EXPECT_TRUE(
      torch::equal(accelerate::detail::rows_of_process(rows, 0, 2, repeated), torch::arange(0, 2)));
  EXPECT_TRUE(
      torch::equal(accelerate::detail::rows_of_process(rows, 1, 2, repeated), torch::arange(2, 5)));
  EXPECT_FALSE(repeated);
  EXPECT_TRUE(torch::equal(accelerate::detail::rows_of_process(torch::arange(1), 1, 2, repeated),
                           torch::arange(1)));
  EXPECT_FALSE(repeated);
  EXPECT_TRUE(torch::equal(accelerate::detail::rows_of_process(torch::arange(1), 0, 2, repeated),
                           torch::arange(1)));
  EXPECT_TRUE(repeated);
}

TEST(BatchRange, EveryNthBatchCutOnTwoProcessesAndTheRandomStateSharedAfterThePass) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator(long_cycles());
    torch::manual_seed(peer.rank == 0 ? 1 : 2); // drawn apart on purpose
    bool ended = false;
    testing::internal::CaptureStderr();
    const auto seen = rows_cut(accelerator, 9, 2, ended);
    const std::string note = testing::internal::GetCapturedStderr();
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(seen, (V{{0, 1}, {4, 5}, {8}}));
      EXPECT_NE(note.find("a loop's 5 batches do not divide among the 2 processes: the first 1 "
                          "are run again"),
                std::string::npos)
          << note;
    } else {
      EXPECT_EQ(seen, (V{{2, 3}, {6, 7}, {0, 1}}));
      EXPECT_EQ(note, "");
    }
    EXPECT_TRUE(ended); // the last batch closes an accumulation cycle, as a loader's
    // The next epoch's permutation is the same on both processes.
    const auto perm = torch::randperm(1000);
    EXPECT_TRUE(torch::equal(accelerator.reduce(perm.to(torch::kDouble), "sum"),
                             perm.to(torch::kDouble) * 2));
    // A step of 1 counts batches (`x = data.narrow(0, b * size, size)`).
    std::vector<int64_t> picked;
    for (int64_t b : accelerator.batch_range(0, 4)) {
      picked.push_back(b);
    }
    EXPECT_EQ(picked, (peer.rank == 0 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{1, 3}));
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(BatchRange, SplitBatchesRunEveryIterationOnItsRows) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator(long_cycles(split_batches()));
    bool ended = false;
    const auto seen = rows_cut(accelerator, 10, 4, ended);
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(seen, (V{{0, 1}, {4, 5}, {8}}));
    } else {
      EXPECT_EQ(seen, (V{{2, 3}, {6, 7}, {9}}));
    }
    EXPECT_TRUE(ended);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(BatchRange, ABatchOfSeveralTensorsTakenFromAListIsCutAlike) {
  // `auto [x, y] = accelerator.batch_rows(pairs[b]);`: the same rows of each tensor, under
  // split_batches; the batch as it is otherwise.
  for (const bool split : {true, false}) {
    auto results = accel_test::run_in_processes(2, [split](const accel_test::Peer &peer) {
      accelerate::Accelerator accelerator(split ? split_batches() : accelerate::Options::on_cpu());
      const std::pair<torch::Tensor, torch::Tensor> pair{torch::arange(5), torch::arange(5) * 10};
      const auto [x, y] = accelerator.batch_rows(pair);
      const auto expected = !split           ? torch::arange(5)
                            : peer.rank == 0 ? torch::arange(0, 2)
                                             : torch::arange(2, 5);
      EXPECT_TRUE(torch::equal(x, expected)) << x;
      EXPECT_TRUE(torch::equal(y, expected * 10)) << y;
      const torch::data::Example<> example{torch::arange(3), torch::arange(3) + 1};
      const auto part = accelerator.batch_rows(example);
      const auto rows = !split           ? torch::arange(3)
                        : peer.rank == 0 ? torch::arange(0, 1)
                                         : torch::arange(1, 3);
      EXPECT_TRUE(torch::equal(part.data, rows)) << part.data;
      EXPECT_TRUE(torch::equal(part.target, rows + 1)) << part.target;
      // Fewer rows than processes: a process left without a row takes one again, not none.
      const std::tuple<torch::Tensor, torch::Tensor> one{torch::ones({1, 2}), torch::zeros(1)};
      EXPECT_EQ(std::get<0>(accelerator.batch_rows(one)).size(0), 1);
      EXPECT_EQ(std::get<1>(accelerator.batch_rows(one)).size(0), 1);
      // Tensors whose rows differ (an EmbeddingBag's token ids of the whole batch beside one
      // offset per sequence) cannot be cut alike: refused under split_batches, whether taken
      // from a list or handed out by prepare_batches; passed whole otherwise.
      const std::tuple<torch::Tensor, torch::Tensor> ragged{torch::arange(7), torch::arange(3)};
      std::vector<std::tuple<torch::Tensor, torch::Tensor>> list{ragged};
      const std::string refusal = "first tensor has 7 rows where another tensor has 3";
      if (split) {
        for (const bool handed_out : {false, true}) {
          try {
            if (handed_out) {
              for (const auto &batch : accelerator.prepare_batches(list)) {
                (void)batch;
              }
            } else {
              accelerator.batch_rows(ragged);
            }
            ADD_FAILURE() << "a batch of tensors with different rows was cut";
          } catch (const c10::Error &error) {
            EXPECT_NE(std::string(error.what()).find(refusal), std::string::npos) << error.what();
          }
        }
      } else {
        EXPECT_EQ(std::get<0>(accelerator.batch_rows(ragged)).size(0), 7);
        for (const auto &[ids, offsets] : accelerator.prepare_batches(list)) {
          EXPECT_EQ(ids.size(0) + offsets.size(0), 10);
        }
      }
    });
    EXPECT_TRUE(accel_test::all_succeeded(results)) << (split ? "split" : "sharded");
  }
}

TEST(BatchRange, OneProcessRunsTheLoopAsWrittenAndABadStepIsRefused) {
  accelerate::Accelerator accelerator(long_cycles());
  bool ended = false;
  EXPECT_EQ(rows_cut(accelerator, 5, 2, ended),
            (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {4}}));
  EXPECT_TRUE(ended);
  EXPECT_EQ(accelerator.batch_range(3, 3, 1).size(), 0u);
  EXPECT_EQ(accelerator.batch_range(5, 2, 1).size(), 0u);
  try {
    accelerator.batch_range(0, 4, 0);
    FAIL() << "a step of 0 was taken";
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("the step must be positive, not 0"),
              std::string::npos);
  }
}

} // namespace
