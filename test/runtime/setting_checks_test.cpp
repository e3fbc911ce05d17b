// The runtime never silently ignores a setting: with gradient accumulation or mixed precision in
// effect, a step that bypasses them warns once, on the main process; a correct loop never does.
#include "multiprocess.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace {

using namespace accel_test;

// The beginnings of the three warnings (setting_checks.cpp).
constexpr const char *kBareBackward =
    "accelerate: warning: a backward pass reached a prepared model's parameters without "
    "accelerator.backward";
constexpr const char *kOutsideAccumulate =
    "accelerate: warning: accelerator.backward ran outside an accelerator.accumulate() guard";
constexpr const char *kOutsideAutocast =
    "accelerate: warning: accelerator.backward ran with no accelerator.autocast() guard";

size_t count(const std::string &text, const std::string &needle) {
  size_t found = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++found;
  }
  return found;
}

// The warning's whole line on rank 0's output ("" when there is none).
std::string line_of(const std::string &output, const std::string &start) {
  const auto at = output.find(start);
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

const std::string &output_of(const std::vector<WorkerResult> &results, int rank) {
  for (const auto &result : results) {
    if (result.exit.rank == rank) {
      return result.output;
    }
  }
  throw std::runtime_error("no result for rank " + std::to_string(rank));
}

accelerate::Options settings(int accumulation, const std::string &precision) {
  accelerate::Options options;
  options.gradient_accumulation_steps = accumulation;
  options.mixed_precision = precision;
  return options;
}

/// How the loop's step is written.
struct Step {
  bool accelerator_backward = true;
  bool accumulate_guard = true;
  bool autocast_guard = true;
  bool autocast_ends_before_backward = false;
};

// Two epochs of 2 processes over the fixture's data, each step written as `step` says.
std::vector<WorkerResult> train_in_two_processes(const accelerate::Options &options, Step step) {
  return run_in_processes(2, [options, step](const Peer &) {
    accelerate::Accelerator accelerator(options);
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.05);
    accelerator.prepare(model, optimizer);
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
        RegressionDataset().map(torch::data::transforms::Stack<>()), 4);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto &batch : *loader) {
        std::optional<accelerate::Accelerator::AccumulateGuard> guard;
        if (step.accumulate_guard) {
          guard.emplace(accelerator.accumulate(model));
        }
        torch::Tensor loss;
        {
          std::optional<accelerate::Accelerator::AutocastGuard> autocast;
          if (step.autocast_guard) {
            autocast.emplace(accelerator.autocast());
          }
          loss = torch::mse_loss(model->forward(batch.data).to(torch::kFloat), batch.target);
          if (!step.autocast_ends_before_backward) {
            if (step.accelerator_backward) {
              accelerator.backward(loss);
            } else {
              loss.backward();
            }
          }
        }
        if (step.autocast_ends_before_backward) {
          accelerator.backward(loss);
        }
        accelerator.step(optimizer);
        accelerator.zero_grad(optimizer);
      }
    }
    // Printed last, so the test knows the loop ran to the end.
    std::cerr << "trained\n";
  });
}

void expect_once_on_rank_zero(const std::vector<WorkerResult> &results, const std::string &start,
                              const std::vector<std::string> &naming) {
  ASSERT_TRUE(all_succeeded(results));
  const auto &main = output_of(results, 0);
  EXPECT_EQ(count(main, start), 1u) << main;
  EXPECT_EQ(count(output_of(results, 1), start), 0u) << output_of(results, 1);
  const auto line = line_of(main, start);
  for (const auto &word : naming) {
    EXPECT_NE(line.find(word), std::string::npos) << "'" << word << "' missing from: " << line;
  }
}

void expect_no_warning(const std::vector<WorkerResult> &results) {
  ASSERT_TRUE(all_succeeded(results));
  for (const auto &result : results) {
    EXPECT_EQ(count(result.output, "trained"), 1u) << result.output;
    for (const char *warning : {kBareBackward, kOutsideAccumulate, kOutsideAutocast}) {
      EXPECT_EQ(count(result.output, warning), 0u) << result.output;
    }
  }
}

// One job per test: a worker re-runs its test from the start (multiprocess.h).
TEST(SettingChecks, APlainBackwardUnderAccumulationWarnsOnceOnTheMainProcess) {
  Step step;
  step.accelerator_backward = false;
  expect_once_on_rank_zero(train_in_two_processes(settings(2, "no"), step), kBareBackward,
                           {"gradient_accumulation_steps=2", "accelerator.backward(loss)",
                            "instead of loss.backward()"});
}

TEST(SettingChecks, APlainBackwardUnderMixedPrecisionWarnsOnceNamingBothSettings) {
  Step step;
  step.accelerator_backward = false;
  expect_once_on_rank_zero(
      train_in_two_processes(settings(2, "bf16"), step), kBareBackward,
      {"gradient_accumulation_steps=2 and mixed_precision=bf16", "accelerator.backward(loss)"});
}

TEST(SettingChecks, BackwardOutsideTheAccumulateGuardWarnsOnce) {
  Step step;
  step.accumulate_guard = false;
  const auto results = train_in_two_processes(settings(2, "no"), step);
  expect_once_on_rank_zero(
      results, kOutsideAccumulate,
      {"gradient_accumulation_steps=2", "auto guard = accelerator.accumulate(model);"});
  EXPECT_EQ(count(output_of(results, 0), kBareBackward), 0u) << "backward went through accelerator";
}

TEST(SettingChecks, BackwardWithoutAnAutocastGuardWarnsOnce) {
  Step step;
  step.autocast_guard = false;
  const auto results = train_in_two_processes(settings(1, "fp16"), step);
  expect_once_on_rank_zero(results, kOutsideAutocast,
                           {"mixed_precision=fp16", "auto autocast = accelerator.autocast();"});
  EXPECT_EQ(count(output_of(results, 0), kOutsideAccumulate), 0u) << "no accumulation in effect";
}

TEST(SettingChecks, TheCorrectLoopNeverWarns) {
  expect_no_warning(train_in_two_processes(settings(2, "bf16"), Step{}));
}

TEST(SettingChecks, AnAutocastGuardThatEndsBeforeBackwardIsCorrectToo) {
  Step step;
  step.autocast_ends_before_backward = true;
  expect_no_warning(train_in_two_processes(settings(2, "bf16"), step));
}

TEST(SettingChecks, DefaultSettingsNeverWarnWhateverTheLoop) {
  Step step;
  step.accelerator_backward = false;
  step.accumulate_guard = false;
  step.autocast_guard = false;
  expect_no_warning(train_in_two_processes(accelerate::Options{}, step));
}

// One process has no gradient synchronisation, but the settings still apply and still warn.
TEST(SettingChecks, OneProcessWarnsToo) {
  ::testing::internal::CaptureStderr();
  {
    accelerate::Accelerator accelerator(settings(3, "no"));
    Net model;
    accelerator.prepare(model);
    for (int i = 0; i < 3; ++i) {
      model->forward(torch::ones({2, 8})).sum().backward();
      accelerator.backward(model->forward(torch::ones({2, 8})).sum());
    }
  }
  const auto output = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(output, kBareBackward), 1u) << output;
  EXPECT_EQ(count(output, kOutsideAccumulate), 1u) << output;
  EXPECT_NE(line_of(output, kOutsideAccumulate)
                .find("gradient_accumulation_steps=3 does not apply to it"),
            std::string::npos)
      << output;
}

} // namespace
