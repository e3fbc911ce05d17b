// prepare in loops: a new model and optimizer per fold, the same model prepared twice, and
// prepared objects that die (checkpoints and fp16 clipping see only the live ones). What
// accel-rewrite writes for k-fold loops and for models trained one after another.
#include "multiprocess.h"
#include "runtime_access.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

namespace {

using namespace accel_test;
using accelerate::detail::RuntimeAccess;
namespace fs = std::filesystem;

using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

// A path every process of one job (and the test process that started it) agrees on.
std::string shared_path(const std::string &name) {
  return (fs::temp_directory_path() / ("accel-prepare-" + name + "-" + std::to_string(job_id())))
      .string();
}

::testing::AssertionResult all_close(const std::vector<torch::Tensor> &a,
                                     const std::vector<torch::Tensor> &b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << a.size() << " tensors vs " << b.size();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::allclose(a[i], b[i], 1e-5, 1e-6)) {
      return ::testing::AssertionFailure()
             << "tensor " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
    }
  }
  return ::testing::AssertionSuccess();
}

// Whether every process holds the same values.
::testing::AssertionResult same_everywhere(accelerate::Accelerator &accelerator,
                                           const std::vector<torch::Tensor> &tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto all = accelerator.gather(tensors[i].unsqueeze(0));
    for (int r = 1; r < accelerator.num_processes(); ++r) {
      if (!torch::equal(all[r], all[0])) {
        return ::testing::AssertionFailure() << "tensor " << i << " differs on process " << r;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

void train_epochs(accelerate::Accelerator &accelerator, torch::nn::Module &model,
                  const std::function<torch::Tensor(torch::Tensor)> &forward,
                  torch::optim::Optimizer &optimizer, int epochs = 2) {
  // Split batches: 8 rows a step in all, as the one-process run's batches of 8.
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), 8);
  model.train();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      accelerator.backward(torch::mse_loss(forward(batch.data), batch.target));
      optimizer.step();
    }
  }
}

accelerate::Options split_batches() {
  accelerate::Options options;
  options.split_batches = true;
  return options;
}

// Three folds, each with a new model and optimizer prepared in the loop and destroyed at its
// end, the model held in each of the forms prepare takes. Every process initialises from its
// own seed (prepare must broadcast process 0's), and process 0's seed is the one-process run's.
// Returns each fold's trained parameters; checks on the way that nothing of a finished fold is
// kept alive and that one gradient sync serves the live model.
std::vector<std::vector<torch::Tensor>> train_three_folds(int rank) {
  accelerate::Accelerator accelerator(split_batches());
  std::vector<std::vector<torch::Tensor>> folds;
  std::vector<WeakTensor> previous_fold;
  for (int fold = 0; fold < 3; ++fold) {
    torch::manual_seed(100 + fold + 1000 * rank);
    const auto fold_state = [&](torch::nn::Module &model, torch::optim::Optimizer &optimizer,
                                const std::function<torch::Tensor(torch::Tensor)> &forward) {
      accelerator.prepare(model, optimizer);
      for (const auto &weak : previous_fold) {
        EXPECT_TRUE(weak.expired()) << "fold " << fold - 1 << "'s parameters are kept alive";
      }
      if (accelerator.distributed()) {
        EXPECT_EQ(RuntimeAccess::gradient_syncs(accelerator).size(), 1u) << "fold " << fold;
      }
      torch::manual_seed(7 + fold); // the shuffles, drawn on process 0
      train_epochs(accelerator, model, forward, optimizer);
      previous_fold.clear();
      std::vector<torch::Tensor> state;
      for (const auto &parameter : model.parameters()) {
        previous_fold.emplace_back(parameter.getIntrusivePtr());
        state.push_back(parameter.detach().clone());
      }
      EXPECT_TRUE(same_everywhere(accelerator, state)) << "fold " << fold;
      folds.push_back(state);
    };
    if (fold == 0) {
      Net model; // TORCH_MODULE holder
      torch::optim::SGD optimizer(model->parameters(),
                                  torch::optim::SGDOptions(0.05).momentum(0.9));
      fold_state(*model, optimizer, [&](torch::Tensor x) { return model->forward(x); });
    } else if (fold == 1) {
      NetImpl model; // held by value
      auto optimizer =
          std::make_unique<torch::optim::Adam>(model.parameters(), torch::optim::AdamOptions(0.01));
      fold_state(model, *optimizer, [&](torch::Tensor x) { return model.forward(x); });
    } else {
      auto model = std::make_shared<NetImpl>(); // std::shared_ptr<Module>
      torch::optim::SGD optimizer(model->parameters(), 0.1);
      accelerator.prepare(model); // the shared_ptr form first; fold_state prepares again
      fold_state(*model, optimizer, [&](torch::Tensor x) { return model->forward(x); });
    }
  }
  for (const auto &weak : previous_fold) {
    EXPECT_TRUE(weak.expired()) << "the last fold's parameters are kept alive";
  }
  return folds;
}

