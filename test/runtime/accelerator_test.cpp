// Data parallelism that changes nothing but speed: 2 processes at batch B end where 1 process
// at batch 2B ends; with no launcher, exactly the plain LibTorch loop.
#include "multiprocess.h"
#include "runtime_access.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace {

using namespace accel_test;
using accelerate::detail::GradientSync;

std::string result_path() {
  return (std::filesystem::temp_directory_path() /
          ("accel-equivalence-" + std::to_string(job_id()) + ".pt"))
      .string();
}

::testing::AssertionResult all_close(const std::vector<torch::Tensor> &a,
                                     const std::vector<torch::Tensor> &b, double rtol,
                                     double atol) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << a.size() << " tensors vs " << b.size();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::allclose(a[i], b[i], rtol, atol)) {
      return ::testing::AssertionFailure() << "tensor " << i << " differs; largest difference "
                                           << (a[i] - b[i]).abs().max().item<double>();
    }
  }
  return ::testing::AssertionSuccess();
}

struct EquivalenceCase {
  OptimizerKind optimizer;
  SamplerKind sampler;
  bool shared_memory; ///< gradients summed through shared memory (the default), else on Gloo
};

class Equivalence : public ::testing::TestWithParam<EquivalenceCase> {};

template <typename Sampler>
std::vector<torch::Tensor> run_equivalence(OptimizerKind optimizer, bool shared_memory) {
  constexpr size_t kBatch = 4;
  // Each process initialises its model from its own seed: prepare must replace that with
  // process 0's state. Process 0's seed is the baseline's, so that both draw the same shuffles.
  auto results = run_in_processes(2, [&](const Peer &peer) {
    setenv("ACCELERATE_SHARED_MEMORY", shared_memory ? "true" : "false", 1);
    auto state = train_with_accelerator<Sampler>(optimizer, kBatch, 1000 + peer.rank);
    if (peer.rank == 0) {
      torch::save(state, result_path());
    }
  });
  EXPECT_TRUE(all_succeeded(results));
  std::vector<torch::Tensor> distributed;
  torch::load(distributed, result_path());
  std::filesystem::remove(result_path());
  return distributed;
}

TEST_P(Equivalence, TwoProcessesAtBatchBMatchOneProcessAtBatch2B) {
  const auto [optimizer, sampler, shared_memory] = GetParam();
  std::vector<torch::Tensor> distributed, single;
  if (sampler == SamplerKind::Sequential) {
    distributed =
        run_equivalence<torch::data::samplers::SequentialSampler>(optimizer, shared_memory);
    single = train_with_accelerator<torch::data::samplers::SequentialSampler>(optimizer, 8, 1000);
  } else {
    distributed = run_equivalence<torch::data::samplers::RandomSampler>(optimizer, shared_memory);
    single = train_with_accelerator<torch::data::samplers::RandomSampler>(optimizer, 8, 1000);
  }
  EXPECT_TRUE(all_close(distributed, single, 1e-5, 1e-6));
  // And training did move the parameters (a test that cannot fail proves nothing).
  torch::manual_seed(1000);
  EXPECT_FALSE(all_close(state_of(*std::make_unique<Net>()), single, 1e-3, 1e-3));
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, Equivalence,
    ::testing::Values(EquivalenceCase{OptimizerKind::SGD, SamplerKind::Sequential, true},
                      EquivalenceCase{OptimizerKind::SGD, SamplerKind::Random, true},
                      EquivalenceCase{OptimizerKind::Adam, SamplerKind::Sequential, true},
                      EquivalenceCase{OptimizerKind::Adam, SamplerKind::Random, true},
                      EquivalenceCase{OptimizerKind::SGD, SamplerKind::Sequential, false},
                      EquivalenceCase{OptimizerKind::SGD, SamplerKind::Random, false},
                      EquivalenceCase{OptimizerKind::Adam, SamplerKind::Sequential, false},
                      EquivalenceCase{OptimizerKind::Adam, SamplerKind::Random, false}),
    [](const auto &info) {
      return std::string(info.param.optimizer == OptimizerKind::SGD ? "SGDMomentum" : "Adam") +
             (info.param.sampler == SamplerKind::Sequential ? "Sequential" : "Random") +
             (info.param.shared_memory ? "SharedMemory" : "Gloo");
    });

