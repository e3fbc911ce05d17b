// Local SGD (accelerate/local_sgd.h): gradients stay on their process, and the processes
// average their parameters every K steps. Two real processes over 127.0.0.1.
#include "multiprocess.h"
#include "training_fixture.h"

#include <accelerate/local_sgd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace {

using namespace accel_test;

/// Whether process 1 holds exactly process 0's parameters.
bool same_on_both(accelerate::Accelerator &accelerator, Net &model) {
  for (const auto &parameter : model->parameters()) {
    const auto both = accelerator.gather(parameter.detach().reshape({1, -1}));
    if (!torch::equal(both[0], both[1])) {
      return false;
    }
  }
  return true;
}

/// One epoch of SGD with momentum on the prepared loader (each process its own batches),
/// calling after_step with the step's number after each optimizer step.
template <typename AfterStep>
std::vector<torch::Tensor> train(accelerate::Accelerator &accelerator, AfterStep after_step) {
  accelerate::set_seed(11);
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), 4);
  int step = 0;
  for (auto &batch : *loader) {
    accelerator.zero_grad(optimizer);
    accelerator.backward(torch::mse_loss(model->forward(batch.data), batch.target));
    accelerator.step(optimizer);
    after_step(++step, model);
  }
  return state_of(model);
}

TEST(LocalSgd, OneStepApartEqualsAveragedGradients) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Accelerator accelerator;
    const auto all_reduced = train(accelerator, [](int, Net &) {});
    std::vector<torch::Tensor> local;
    {
      accelerate::LocalSGD local_sgd(accelerator, 1);
      local = train(accelerator, [&](int, Net &) { local_sgd.step(); });
    }
    ASSERT_EQ(local.size(), all_reduced.size());
    for (size_t i = 0; i < local.size(); ++i) {
      // Momentum is linear in the gradients: averaging parameters after each step is the
      // step on averaged gradients, up to rounding.
      EXPECT_TRUE(torch::allclose(local[i], all_reduced[i], 1e-5, 1e-6))
          << "tensor " << i << " differs by " << (local[i] - all_reduced[i]).abs().max();
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(LocalSgd, ProcessesDriftBetweenAveragesAndMeetAtEach) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Accelerator accelerator;
    accelerate::LocalSGD local_sgd(accelerator, 3);
    train(accelerator, [&](int step, Net &model) {
      local_sgd.step();
      EXPECT_EQ(same_on_both(accelerator, model), step % 3 == 0) << "after step " << step;
    });
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(LocalSgd, TheScopeAveragesOnceMoreWhenItEnds) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Accelerator accelerator;
    accelerate::set_seed(5);
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    auto batch = torch::randn({4, 8}) * (accelerator.process_index() + 1); // different per process
    {
      accelerate::LocalSGD local_sgd(accelerator, model, 10);
      accelerator.backward(model->forward(batch).sum());
      accelerator.step(optimizer);
      local_sgd.step();
      EXPECT_FALSE(same_on_both(accelerator, model));
    }
    EXPECT_TRUE(same_on_both(accelerator, model));
    // After the scope gradients are all-reduced again: one step keeps the processes together.
    accelerator.zero_grad(optimizer);
    accelerator.backward(model->forward(batch).sum());
    accelerator.step(optimizer);
    EXPECT_TRUE(same_on_both(accelerator, model));
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(LocalSgd, TheOptionRunsItForTheWholeRun) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Options options;
    options.local_sgd_steps = 2;
    accelerate::Accelerator accelerator(options);
    train(accelerator, [&](int step, Net &model) {
      EXPECT_EQ(same_on_both(accelerator, model), step % 2 == 0) << "after step " << step;
    });
    EXPECT_THROW(accelerate::LocalSGD(accelerator, 4), std::logic_error);
  });
  EXPECT_TRUE(all_succeeded(results));
}

// The count of steps is part of a checkpoint: a run resumed between two averages averages at
// the steps where one that went through does. Each process trains on its own rows, so the
// parameters drift apart between averages.
TEST(LocalSgd, TheStepCountIsSavedAndRestored) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    // One directory for the job's processes: named by its port.
    const auto dir = (std::filesystem::temp_directory_path() /
                      ("accel-local-sgd-count-" + std::to_string(peer.port)))
                         .string();
    accelerate::Options options;
    options.local_sgd_steps = 4;
    accelerate::Accelerator accelerator(options);
    accelerate::set_seed(3);
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.05);
    accelerator.prepare(model, optimizer);
    const auto rows = torch::full({4, 8}, peer.rank + 1.0f);
    auto step = [&] {
      accelerator.zero_grad(optimizer);
      accelerator.backward(model->forward(rows).pow(2).mean());
      accelerator.step(optimizer);
    };
    for (int i = 0; i < 3; ++i) {
      step();
    }
    ASSERT_FALSE(same_on_both(accelerator, model));
    accelerator.save_state(dir);
    step(); // the 4th: averaged
    step(); // the 5th
    // Back to 3 steps, with the main process's parameters on both (a checkpoint holds one
    // model); the next step, the 4th again, averages. Counted on from 5, it would not, and the
    // processes' own rows would take them apart.
    accelerator.load_state(dir);
    step();
    EXPECT_TRUE(same_on_both(accelerator, model));
    accelerator.wait_for_everyone();
    if (peer.rank == 0) {
      std::filesystem::remove_all(dir);
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(LocalSgd, BadStepCountsAreRefused) {
  accelerate::Accelerator accelerator;
  EXPECT_THROW(accelerate::LocalSGD(accelerator, 0), std::invalid_argument);
  ::setenv("ACCELERATE_LOCAL_SGD_STEPS", "8x", 1);
  try {
    accelerate::Accelerator refused;
    ADD_FAILURE() << "ACCELERATE_LOCAL_SGD_STEPS=8x was accepted";
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("ACCELERATE_LOCAL_SGD_STEPS"), std::string::npos)
        << error.what();
  }
  ::unsetenv("ACCELERATE_LOCAL_SGD_STEPS");
}

} // namespace
