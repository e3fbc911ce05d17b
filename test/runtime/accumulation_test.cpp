// Gradient accumulation, the optimizer step and clipping.
#include "multiprocess.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

namespace {

using namespace accel_test;

/// Where the loop clears gradients: after the step (Accelerate's examples) or first thing in
/// the step (LibTorch's examples, and what accel-rewrite leaves in place).
enum class ZeroGrad { AfterStep, BeforeForward };

template <typename Sampler>
std::vector<torch::Tensor> train_accumulating(int accumulation, size_t batch, uint64_t seed,
                                              ZeroGrad zero = ZeroGrad::AfterStep) {
  accelerate::Options options;
  options.gradient_accumulation_steps = accumulation;
  accelerate::Accelerator accelerator(options);
  accelerate::set_seed(seed);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<Sampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), batch);
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (auto &b : *loader) {
      auto guard = accelerator.accumulate(model);
      if (zero == ZeroGrad::BeforeForward) {
        accelerator.zero_grad(optimizer);
      }
      accelerator.backward(torch::mse_loss(model->forward(b.data), b.target));
      accelerator.step(optimizer);
      if (zero == ZeroGrad::AfterStep) {
        accelerator.zero_grad(optimizer);
      }
    }
  }
  return state_of(model);
}

std::string result_path() {
  return (std::filesystem::temp_directory_path() /
          ("accel-accumulation-" + std::to_string(job_id()) + ".pt"))
      .string();
}

template <typename Sampler>
void expect_two_by_two_equals_one_at_4b(ZeroGrad zero = ZeroGrad::AfterStep) {
  auto results = run_in_processes(2, [zero](const Peer &peer) {
    auto state = train_accumulating<Sampler>(2, 4, 1000 + peer.rank, zero);
    if (peer.rank == 0) {
      torch::save(state, result_path());
    }
  });
  ASSERT_TRUE(all_succeeded(results));
  std::vector<torch::Tensor> distributed;
  torch::load(distributed, result_path());
  std::filesystem::remove(result_path());
  const auto single = train_accumulating<Sampler>(1, 16, 1000);
  ASSERT_EQ(distributed.size(), single.size());
  for (size_t i = 0; i < single.size(); ++i) {
    EXPECT_TRUE(torch::allclose(distributed[i], single[i], 1e-5, 1e-6))
        << "tensor " << i << " differs by " << (distributed[i] - single[i]).abs().max();
  }
}

// One job per test: a worker re-runs its test from the start (multiprocess.h).
TEST(Accumulation, TwoProcessesAccumulatingTwoAtBatchBMatchOneProcessAt4BSequential) {
  expect_two_by_two_equals_one_at_4b<torch::data::samplers::SequentialSampler>();
}

TEST(Accumulation, TwoProcessesAccumulatingTwoAtBatchBMatchOneProcessAt4BRandom) {
  expect_two_by_two_equals_one_at_4b<torch::data::samplers::RandomSampler>();
}

// zero_grad first in the step must not clear what the cycle accumulated so far.
TEST(Accumulation, ZeroGradBeforeTheForwardPassKeepsTheCycleGradients) {
  expect_two_by_two_equals_one_at_4b<torch::data::samplers::RandomSampler>(ZeroGrad::BeforeForward);
}

// Clearing through the model (`model->zero_grad()`) keeps a cycle's gradients as clearing
// through the optimizer does, and clears them once the optimizer has used them.
TEST(Accumulation, ZeroGradOfTheModelKeepsTheCycleGradients) {
  accelerate::Options options;
  options.gradient_accumulation_steps = 2;
  accelerate::Accelerator accelerator(options);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  const auto x = torch::ones({2, 8});
  torch::Tensor first;
  for (int i = 0; i < 3; ++i) {
    auto guard = accelerator.accumulate(model);
    accelerator.zero_grad(*model);
    if (i == 1) {
      ASSERT_TRUE(model->first->weight.grad().defined()) << "step 1 cleared the cycle";
      EXPECT_TRUE(torch::equal(model->first->weight.grad(), first));
    }
    if (i == 2) {
      EXPECT_FALSE(model->first->weight.grad().defined()) << "step 2 kept used gradients";
    }
    accelerator.backward(model->forward(x).sum());
    if (i == 0) {
      first = model->first->weight.grad().clone();
    }
    accelerator.step(optimizer);
  }
}

