// The runtime on GPUs: device choice, prepare, and NCCL collectives across real processes.
// Every test skips, saying why, on a machine without a GPU (or with too few), and when the
// runtime was built without NCCL (the CPU build); scripts/setup-cuda builds one with it.
#include "multiprocess.h"
#include "process_group.h"

#include <accelerate/accelerate.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>

namespace {

using namespace accel_test;

// Why CUDA tests cannot run here, or "" when they can. Checked in the test process, before
// any worker starts.
std::string cuda_unavailable(int gpus_needed) {
  if (!torch::cuda::is_available()) {
    return "no CUDA device: torch::cuda::is_available() is false (CPU LibTorch, no GPU or no "
           "driver)";
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (count < gpus_needed) {
    return "needs " + std::to_string(gpus_needed) + " CUDA devices, found " +
           std::to_string(count) + " (NCCL cannot put two ranks on one GPU)";
  }
  return "";
}

std::string nccl_unavailable() {
  try {
    accelerate::detail::choose_backend("nccl", c10::DeviceType::CUDA);
    return "";
  } catch (const std::exception &error) {
    return std::string("runtime built without NCCL: ") + error.what();
  }
}

#define ACCEL_SKIP_WITHOUT_CUDA(gpus)                                                              \
  do {                                                                                             \
    if (const auto reason = cuda_unavailable(gpus); !reason.empty()) {                             \
      GTEST_SKIP() << reason;                                                                      \
    }                                                                                              \
  } while (false)

TEST(Cuda, OneProcessUsesTheFirstGpu) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  accelerate::Accelerator accelerator;
  EXPECT_EQ(accelerator.device(), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(accelerator.num_processes(), 1);
}

// fp16 on its home device: the forward pass in half, parameters fp32, loss scaling on the GPU,
// an injected overflow skipped; and a checkpoint that restores the CUDA generator.
TEST(Cuda, Fp16TrainsWithLossScalingAndCheckpointsTheGpuGenerator) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  accelerate::Options options;
  options.mixed_precision = "fp16";
  accelerate::Accelerator accelerator(options);
  torch::nn::Linear model(16, 4);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  const auto x = torch::randn({8, 16}, accelerator.device());
  const auto y = torch::randn({8, 4}, accelerator.device());
  {
    auto autocast = accelerator.autocast();
    auto out = model->forward(x);
    EXPECT_EQ(out.scalar_type(), torch::kHalf);
    accelerator.backward(torch::mse_loss(out.to(torch::kFloat32), y));
  }
  EXPECT_EQ(model->weight.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(accelerator.step(optimizer));
  accelerator.zero_grad(optimizer);
  model->weight.register_hook(
      [](torch::Tensor grad) { return grad * std::numeric_limits<float>::infinity(); });
  accelerator.backward(torch::mse_loss(model->forward(x), y));
  EXPECT_FALSE(accelerator.step(optimizer));
  EXPECT_EQ(accelerator.loss_scale(), 32768.0);

  const auto dir = std::filesystem::temp_directory_path() /
                   ("accel-cuda-checkpoint-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir); // a run that crashed may have left one (pids repeat)
  accelerator.save_state(dir.string());
  const auto expected = torch::rand({4}, accelerator.device());
  torch::rand({100}, accelerator.device()); // move the generator on
  accelerator.load_state(dir.string());
  EXPECT_TRUE(torch::equal(torch::rand({4}, accelerator.device()), expected));
  std::filesystem::remove_all(dir);
}

// bf16 on the GPU: the forward pass in bfloat16 under autocast, parameters and gradients fp32,
// no loss scaling (bf16 has fp32's range), and training moves the parameters.
TEST(Cuda, Bf16AutocastTrainsWithoutLossScaling) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  accelerate::Options options;
  options.mixed_precision = "bf16";
  accelerate::Accelerator accelerator(options);
  torch::manual_seed(0);
  torch::nn::Linear model(16, 4);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  const auto before = model->weight.detach().clone();
  const auto x = torch::randn({8, 16}, accelerator.device());
  const auto y = torch::randn({8, 4}, accelerator.device());
  {
    auto autocast = accelerator.autocast();
    auto out = model->forward(x);
    EXPECT_EQ(out.device(), accelerator.device());
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
    accelerator.backward(torch::mse_loss(out.to(torch::kFloat32), y));
  }
  EXPECT_EQ(model->weight.scalar_type(), torch::kFloat32);
  EXPECT_EQ(model->weight.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(accelerator.step(optimizer));
  EXPECT_FALSE(torch::equal(before, model->weight.detach()));
  // Outside the guard the forward pass is fp32 again.
  EXPECT_EQ(model->forward(x).scalar_type(), torch::kFloat32);
}

TEST(Cuda, CpuOptionKeepsTheCpu) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  accelerate::Options options;
  options.cpu = true;
  accelerate::Accelerator accelerator(options);
  EXPECT_EQ(accelerator.device(), torch::Device(torch::kCPU));
}

TEST(Cuda, PrepareMovesTheModelAndTrainingRunsOnTheGpu) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  accelerate::Accelerator accelerator;
  torch::manual_seed(0);
  torch::nn::Linear model(4, 2);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  for (const auto &parameter : model->parameters()) {
    EXPECT_EQ(parameter.device(), accelerator.device());
  }
  const auto before = model->weight.detach().clone();
  auto input = torch::ones({3, 4}, torch::TensorOptions().device(accelerator.device()));
  optimizer.zero_grad();
  auto loss = model->forward(input).sum();
  accelerator.backward(loss);
  optimizer.step();
  EXPECT_FALSE(torch::equal(before, model->weight.detach()));
}

// libtorch's Adagrad makes its state (`sum`) in its constructor, on the CPU where the model
// still is; prepare moves it with the model, and the step on the GPU then trains as on the CPU.
TEST(Cuda, PrepareMovesTheStateOfAnOptimizerMadeBeforeIt) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  const auto train = [](bool on_gpu) {
    accelerate::Options options;
    options.cpu = !on_gpu;
    accelerate::Accelerator accelerator(options);
    torch::manual_seed(0);
    torch::nn::Linear model(4, 2);
    torch::optim::Adagrad optimizer(
        model->parameters(), torch::optim::AdagradOptions(0.1).initial_accumulator_value(0.5));
    accelerator.prepare(model, optimizer);
    const auto input = torch::arange(12, torch::kFloat32).reshape({3, 4}).to(accelerator.device());
    for (int step = 0; step < 3; ++step) {
      accelerator.zero_grad(optimizer);
      accelerator.backward(model->forward(input).pow(2).mean());
      EXPECT_TRUE(accelerator.step(optimizer));
    }
    for (const auto &[key, state] : optimizer.state()) {
      EXPECT_EQ(static_cast<torch::optim::AdagradParamState &>(*state).sum().device(),
                accelerator.device());
    }
    return model->weight.detach().cpu();
  };
  const auto on_gpu = train(true);
  EXPECT_TRUE(torch::allclose(on_gpu, train(false), 1e-5, 1e-6));
}