TEST(Accelerator, WithoutALauncherItIsExactlyThePlainLoop) {
  for (auto optimizer : {OptimizerKind::SGD, OptimizerKind::Adam}) {
    const auto with = train_with_accelerator<torch::data::samplers::RandomSampler>(optimizer, 6, 3);
    const auto plain = train_plain<torch::data::samplers::RandomSampler>(optimizer, 6, 3);
    ASSERT_EQ(with.size(), plain.size());
    for (size_t i = 0; i < with.size(); ++i) {
      EXPECT_TRUE(torch::equal(with[i], plain[i])) << "tensor " << i << " is not bit-identical";
    }
  }
}

TEST(Accelerator, PrepareTakesEveryFormAModelIsHeldIn) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator;
    torch::manual_seed(peer.rank);             // different on each process until prepare
    Net holder;                                // ModuleHolder (TORCH_MODULE)
    NetImpl by_value;                          // a plain Module
    auto shared = std::make_shared<NetImpl>(); // std::shared_ptr<Module>
    auto unique = std::make_unique<NetImpl>(); // std::unique_ptr<Module>
    torch::optim::SGD optimizer(holder->parameters(), 0.1);
    torch::optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);
    auto unique_optimizer = std::make_unique<torch::optim::SGD>(unique->parameters(), 0.1);
    accelerator.prepare(holder, optimizer, scheduler);
    accelerator.prepare(by_value, shared);
    accelerator.prepare(unique, unique_optimizer);
    for (const auto &parameters : {holder->parameters(), by_value.parameters(),
                                   shared->parameters(), unique->parameters()}) {
      for (const auto &p : parameters) {
        auto both = accelerator.gather(p.detach().unsqueeze(0));
        EXPECT_TRUE(torch::equal(both[0], both[1])) << "prepare did not broadcast rank 0's state";
      }
    }
    // Gradients of each form are synchronised.
    auto x = torch::ones({2, 8}) * (peer.rank + 1);
    accelerator.backward(by_value.forward(x).sum() + shared->forward(x).sum() +
                         unique->forward(x).sum());
    for (const auto &parameters : {by_value.parameters(), unique->parameters()}) {
      for (const auto &p : parameters) {
        auto both = accelerator.gather(p.grad().unsqueeze(0));
        EXPECT_TRUE(torch::equal(both[0], both[1]));
      }
    }
    unique_optimizer->step();
    optimizer.step();
    scheduler.step();
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accelerator, SingleProcessFacts) {
  accelerate::Accelerator accelerator;
  EXPECT_EQ(accelerator.num_processes(), 1);
  EXPECT_EQ(accelerator.process_index(), 0);
  EXPECT_TRUE(accelerator.is_main_process());
  EXPECT_TRUE(accelerator.is_local_main_process());
  EXPECT_EQ(accelerator.device(), torch::Device(torch::kCPU));
  // One process: prepare installs no gradient synchronisation.
  torch::nn::Linear model(4, 2);
  accelerator.prepare(model);
  EXPECT_TRUE(accelerate::detail::RuntimeAccess::gradient_syncs(accelerator).empty());
}