TEST(Accumulation, GradientsStayLocalUntilTheSyncStep) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Options options;
    options.gradient_accumulation_steps = 2;
    accelerate::Accelerator accelerator(options);
    Net model;
    accelerator.prepare(model);
    const auto x = torch::ones({2, 8}) * (peer.rank + 1); // different data on each process
    const auto grads_now = [&] { return model->first->weight.grad().clone(); };

    // Step 1 of 2: no communication; the gradient is this process's own, halved.
    {
      auto guard = accelerator.accumulate(model);
      EXPECT_FALSE(accelerator.sync_gradients());
      accelerator.backward(model->forward(x).sum());
    }
    const auto local = grads_now();
    auto both = accelerator.gather(local.unsqueeze(0));
    EXPECT_FALSE(torch::equal(both[0], both[1])) << "gradients were synchronised too early";

    // Step 2 of 2: the sum of both steps, averaged over the processes.
    {
      auto guard = accelerator.accumulate(model);
      EXPECT_TRUE(accelerator.sync_gradients());
      accelerator.backward(model->forward(x).sum());
    }
    const auto synced = grads_now();
    both = accelerator.gather(synced.unsqueeze(0));
    EXPECT_TRUE(torch::equal(both[0], both[1])) << "gradients differ after the sync step";
    const auto expected = accelerator.reduce(local * 2, "mean");
    EXPECT_TRUE(torch::allclose(synced, expected, 1e-5, 1e-6));
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accumulation, OptimizerAndSchedulerMoveOncePerCycle) {
  accelerate::Options options;
  options.gradient_accumulation_steps = 3;
  accelerate::Accelerator accelerator(options);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);
  accelerator.prepare(model, optimizer, scheduler);
  int optimizer_steps = 0, scheduler_steps = 0;
  for (int i = 0; i < 6; ++i) {
    auto guard = accelerator.accumulate(model);
    const auto before = model->first->weight.detach().clone();
    accelerator.backward(model->forward(torch::ones({2, 8})).sum());
    optimizer_steps += accelerator.step(optimizer) ? 1 : 0;
    scheduler_steps += accelerator.step(scheduler) ? 1 : 0;
    accelerator.zero_grad(optimizer);
    const bool moved = !torch::equal(before, model->first->weight);
    EXPECT_EQ(moved, i % 3 == 2) << "step " << i;
  }
  EXPECT_EQ(optimizer_steps, 2);
  EXPECT_EQ(scheduler_steps, 2);
}

TEST(Accumulation, TheLastBatchOfALoaderAlwaysSyncs) {
  accelerate::Options options;
  options.gradient_accumulation_steps = 4;
  accelerate::Accelerator accelerator(options);
  Net model;
  accelerator.prepare(model);
  // 48 samples at batch 10: 5 batches; steps 4 and 5 (the last) synchronise.
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), 10);
  std::vector<bool> syncs;
  for (auto &b : *loader) {
    auto guard = accelerator.accumulate(model);
    syncs.push_back(accelerator.sync_gradients());
    accelerator.backward(torch::mse_loss(model->forward(b.data), b.target));
  }
  EXPECT_EQ(syncs, (std::vector<bool>{false, false, false, true, true}));
}