TEST(Prepare, ThreeFoldsTrainAsOneProcessDoesAtTheSameGlobalBatch) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    const auto folds = train_three_folds(peer.rank);
    if (peer.rank == 0) {
      std::vector<torch::Tensor> flat;
      for (const auto &fold : folds) {
        flat.insert(flat.end(), fold.begin(), fold.end());
      }
      torch::save(flat, shared_path("folds.pt"));
    }
  });
  ASSERT_TRUE(all_succeeded(results));
  std::vector<torch::Tensor> distributed;
  torch::load(distributed, shared_path("folds.pt"));
  fs::remove(shared_path("folds.pt"));
  std::vector<torch::Tensor> single;
  for (const auto &fold : train_three_folds(0)) {
    single.insert(single.end(), fold.begin(), fold.end());
  }
  EXPECT_TRUE(all_close(distributed, single));
  // Each fold trained: its parameters left their initial values.
  torch::manual_seed(100);
  EXPECT_FALSE(all_close(state_of(*std::make_unique<Net>()),
                         std::vector<torch::Tensor>(single.begin(), single.begin() + 5)));
}

// prepare again (also of a part of the model) keeps one gradient sync, so the gradients are the
// average once, not averaged twice; and it broadcasts process 0's parameters again.
TEST(Prepare, TheSameModelPreparedTwiceIsSynchronisedOnce) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator;
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    {
      torch::NoGradGuard no_grad;
      model->second->bias.fill_(peer.rank + 1.0); // a re-initialisation each process does its way
    }
    accelerator.prepare(model, optimizer);
    accelerator.prepare(model->first);
    EXPECT_TRUE(torch::equal(model->second->bias, torch::ones({4})))
        << "prepare again did not make the processes start equal";
    EXPECT_EQ(RuntimeAccess::gradient_syncs(accelerator).size(), 1u);

    const auto x = torch::linspace(-1, 1, 16).reshape({2, 8}) * (peer.rank + 1);
    // Each process's own gradient, computed on a copy, and their average.
    std::vector<torch::Tensor> expected;
    {
      NetImpl copy;
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < copy.parameters().size(); ++i) {
        copy.parameters()[i].copy_(model->parameters()[i]);
      }
      copy.offset.copy_(model->offset);
      torch::AutoGradMode grad(true);
      copy.forward(x).pow(2).sum().backward();
      for (const auto &parameter : copy.parameters()) {
        expected.push_back(accelerator.gather(parameter.grad().unsqueeze(0)).mean(0));
      }
    }
    optimizer.zero_grad();
    accelerator.backward(model->forward(x).pow(2).sum());
    const auto parameters = model->parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      EXPECT_TRUE(torch::allclose(parameters[i].grad(), expected[i], 1e-5, 1e-6))
          << "parameter " << i << ": " << parameters[i].grad() << " vs the average " << expected[i];
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// After a finished fold only the live objects are saved: the new model, and of two optimizers
// over one model the one prepared last. A by-value model, a holder, an optimizer and its
// scheduler from the finished fold are gone.
TEST(Prepare, SaveStateAfterAFinishedFoldSavesOnlyTheLiveObjects) {
  auto results = run_in_processes(2, [](const Peer &) {
    const auto dir = shared_path("checkpoint");
    accelerate::Accelerator accelerator;
    {
      Net model;
      NetImpl second;
      torch::optim::SGD optimizer(model->parameters(), 0.1);
      torch::optim::StepLR scheduler(optimizer, 1, 0.5);
      accelerator.prepare(model, second, optimizer, scheduler);
      train_epochs(
          accelerator, *model, [&](torch::Tensor x) { return model->forward(x); }, optimizer, 1);
    }
    Net model;
    // Two optimizers one after the other over one model (say a head, then everything): the
    // later replaces the earlier, though both are alive.
    torch::optim::SGD head(model->second->parameters(), 0.1);
    accelerator.prepare(model, head);
    torch::optim::Adam everything(model->parameters(), torch::optim::AdamOptions(0.01));
    accelerator.prepare(everything);
    train_epochs(
        accelerator, *model, [&](torch::Tensor x) { return model->forward(x); }, everything, 1);
    accelerator.save_state(dir);
    EXPECT_TRUE(fs::exists(dir + "/model_0.pt"));
    EXPECT_FALSE(fs::exists(dir + "/model_1.pt")) << "a model of the finished fold was saved";
    EXPECT_FALSE(fs::exists(dir + "/optimizer_1.pt")) << "the replaced optimizer was saved";
    EXPECT_FALSE(fs::exists(dir + "/scheduler_0.pt")) << "the finished fold's scheduler was saved";
    // model_0.pt is the live model, optimizer_0.pt the Adam.
    Net saved;
    torch::serialize::InputArchive archive;
    archive.load_from(dir + "/model_0.pt");
    saved->load(archive);
    EXPECT_TRUE(all_close(state_of(saved), state_of(model)));
    torch::optim::Adam loaded(saved->parameters(), torch::optim::AdamOptions(0.5));
    torch::load(loaded, dir + "/optimizer_0.pt");
    EXPECT_EQ(loaded.param_groups()[0].options().get_lr(), 0.01);
    // And it loads back into the live objects.
    EXPECT_EQ(accelerator.load_state(dir), dir);
    accelerator.wait_for_everyone();
    if (accelerator.is_main_process()) {
      fs::remove_all(dir);
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// fp16 clipping unscales the gradients it clips, never an optimizer of a finished fold (it was
// destroyed): the second fold trains exactly as it does in an Accelerator that never saw the
// first.
TEST(Prepare, Fp16ClippingAfterAFoldTouchesNoDestroyedOptimizer) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Options options;
    options.mixed_precision = "fp16";
    const auto fold = [&](accelerate::Accelerator &accelerator, uint64_t seed) {
      torch::manual_seed(seed);
      Net model;
      auto optimizer = std::make_unique<torch::optim::SGD>(
          model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
      accelerator.prepare(model, *optimizer);
      const auto x = torch::linspace(-1, 1, 32).reshape({4, 8}) * (peer.rank + 1);
      double norm = 0;
      for (int step = 0; step < 3; ++step) {
        accelerator.zero_grad(*optimizer);
        accelerator.backward(torch::mse_loss(model->forward(x), torch::zeros({4, 4})));
        norm = accelerator.clip_grad_norm_(model->parameters(), 0.05);
        EXPECT_TRUE(accelerator.step(*optimizer));
      }
      EXPECT_LT(norm, 1e3) << "the norm of scaled gradients (scale 65536), not the true ones";
      return state_of(model);
    };
    accelerate::Accelerator both(options);
    fold(both, 1);
    const auto after_a_fold = fold(both, 2);
    accelerate::Accelerator fresh(options);
    const auto alone = fold(fresh, 2);
    ASSERT_EQ(after_a_fold.size(), alone.size());
    for (size_t i = 0; i < alone.size(); ++i) {
      EXPECT_TRUE(torch::equal(after_a_fold[i], alone[i])) << "tensor " << i;
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

} // namespace
