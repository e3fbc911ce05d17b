// Sharded loading: Accelerate's BatchSamplerShard vectors, checked on the plan and on real
// processes, and gather_for_metrics counting every sample once.
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

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
  // An odd number of full batches: process 1 gets the first batch again.
  EXPECT_EQ(plan_shard(range(21), 3, 1, 2, true, false).batches.back(),
            (std::vector<size_t>{0, 1, 2}));
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
    const auto batches = epoch_batches(accelerator, *loader);
    using V = std::vector<std::vector<int64_t>>;
    if (peer.rank == 0) {
      EXPECT_EQ(batches, (V{{0, 1, 2}, {6, 7, 8}, {12, 13, 14}, {18, 19, 20}}));
    } else {
      EXPECT_EQ(batches, (V{{3, 4, 5}, {9, 10, 11}, {15, 16, 17}, {21, 0, 1}}));
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
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

} // namespace