// A step written out once, outside accumulate() (accel-rewrite's straight-line step), is a
// whole step under any accumulation setting: the loss is not divided and the optimizer steps,
// also right after a guard closed in the middle of a cycle.
TEST(Accumulation, AStepOutsideAGuardIsWhole) {
  accelerate::Options options;
  options.gradient_accumulation_steps = 3;
  accelerate::Accelerator accelerator(options);
  torch::manual_seed(7);
  Net model, plain;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    plain->parameters()[i].copy_(model->parameters()[i]);
  }
  plain->offset.copy_(model->offset);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::SGD plain_optimizer(plain->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  {
    auto guard = accelerator.accumulate(model); // the first step of a cycle: no sync
    EXPECT_FALSE(accelerator.sync_gradients());
  }
  EXPECT_TRUE(accelerator.sync_gradients());
  const auto input = torch::linspace(-1, 1, 16).reshape({2, 8});
  {
    torch::AutoGradMode grad(true);
    accelerator.zero_grad(optimizer);
    accelerator.backward(model->forward(input).pow(2).sum());
    EXPECT_TRUE(accelerator.step(optimizer));
    plain_optimizer.zero_grad();
    plain->forward(input).pow(2).sum().backward();
    plain_optimizer.step();
  }
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(model->parameters()[i], plain->parameters()[i], 1e-6, 1e-7))
        << "parameter " << i << " differs by "
        << (model->parameters()[i] - plain->parameters()[i]).abs().max().item<double>();
  }
}

TEST(Accumulation, SettingsFromTheEnvironmentAndBadValues) {
  setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "3", 1);
  EXPECT_EQ(accelerate::Accelerator().gradient_accumulation_steps(), 3);
  setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "zero", 1);
  EXPECT_THROW(accelerate::Accelerator(), std::invalid_argument);
  unsetenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS");
  EXPECT_EQ(accelerate::Accelerator().gradient_accumulation_steps(), 1);
}

TEST(Clipping, ReturnsTheNormAndClips) {
  accelerate::Accelerator accelerator;
  Net model;
  accelerator.prepare(model);
  accelerator.backward(model->forward(torch::ones({4, 8}) * 10).sum());
  double before = 0;
  for (const auto &p : model->parameters()) {
    before += p.grad().pow(2).sum().item<double>();
  }
  const double norm = accelerator.clip_grad_norm_(model->parameters(), 0.5);
  EXPECT_NEAR(norm, std::sqrt(before), 1e-3 * std::sqrt(before));
  double after = 0;
  for (const auto &p : model->parameters()) {
    after += p.grad().pow(2).sum().item<double>();
  }
  EXPECT_NEAR(std::sqrt(after), 0.5, 1e-4);
}

enum class Clip { Norm, Value };

// One process clipping in every step, at batch `batch` with `accumulation` steps per update.
std::vector<torch::Tensor> train_clipping(Clip clip, int accumulation, size_t batch) {
  accelerate::Options options;
  options.gradient_accumulation_steps = accumulation;
  accelerate::Accelerator accelerator(options);
  accelerate::set_seed(7);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.05);
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), batch);
  for (auto &b : *loader) {
    auto guard = accelerator.accumulate(model);
    accelerator.zero_grad(optimizer);
    accelerator.backward(torch::mse_loss(model->forward(b.data), b.target));
    if (clip == Clip::Norm) {
      accelerator.clip_grad_norm_(model->parameters(), 0.01);
    } else {
      accelerator.clip_grad_value_(model->parameters(), 0.001);
    }
    accelerator.step(optimizer);
  }
  return state_of(model);
}

// Clipping acts on a cycle's whole gradient: two accumulated steps at batch 4 clip what one
// step at batch 8 clips. (Clipping each partial sum would not: the limits are tight enough
// that every step clips.)
TEST(Clipping, ClipsTheCyclesWholeGradientOnly) {
  for (Clip clip : {Clip::Norm, Clip::Value}) {
    const auto accumulated = train_clipping(clip, 2, 4), whole = train_clipping(clip, 1, 8);
    ASSERT_EQ(accumulated.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      EXPECT_TRUE(torch::allclose(accumulated[i], whole[i], 1e-4, 1e-6))
          << (clip == Clip::Norm ? "norm" : "value") << " parameter " << i;
    }
  }
}

TEST(Clipping, ValueClampsEachGradient) {
  accelerate::Accelerator accelerator;
  Net model;
  accelerator.prepare(model);
  accelerator.backward(model->forward(torch::ones({4, 8}) * 10).sum());
  accelerator.clip_grad_value_(model->parameters(), 0.25);
  for (const auto &p : model->parameters()) {
    EXPECT_LE(p.grad().abs().max().item<double>(), 0.25 + 1e-7);
  }
  EXPECT_DOUBLE_EQ(model->parameters()[0].grad().abs().max().item<double>(), 0.25);
}

} // namespace