// Four 256x256 layers (256 KiB of gradient each) with 300 KB buckets: one layer per bucket.
struct DeepNetImpl : torch::nn::Module {
  DeepNetImpl() {
    for (int i = 0; i < 4; ++i) {
      layers.push_back(register_module("layer" + std::to_string(i), torch::nn::Linear(256, 256)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto &layer : layers) {
      x = torch::relu(layer->forward(x));
    }
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(DeepNet);

// Accelerators made one after another (a helper that makes one per call) share the process
// group the first joined, as Python Accelerate's state is shared; settings that would need
// another group are refused, not ignored.
TEST(Accelerator, LaterAcceleratorsShareTheJobAndRefuseOtherGroupSettings) {
  auto results = run_in_processes(2, [](const Peer &) {
    for (int round = 0; round < 3; ++round) {
      accelerate::Accelerator accelerator;
      EXPECT_EQ(accelerator.reduce(torch::ones({1})).item<float>(), 2.0f) << "round " << round;
    }
    accelerate::Options other;
    other.timeout = std::chrono::seconds(7);
    try {
      accelerate::Accelerator accelerator(other);
      ADD_FAILURE() << "a different timeout was accepted";
    } catch (const std::invalid_argument &error) {
      EXPECT_NE(std::string(error.what()).find("this one asks for timeout 7"), std::string::npos)
          << error.what();
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accelerator, TheFirstBucketIsAllReducedWhileBackwardStillRuns) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Options options;
    options.bucket_cap_mb = 0.3;
    options.first_bucket_cap_mb = 0.3;
    accelerate::Accelerator accelerator(options);
    DeepNet model;
    accelerator.prepare(model);
    auto &sync = *accelerate::detail::RuntimeAccess::gradient_syncs(accelerator).at(0);
    ASSERT_EQ(sync.bucket_count(), 4u);

    auto loss = model->forward(torch::randn({32, 256})).pow(2).mean();
    accelerator.backward(loss);

    const auto events = sync.last_events();
    size_t first_launch = events.size(), last_ready = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i].kind == GradientSync::Event::BucketLaunched && first_launch == events.size()) {
        first_launch = i;
      }
      if (events[i].kind == GradientSync::Event::GradientReady) {
        last_ready = i;
      }
    }
    EXPECT_LT(first_launch, last_ready)
        << "bucket 0's all-reduce must start before the last gradient is ready";
    EXPECT_EQ(events.back().kind, GradientSync::Event::Finalized);
    // The gradients are averages: every process holds the same values.
    for (const auto &p : model->parameters()) {
      auto average = accelerator.reduce(p.grad(), "mean");
      EXPECT_TRUE(torch::allclose(p.grad(), average, 1e-6, 1e-7)) << "rank " << peer.rank;
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accelerator, ParametersWithoutAGradientOnSomeProcessesStillSync) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator;
    Net model;
    accelerator.prepare(model);
    // Rank 0 uses the whole model; rank 1 only the second layer, so its first layer gets no
    // gradient in this step and contributes zeros to the average.
    torch::Tensor loss = peer.rank == 0 ? model->forward(torch::ones({2, 8})).sum()
                                        : model->second->forward(torch::ones({2, 16})).sum();
    accelerator.backward(loss);
    for (const auto &p : model->parameters()) {
      ASSERT_TRUE(p.grad().defined()) << "a parameter used by some process has no gradient";
      auto both = accelerator.gather(p.grad().unsqueeze(0));
      EXPECT_TRUE(torch::equal(both[0], both[1])) << "gradients differ between processes";
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// The averages stay in the buckets and .grad shares them (no copy back). Whatever the
// optimizer's zero_grad does to such a gradient (reset it, or detach_ and zero_ it in place),
// the next step's gradients are still the averages of that step's local gradients.
TEST(Accelerator, GradientsSharedWithTheBucketsSurviveZeroGradBothWays) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator;
    Net model;
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    Net reference; // the same state, never prepared: its gradients stay local
    {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < model->parameters().size(); ++i) {
        reference->parameters()[i].copy_(model->parameters()[i]);
      }
      reference->offset.copy_(model->offset);
    }
    for (bool set_to_none : {true, false, false, true}) {
      optimizer.zero_grad(set_to_none);
      reference->zero_grad();
      auto x = torch::randn({4, 8}) * (peer.rank + 1);
      accelerator.backward(model->forward(x).pow(2).sum());
      reference->forward(x).pow(2).sum().backward();
      for (size_t i = 0; i < model->parameters().size(); ++i) {
        const auto &grad = model->parameters()[i].grad();
        const auto expected = accelerator.reduce(reference->parameters()[i].grad(), "mean");
        EXPECT_TRUE(torch::allclose(grad, expected, 1e-5, 1e-6))
            << "parameter " << i << " after zero_grad(" << set_to_none << ")";
      }
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// A prepared model the backward never reaches must end without gradients, as in one process.
TEST(Accelerator, AModelTheBackwardDoesNotReachKeepsNoGradient) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Accelerator accelerator;
    Net used, unused;
    accelerator.prepare(used, unused);
    accelerator.backward(used->forward(torch::ones({2, 8})).sum());
    for (const auto &p : unused->parameters()) {
      EXPECT_FALSE(p.grad().defined());
    }
    for (const auto &p : used->parameters()) {
      EXPECT_TRUE(p.grad().defined());
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accelerator, ParametersNoProcessUsedKeepNoGradient) {
  auto results = run_in_processes(2, [](const Peer &) {
    accelerate::Accelerator accelerator;
    Net model;
    accelerator.prepare(model);
    accelerator.backward(model->second->forward(torch::ones({2, 16})).sum());
    EXPECT_FALSE(model->first->weight.grad().defined());
    EXPECT_FALSE(model->first->bias.grad().defined());
    EXPECT_TRUE(model->second->weight.grad().defined());
  });
  EXPECT_TRUE(all_succeeded(results));
}

// A first gradient is written into the bucket before autograd accumulates it, already divided
// by the world size where the bucket is private (Gloo). A parameter whose strides are not the
// bucket's makes autograd copy that gradient instead of adopting it; it must not be divided twice.
void expect_averages_with_a_transposed_parameter(bool shared_memory) {
  auto results = run_in_processes(2, [&](const Peer &peer) {
    setenv("ACCELERATE_SHARED_MEMORY", shared_memory ? "true" : "false", 1);
    accelerate::Accelerator accelerator;
    torch::nn::Linear model(5, 3);
    auto transposed = model->register_parameter("transposed", torch::randn({3, 5}).t());
    ASSERT_FALSE(transposed.is_contiguous());
    accelerator.prepare(model);
    const auto x = torch::randn({4, 5}) * (peer.rank + 1);
    for (int step = 0; step < 2; ++step) {
      model->zero_grad();
      accelerator.backward((model->forward(x) + x.matmul(transposed)).pow(2).sum());
      auto w = model->weight.detach().requires_grad_();
      auto b = model->bias.detach().requires_grad_();
      auto t = transposed.detach().requires_grad_();
      (torch::nn::functional::linear(x, w, b) + x.matmul(t)).pow(2).sum().backward();
      for (const auto &[prepared, local] :
           {std::pair{model->weight, w}, {model->bias, b}, {transposed, t}}) {
        const auto expected = accelerator.reduce(local.grad(), "mean");
        EXPECT_TRUE(torch::allclose(prepared.grad(), expected, 1e-5, 1e-6))
            << "step " << step << ", rank " << peer.rank << ": " << prepared.grad() << " vs "
            << expected;
      }
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(Accelerator, ATransposedParameterGetsTheAverageThroughSharedMemory) {
  expect_averages_with_a_transposed_parameter(true);
}

TEST(Accelerator, ATransposedParameterGetsTheAverageThroughGloo) {
  expect_averages_with_a_transposed_parameter(false);
}

// Module buffers like DDP's broadcast_buffers: with it (the default) every process continues
// from process 0's BatchNorm statistics after each synchronising step, so however different
// each process's data, they end equal everywhere: the statistics of process 0's batches alone.
// Without it each process keeps its own. A graph kept for a second backward survives it.
TEST(Accelerator, BuffersBecomeProcessZerosAfterEverySynchronisingStep) {
  auto results = run_in_processes(2, [](const Peer &peer) {
    for (const bool broadcast : {true, false}) {
      SCOPED_TRACE(broadcast ? "broadcast_buffers" : "no broadcast_buffers");
      accelerate::Options options;
      options.broadcast_buffers = broadcast;
      accelerate::Accelerator accelerator(options);
      EXPECT_EQ(accelerator.options().broadcast_buffers, broadcast);
      torch::manual_seed(3);
      torch::nn::Sequential model(torch::nn::BatchNorm1d(8), torch::nn::Linear(8, 4));
      torch::nn::BatchNorm1d reference(8); // fed process 0's batches only
      torch::optim::SGD optimizer(model->parameters(), 0.1);
      accelerator.prepare(model, optimizer);
      auto generator = at::detail::createCPUGenerator(50 + peer.rank);
      for (int step = 0; step < 5; ++step) {
        const auto x = torch::randn({6, 8}, generator) * (peer.rank + 1) + peer.rank;
        optimizer.zero_grad();
        accelerator.backward(torch::mse_loss(model->forward(x), torch::zeros({6, 4})));
        optimizer.step();
        reference->forward(accelerator.gather(x).narrow(0, 0, 6));
      }
      const auto &norm = *model[0]->as<torch::nn::BatchNorm1d>();
      const auto means = accelerator.gather(norm.running_mean.unsqueeze(0));
      const auto variances = accelerator.gather(norm.running_var.unsqueeze(0));
      if (broadcast) {
        EXPECT_TRUE(torch::equal(means[0], means[1]));
        EXPECT_TRUE(torch::equal(variances[0], variances[1]));
        EXPECT_TRUE(torch::allclose(norm.running_mean, reference->running_mean, 1e-6, 1e-7));
        EXPECT_TRUE(torch::allclose(norm.running_var, reference->running_var, 1e-6, 1e-7));
        EXPECT_EQ(norm.num_batches_tracked.item<int64_t>(), 5);
      } else {
        EXPECT_FALSE(torch::allclose(means[0], means[1])) << "each process keeps its own";
      }
      // Written below autograd: a kept graph's second backward is not refused.
      const auto loss = model->forward(torch::ones({6, 8}) * peer.rank).pow(2).sum();
      accelerator.backward(loss, {}, /*retain_graph=*/true);
      EXPECT_NO_THROW(accelerator.backward(loss));
    }
  });
  EXPECT_TRUE(all_succeeded(results));
}

// ACCELERATE_TIMEOUT has --rdzv_timeout's range, 1 ms to 7 days: -3 was accepted, 1e308
// overflowed and 1e-9 became no time at all.
TEST(Accelerator, TheTimeoutFromTheEnvironmentIsBounded) {
  setenv("ACCELERATE_TIMEOUT", "2.5", 1);
  EXPECT_EQ(accelerate::Accelerator().options().timeout, std::chrono::milliseconds(2500));
  setenv("ACCELERATE_TIMEOUT", "604800", 1);
  EXPECT_EQ(accelerate::Accelerator().options().timeout, std::chrono::hours(24 * 7));
  setenv("ACCELERATE_TIMEOUT", "0.001", 1);
  EXPECT_EQ(accelerate::Accelerator().options().timeout, std::chrono::milliseconds(1));
  for (const char *bad : {"-3", "0", "1e-9", "1e308", "604801", "nan", "inf", "5s"}) {
    setenv("ACCELERATE_TIMEOUT", bad, 1);
    try {
      accelerate::Accelerator accelerator;
      ADD_FAILURE() << "ACCELERATE_TIMEOUT='" << bad << "' was accepted";
    } catch (const std::invalid_argument &error) {
      EXPECT_EQ(std::string(error.what()),
                std::string("accelerate: ACCELERATE_TIMEOUT='") + bad +
                    "' is not a number of seconds from 0.001 to 604800 (7 days)");
    }
  }
  unsetenv("ACCELERATE_TIMEOUT");
  EXPECT_EQ(accelerate::Accelerator().options().timeout, std::chrono::minutes(30));
}

// The yes/no switches read as Accelerate's str_to_bool does, and anything else is refused
// naming the variable (ACCELERATE_SHARED_MEMORY=perhaps and ACCELERATE_USE_CPU=maybe were read
// as no).
TEST(Accelerator, YesNoSwitchesFromTheEnvironmentRefuseOtherWords) {
  setenv("ACCELERATE_USE_CPU", "On", 1);
  setenv("ACCELERATE_SHARED_MEMORY", "0", 1);
  setenv("ACCELERATE_MALLOC_TUNING", "no", 1);
  EXPECT_EQ(accelerate::Accelerator().options().split_batches, false) << "off by default";
  setenv("ACCELERATE_SPLIT_BATCHES", "YES", 1);
  {
    accelerate::Accelerator accelerator;
    EXPECT_EQ(accelerator.options().cpu, true);
    EXPECT_EQ(accelerator.options().shared_memory, false);
    EXPECT_EQ(accelerator.options().tune_malloc, false);
    EXPECT_EQ(accelerator.options().split_batches, true);
  }
  accelerate::Options in_code;
  in_code.split_batches = false;
  EXPECT_EQ(accelerate::Accelerator(in_code).options().split_batches, false) << "code wins";
  for (const char *name : {"ACCELERATE_USE_CPU", "ACCELERATE_SHARED_MEMORY",
                           "ACCELERATE_MALLOC_TUNING", "ACCELERATE_SPLIT_BATCHES"}) {
    setenv(name, "perhaps", 1);
    try {
      accelerate::Accelerator accelerator;
      ADD_FAILURE() << name << "=perhaps was accepted";
    } catch (const std::invalid_argument &error) {
      EXPECT_EQ(std::string(error.what()),
                std::string("accelerate: ") + name +
                    "='perhaps' is neither yes nor no (true, 1, yes, on or false, 0, no, off)");
    }
    setenv(name, "false", 1);
  }
  unsetenv("ACCELERATE_USE_CPU");
  unsetenv("ACCELERATE_SHARED_MEMORY");
  unsetenv("ACCELERATE_MALLOC_TUNING");
  unsetenv("ACCELERATE_SPLIT_BATCHES");
}

} // namespace