TEST(Cuda, TwoProcessesUseTheirLocalGpuAndAllReduceOverNccl) {
  ACCEL_SKIP_WITHOUT_CUDA(2);
  if (const auto reason = nccl_unavailable(); !reason.empty()) {
    GTEST_SKIP() << reason;
  }
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Accelerator accelerator;
    // run_in_processes gives rank r LOCAL_RANK r.
    ASSERT_EQ(accelerator.device(), torch::Device(torch::kCUDA, peer.rank));
    // ... and makes it the current device (through the generic guard: no CUDA headers here).
    EXPECT_EQ(c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice(), accelerator.device());

    auto value = torch::full({16}, static_cast<float>(peer.rank + 1),
                             torch::TensorOptions().device(accelerator.device()));
    auto sum = accelerator.reduce(value, "sum");
    EXPECT_EQ(sum.device(), accelerator.device());
    EXPECT_TRUE(torch::all(sum.cpu() == 3.0f).item<bool>()) << sum.cpu();

    // prepare broadcasts process 0's weights; backward averages the gradients.
    torch::manual_seed(100 + peer.rank);
    torch::nn::Linear model(4, 1);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    auto input = torch::full({2, 4}, static_cast<float>(peer.rank + 1),
                             torch::TensorOptions().device(accelerator.device()));
    optimizer.zero_grad();
    accelerator.backward(model->forward(input).sum());
    // d(sum(w.x + b))/dw = sum of the rows: 2 * (rank + 1) per element; average over ranks 3.
    EXPECT_TRUE(torch::allclose(model->weight.grad().cpu(), torch::full({1, 4}, 3.0f)))
        << model->weight.grad().cpu();

    // What the runtime broadcasts from the host goes through the GPU for NCCL: a shuffled
    // loader's order (each process gets other samples), and a counted loop's end of pass,
    // which makes every process's CPU generator process 0's.
    auto loader = accelerator.prepare_data_loader(
        torch::data::datasets::TensorDataset(torch::arange(8).unsqueeze(1)), 2);
    int64_t seen = 0;
    for (auto &batch : *loader) {
      for (auto &example : batch) {
        seen += example.data.sum().item<int64_t>();
      }
    }
    EXPECT_EQ(accelerator.reduce(seen, "sum"), 28); // 0 + 1 + ... + 7, each sample once
    torch::manual_seed(peer.rank);
    for (int64_t i : accelerator.batch_range(0, 4)) {
      (void)i;
    }
    const auto draw = torch::randn({4}).to(accelerator.device());
    EXPECT_TRUE(torch::equal(accelerator.broadcast(draw), draw));
    accelerator.wait_for_everyone();
  });
  EXPECT_TRUE(all_succeeded(results));
}

