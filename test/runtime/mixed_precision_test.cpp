// Mixed precision: the autocast guard (bf16, fp16) and fp16 loss scaling with overflow skips.
#include "multiprocess.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>

namespace {

using namespace accel_test;

accelerate::Options precision(const std::string &mode) {
  accelerate::Options options;
  options.mixed_precision = mode;
  return options;
}

// Makes the next backward through `model` produce an infinite gradient in its first layer.
void poison_next_gradient(Net &model) {
  auto fired = std::make_shared<bool>(false);
  model->first->weight.register_hook([fired](torch::Tensor grad) {
    if (*fired) {
      return grad;
    }
    *fired = true;
    return grad * std::numeric_limits<float>::infinity();
  });
}

torch::Tensor batch_inputs() { return torch::linspace(-1, 1, 64).reshape({8, 8}); }
torch::Tensor batch_targets() { return torch::linspace(0, 1, 32).reshape({8, 4}); }

TEST(MixedPrecision, Bf16AutocastRunsTheForwardPassInBf16AndKeepsParametersFp32) {
  accelerate::Accelerator accelerator(precision("bf16"));
  EXPECT_EQ(accelerator.mixed_precision(), "bf16");
  Net model;
  accelerator.prepare(model);
  {
    auto autocast = accelerator.autocast();
    EXPECT_EQ(model->first->forward(batch_inputs()).scalar_type(), torch::kBFloat16);
  }
  // Outside the guard the program's own precision is back.
  EXPECT_EQ(model->first->forward(batch_inputs()).scalar_type(), torch::kFloat32);
  for (const auto &parameter : model->parameters()) {
    EXPECT_EQ(parameter.scalar_type(), torch::kFloat32);
  }
}

TEST(MixedPrecision, NoMixedPrecisionLeavesTheForwardPassAlone) {
  accelerate::Accelerator accelerator(precision("no"));
  Net model;
  accelerator.prepare(model);
  auto autocast = accelerator.autocast();
  EXPECT_EQ(model->first->forward(batch_inputs()).scalar_type(), torch::kFloat32);
  EXPECT_EQ(accelerator.loss_scale(), 1.0);
}

TEST(MixedPrecision, Bf16TrainingConvergesWithFp32ParametersAndGradients) {
  accelerate::Accelerator accelerator(precision("bf16"));
  accelerate::set_seed(3);
  Net model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), 48);
  const auto loss_now = [&] {
    torch::NoGradGuard no_grad;
    auto autocast = accelerator.autocast();
    double total = 0;
    for (auto &batch : *loader) {
      total += torch::mse_loss(model->forward(batch.data), batch.target).item<double>();
    }
    return total;
  };
  const double before = loss_now();
  for (int epoch = 0; epoch < 200; ++epoch) {
    for (auto &batch : *loader) {
      auto autocast = accelerator.autocast();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      EXPECT_EQ(model->first->weight.grad().scalar_type(), torch::kFloat32);
      accelerator.step(optimizer);
      accelerator.zero_grad(optimizer);
    }
  }
  const double after = loss_now();
  EXPECT_LT(after, before * 0.5) << "before " << before << ", after " << after;
  EXPECT_EQ(model->first->weight.scalar_type(), torch::kFloat32);
}

TEST(MixedPrecision, Fp16AutocastRunsTheForwardPassInFp16) {
  accelerate::Accelerator accelerator(precision("fp16"));
  Net model;
  accelerator.prepare(model);
  auto autocast = accelerator.autocast();
  EXPECT_EQ(model->first->forward(batch_inputs()).scalar_type(), torch::kHalf);
}

// Scaling by a power of two and unscaling is exact, so a step through the scaler equals the
// unscaled step bit for bit (the forward pass runs in fp32 here: no autocast guard).
TEST(MixedPrecision, Fp16LossScalingGivesTheUnscaledStepAndTheTrueClipNorm) {
  const auto one_step = [](const std::string &mode, double *norm) {
    accelerate::Accelerator accelerator(precision(mode));
    accelerate::set_seed(5);
    Net model;
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    accelerator.prepare(model, optimizer);
    accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
    *norm = accelerator.clip_grad_norm_(model->parameters(), 1e9);
    EXPECT_TRUE(accelerator.step(optimizer));
    return state_of(model);
  };
  double scaled_norm = 0, plain_norm = 0;
  const auto scaled = one_step("fp16", &scaled_norm);
  const auto plain = one_step("no", &plain_norm);
  EXPECT_DOUBLE_EQ(scaled_norm, plain_norm);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(torch::equal(scaled[i], plain[i])) << "tensor " << i;
  }
}

