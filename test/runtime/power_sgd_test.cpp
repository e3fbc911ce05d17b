// PowerSGD (Options::comm_hook = "powersgd", as DDP's powerSGD_hook), in two real processes: an
// average of rank r is rebuilt exactly from rank-r factors, a full-rank one is approximated and
// error feedback gives back what the approximations missed, the first steps are uncompressed,
// every process ends with the same bits, a non-finite step poisons nothing after it, and the
// settings come from Options, then the environment, with bad values refused.
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace {

using namespace accel_test;

// Two layers whose weights PowerSGD compresses (48×32 and 6×48 are well above twice their
// factors' size), with biases that travel uncompressed.
struct TwoLayersImpl : torch::nn::Module {
  TwoLayersImpl() {
    first = register_module("first", torch::nn::Linear(32, 48));
    second = register_module("second", torch::nn::Linear(48, 6));
  }
  torch::Tensor forward(const torch::Tensor &x) {
    return second->forward(torch::tanh(first->forward(x)));
  }
  torch::nn::Linear first{nullptr}, second{nullptr};
};
TORCH_MODULE(TwoLayers);

accelerate::Options power_sgd(int rank, int start_iteration) {
  accelerate::Options options;
  options.comm_hook = "powersgd";
  options.power_sgd.matrix_approximation_rank = rank;
  options.power_sgd.start_powersgd_iter = start_iteration;
  return options;
}

/// This process's loss on its own `samples` samples (different on every process).
torch::Tensor local_loss(TwoLayers &model, int rank, int64_t samples) {
  auto generator = at::detail::createCPUGenerator(500 + rank);
  const auto input = torch::randn({samples, 32}, generator);
  const auto target = torch::randn({samples, 6}, generator);
  return torch::mse_loss(model->forward(input), target);
}

/// The exact average over the processes of each parameter's local gradient for `loss`.
std::vector<torch::Tensor> exact_average(accelerate::Accelerator &accelerator,
                                         const torch::Tensor &loss,
                                         const std::vector<torch::Tensor> &parameters) {
  const auto local = torch::autograd::grad({loss}, parameters, {}, /*retain_graph=*/true);
  std::vector<torch::Tensor> average;
  for (const auto &gradient : local) {
    average.push_back(accelerator.gather(gradient.unsqueeze(0)).mean(0));
  }
  return average;
}

double relative_error(const torch::Tensor &got, const torch::Tensor &expected) {
  return ((got - expected).norm() / expected.norm()).item<double>();
}

/// Whether every process holds exactly the same `tensor`.
bool same_everywhere(accelerate::Accelerator &accelerator, const torch::Tensor &tensor) {
  const auto all = accelerator.gather(tensor.unsqueeze(0));
  return torch::equal(all[0], all[1]);
}

class Transport : public ::testing::TestWithParam<bool> {};

// With one sample per process each weight's local gradient is an outer product (rank 1), so
// their average has rank 2 and rank-2 factors rebuild it: only rounding separates the two.
TEST_P(Transport, AnAverageOfRankRIsRebuiltFromRankRFactors) {
  const bool shared_memory = GetParam();
  auto results = run_in_processes(2, [&](const Peer &peer) {
    setenv("ACCELERATE_SHARED_MEMORY", shared_memory ? "true" : "false", 1);
    accelerate::Accelerator accelerator(power_sgd(/*rank=*/2, /*start_iteration=*/0));
    ASSERT_EQ(accelerator.comm_hook(), "powersgd");
    // The same weights on every run: LibTorch's default generator is seeded differently each
    // time, and the rounding of a rank-R rebuild depends on the weights.
    torch::manual_seed(7);
    TwoLayers model;
    accelerator.prepare(model);
    const auto loss = local_loss(model, peer.rank, /*samples=*/1);
    const auto parameters = model->parameters();
    const auto expected = exact_average(accelerator, loss, parameters);
    accelerator.backward(loss);
    for (size_t i = 0; i < parameters.size(); ++i) {
      const auto &grad = parameters[i].grad();
      EXPECT_LT(relative_error(grad, expected[i]), 1e-5) << "parameter " << i;
      EXPECT_TRUE(same_everywhere(accelerator, grad)) << "parameter " << i;
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

INSTANTIATE_TEST_SUITE_P(PowerSgd, Transport, ::testing::Values(true, false),
                         [](const auto &info) { return info.param ? "SharedMemory" : "Gloo"; });

// The same full-rank local gradients at every step (the parameters never move): rank-1 factors
// miss most of their average at the first step, and error feedback hands the rest back over
// the following steps, so that the mean of the applied gradients approaches the average.
// Without error feedback the mean stays as far from it as the first step.
TEST(PowerSgd, ErrorFeedbackGivesBackWhatTheApproximationsMissed) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    // Gloo, where PowerSGD is meant to run; its waits also block instead of polling, which
    // keeps a thousand steps quick when other tests share the cores.
    setenv("ACCELERATE_SHARED_MEMORY", "false", 1);
    for (const bool feedback : {true, false}) {
      auto options = power_sgd(/*rank=*/1, /*start_iteration=*/0);
      options.power_sgd.use_error_feedback = feedback;
      accelerate::Accelerator accelerator(options);
      accelerate::set_seed(3);
      torch::manual_seed(7);
      TwoLayers model;
      accelerator.prepare(model);
      const auto weight = model->first->weight;
      const auto expected =
          exact_average(accelerator, local_loss(model, peer.rank, 16), {weight})[0];
      constexpr int kSteps = 300;
      auto applied = torch::zeros_like(weight);
      double first_step_error = 0;
      for (int step = 0; step < kSteps; ++step) {
        model->zero_grad();
        accelerator.backward(local_loss(model, peer.rank, 16));
        applied += weight.grad();
        if (step == 0) {
          first_step_error = relative_error(weight.grad(), expected);
        }
      }
      EXPECT_TRUE(same_everywhere(accelerator, applied));
      const double mean_error = relative_error(applied / kSteps, expected);
      EXPECT_GT(first_step_error, 0.3) << "rank-1 factors rebuilt a full-rank average";
      if (feedback) {
        EXPECT_LT(mean_error, 0.05) << "error feedback did not give back what was missed";
      } else {
        EXPECT_GT(mean_error, 0.2) << "without error feedback, nothing should be given back";
      }
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(PowerSgd, TheFirstStepsAreSummedUncompressed) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator(power_sgd(/*rank=*/1, /*start_iteration=*/2));
    torch::manual_seed(7);
    TwoLayers model;
    accelerator.prepare(model);
    const auto weight = model->first->weight;
    const auto expected = exact_average(accelerator, local_loss(model, peer.rank, 16), {weight})[0];
    for (int step = 0; step < 3; ++step) {
      model->zero_grad();
      accelerator.backward(local_loss(model, peer.rank, 16));
      const double error = relative_error(weight.grad(), expected);
      if (step < 2) {
        EXPECT_LT(error, 1e-6) << "step " << step << " was not the plain average";
      } else {
        EXPECT_GT(error, 0.3) << "step " << step << " was not compressed";
      }
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// One process's gradient overflows at the second step: every process sees non-finite weight
// gradients there (as the loss scaler of fp16 training needs), and the steps after it are as
// good as if it never happened: the error and the warm start kept nothing of it.
TEST(PowerSgd, ANonFiniteStepLeavesNothingBehind) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator(power_sgd(/*rank=*/2, /*start_iteration=*/0));
    torch::manual_seed(7);
    TwoLayers model;
    accelerator.prepare(model);
    const auto parameters = model->parameters();
    const auto expected = exact_average(accelerator, local_loss(model, peer.rank, 1), parameters);
    for (int step = 0; step < 4; ++step) {
      model->zero_grad();
      auto loss = local_loss(model, peer.rank, 1);
      if (step == 1 && peer.rank == 1) {
        loss = loss * std::numeric_limits<float>::infinity();
      }
      accelerator.backward(loss);
      const auto &weight_grad = model->first->weight.grad();
      if (step == 1) {
        EXPECT_FALSE(torch::isfinite(weight_grad).all().item<bool>())
            << "the overflow was hidden from the other process";
        continue;
      }
      for (size_t i = 0; i < parameters.size(); ++i) {
        EXPECT_LT(relative_error(parameters[i].grad(), expected[i]), 1e-5)
            << "step " << step << ", parameter " << i;
      }
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// Twenty epochs of a small regression: PowerSGD with rank 1 from the start ends near the
// uncompressed run's loss.
TEST(PowerSgd, TrainingReachesTheUncompressedLoss) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    setenv("ACCELERATE_SHARED_MEMORY", "false", 1); // as in the test above
    double final_loss[2] = {0, 0};
    for (const bool compressed : {false, true}) {
      accelerate::Options options;
      options.comm_hook = compressed ? "powersgd" : "no";
      options.power_sgd.start_powersgd_iter = 0;
      accelerate::Accelerator accelerator(options);
      accelerate::set_seed(11);
      torch::manual_seed(7);
      TwoLayers model;
      torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
      accelerator.prepare(model, optimizer);
      auto generator = at::detail::createCPUGenerator(900 + peer.rank);
      const auto input = torch::randn({64, 32}, generator);
      const auto target = torch::tanh(input.narrow(1, 0, 6) * 2);
      torch::Tensor loss;
      for (int step = 0; step < 300; ++step) {
        optimizer.zero_grad();
        loss = torch::mse_loss(model->forward(input), target);
        accelerator.backward(loss);
        optimizer.step();
      }
      final_loss[compressed] = accelerator.reduce(loss.detach(), "mean").item<double>();
    }
    EXPECT_LT(final_loss[1], final_loss[0] * 1.25) << "uncompressed " << final_loss[0];
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(PowerSgd, TheSettingsComeFromOptionsThenTheEnvironment) {
  setenv("ACCELERATE_COMM_HOOK", "powersgd", 1);
  setenv("ACCELERATE_POWERSGD_RANK", "4", 1);
  setenv("ACCELERATE_POWERSGD_START_ITER", "10", 1);
  {
    accelerate::Accelerator from_environment;
    EXPECT_EQ(from_environment.comm_hook(), "powersgd");
    EXPECT_EQ(from_environment.options().power_sgd.matrix_approximation_rank, 4);
    EXPECT_EQ(from_environment.options().power_sgd.start_powersgd_iter, 10);
    accelerate::Accelerator from_options(power_sgd(2, 0));
    EXPECT_EQ(from_options.options().power_sgd.matrix_approximation_rank, 2);
    EXPECT_EQ(from_options.options().power_sgd.start_powersgd_iter, 0);
  }
  unsetenv("ACCELERATE_POWERSGD_RANK");
  unsetenv("ACCELERATE_POWERSGD_START_ITER");
  accelerate::Accelerator by_default;
  EXPECT_EQ(by_default.options().power_sgd.matrix_approximation_rank, 1);
  EXPECT_EQ(by_default.options().power_sgd.start_powersgd_iter, 1000);
  unsetenv("ACCELERATE_COMM_HOOK");
}

TEST(PowerSgd, BadSettingsAreRefusedNamingWhereTheyCameFrom) {
  const auto refusal = [](const accelerate::Options &options) -> std::string {
    try {
      accelerate::Accelerator accelerator(options);
    } catch (const std::invalid_argument &error) {
      return error.what();
    }
    return "accepted";
  };
  setenv("ACCELERATE_POWERSGD_RANK", "two", 1);
  EXPECT_EQ(refusal(power_sgd(2, 0)), "accepted") << "Options win over the environment";
  accelerate::Options from_environment;
  from_environment.comm_hook = "powersgd";
  EXPECT_NE(refusal(from_environment).find("ACCELERATE_POWERSGD_RANK='two' is not a whole number"),
            std::string::npos)
      << refusal(from_environment);
  unsetenv("ACCELERATE_POWERSGD_RANK");
  EXPECT_NE(refusal(power_sgd(0, 0)).find("matrix_approximation_rank is 0; it must be at least 1"),
            std::string::npos)
      << refusal(power_sgd(0, 0));
  EXPECT_NE(refusal(power_sgd(1, -1)).find("start_powersgd_iter is -1; it must be at least 0"),
            std::string::npos)
      << refusal(power_sgd(1, -1));
}

} // namespace