// Gloo with CUDA tensors: two processes that may share one GPU (NCCL refuses two ranks on one
// device; Gloo copies through the host). Collectives and gradient averaging as over NCCL.
TEST(Cuda, TwoProcessesOverGlooSumCudaTensors) {
  ACCEL_SKIP_WITHOUT_CUDA(1);
  auto results = run_in_processes(2, [](const Peer &peer) {
    accelerate::Options options;
    options.backend = "gloo";
    accelerate::Accelerator accelerator(options);
    ASSERT_TRUE(accelerator.device().is_cuda());
    const auto on_gpu = torch::TensorOptions().device(accelerator.device());

    auto sum =
        accelerator.reduce(torch::full({16}, static_cast<float>(peer.rank + 1), on_gpu), "sum");
    EXPECT_EQ(sum.device(), accelerator.device());
    EXPECT_TRUE(torch::all(sum.cpu() == 3.0f).item<bool>()) << sum.cpu();
    auto gathered = accelerator.gather(torch::full({2}, static_cast<float>(peer.rank), on_gpu));
    EXPECT_TRUE(torch::equal(gathered.cpu(), torch::tensor({0.0f, 0.0f, 1.0f, 1.0f})))
        << gathered.cpu();

    torch::manual_seed(100 + peer.rank);
    torch::nn::Linear model(4, 1);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    auto input = torch::full({2, 4}, static_cast<float>(peer.rank + 1), on_gpu);
    optimizer.zero_grad();
    accelerator.backward(model->forward(input).sum());
    EXPECT_EQ(model->weight.grad().device(), accelerator.device());
    // As in the NCCL test: per-rank gradient 2 * (rank + 1), averaged over ranks 3.
    EXPECT_TRUE(torch::allclose(model->weight.grad().cpu(), torch::full({1, 4}, 3.0f)))
        << model->weight.grad().cpu();
    accelerator.wait_for_everyone();
  });
  EXPECT_TRUE(all_succeeded(results));
}

} // namespace