TEST(MixedPrecision, Fp16OverflowSkipsTheStepAndBacksTheScaleOff) {
  accelerate::Accelerator accelerator(precision("fp16"));
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::StepLR scheduler(optimizer, 1, 0.5);
  accelerator.prepare(model, optimizer, scheduler);
  EXPECT_EQ(accelerator.loss_scale(), 65536.0);

  const auto before = state_of(model);
  poison_next_gradient(model);
  accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
  EXPECT_FALSE(accelerator.step(optimizer));
  EXPECT_TRUE(accelerator.optimizer_step_was_skipped());
  EXPECT_FALSE(accelerator.step(scheduler)) << "a skipped step must not move the schedule";
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(accelerator.loss_scale(), 32768.0);
  const auto after = state_of(model);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(torch::equal(before[i], after[i])) << "tensor " << i << " moved";
  }

  // The next clean step goes through.
  accelerator.zero_grad(optimizer);
  accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
  EXPECT_TRUE(accelerator.step(optimizer));
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped());
  EXPECT_TRUE(accelerator.step(scheduler));
  EXPECT_FALSE(torch::equal(before[0], model->first->weight));
  EXPECT_EQ(accelerator.loss_scale(), 32768.0);
  // LibTorch's StepLR keeps the rate at its first step and halves it at the second: had the
  // skipped step counted, the rate would be halved now.
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), 0.1);
  accelerator.zero_grad(optimizer);
  accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
  EXPECT_TRUE(accelerator.step(optimizer));
  EXPECT_TRUE(accelerator.step(scheduler));
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), 0.05);
}

TEST(MixedPrecision, Fp16ScaleGrowsAfterGrowthIntervalCleanSteps) {
  auto options = precision("fp16");
  options.grad_scaler.init_scale = 1024;
  options.grad_scaler.growth_interval = 3;
  accelerate::Accelerator accelerator(options);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.01);
  accelerator.prepare(model, optimizer);
  std::vector<double> scales;
  for (int step = 0; step < 7; ++step) {
    accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
    accelerator.step(optimizer);
    accelerator.zero_grad(optimizer);
    scales.push_back(accelerator.loss_scale());
  }
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 2048, 2048, 2048, 4096, 4096}));
}

TEST(MixedPrecision, BadModeIsRefusedWithTheAcceptedValues) {
  try {
    accelerate::Accelerator accelerator(precision("fp8"));
    FAIL() << "fp8 was accepted";
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("no, bf16 or fp16"), std::string::npos)
        << error.what();
  }
}

TEST(MixedPrecision, ModeComesFromTheLauncherEnvironment) {
  ::setenv("ACCELERATE_MIXED_PRECISION", "bf16", 1);
  accelerate::Accelerator accelerator;
  ::unsetenv("ACCELERATE_MIXED_PRECISION");
  EXPECT_EQ(accelerator.mixed_precision(), "bf16");
}

// Gradients are averaged before the overflow check, so an overflow on one process makes every
// process skip the same step and keep the same scale.
TEST(MixedPrecision, Fp16OverflowOnOneProcessSkipsTheStepEverywhere) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator(precision("fp16"));
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    const auto before = state_of(model);
    if (peer.rank == 1) {
      poison_next_gradient(model);
    }
    accelerator.backward(torch::mse_loss(model->forward(batch_inputs()), batch_targets()));
    EXPECT_FALSE(accelerator.step(optimizer));
    EXPECT_EQ(accelerator.loss_scale(), 32768.0);
    EXPECT_TRUE(torch::equal(before[0], model->first->weight));
  });
  EXPECT_TRUE(all_succeeded(results));
}

} // namespace
