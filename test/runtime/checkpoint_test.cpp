// save_state / load_state: what they refuse, how checkpoints are named, replaced and rotated.
// Exact resume after SIGKILL is checkpoint_resume_test.cpp.
#include "file_checksum.h"
#include "multiprocess.h"
#include "run_command.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace {

using namespace accel_test;
namespace fs = std::filesystem;

// Whether load_state(directory) fails with a message containing `expected`; says what it got
// otherwise. An empty directory loads the newest automatic checkpoint.
::testing::AssertionResult load_refused(accelerate::Accelerator &accelerator,
                                        const std::string &directory, const std::string &expected) {
  try {
    accelerator.load_state(directory);
  } catch (const std::exception &error) {
    if (std::string(error.what()).find(expected) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "the error does not say '" << expected << "': " << error.what();
  }
  return ::testing::AssertionFailure() << "load_state(\"" << directory << "\") succeeded";
}

accelerate::Options in_project(const std::string &dir, int total_limit = 0) {
  accelerate::Options options;
  options.project_dir = dir;
  options.total_limit = total_limit;
  return options;
}

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_file(const std::string &path, const std::string &content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// The manifest a checkpoint had before files carried checksums (version 1), for a checkpoint
// of one process with one model and `optimizers` optimizers.
void write_version_1_manifest(const std::string &checkpoint, int optimizers) {
  write_file(checkpoint + "/checkpoint.json",
             R"({"format": "accelerate-cpp-checkpoint", "version": 1, "world_size": 1,)"
             R"( "models": 1, "optimizers": )" +
                 std::to_string(optimizers) +
                 R"(, "schedulers": 0, "loaders": 0, "mixed_precision": "no", "global_step": 1})");
}

::testing::AssertionResult unchanged(const std::vector<torch::Tensor> &before, Net &model) {
  const auto after = state_of(model);
  for (size_t i = 0; i < before.size(); ++i) {
    if (!torch::equal(before[i], after[i])) {
      return ::testing::AssertionFailure() << "tensor " << i << " changed";
    }
  }
  return ::testing::AssertionSuccess();
}

void train_one_step(accelerate::Accelerator &accelerator, Net &model,
                    torch::optim::Optimizer &optimizer) {
  accelerator.backward(torch::mse_loss(model->forward(torch::ones({2, 8})), torch::zeros({2, 4})));
  accelerator.step(optimizer);
  accelerator.zero_grad(optimizer);
}

// A Net prepared by an accelerator of its own, without an optimizer.
struct PreparedNet {
  accelerate::Accelerator accelerator;
  Net model;
  PreparedNet() { accelerator.prepare(model); }
};

// A Net and an Optimizer over its parameters, made with `options`, prepared together by an
// accelerator of their own. Use it as `auto &[accelerator, model, optimizer] = prepared;`.
template <typename Optimizer> struct PreparedWith {
  accelerate::Accelerator accelerator;
  Net model;
  Optimizer optimizer;
  template <typename Options>
  explicit PreparedWith(const Options &options) : optimizer(model->parameters(), options) {
    accelerator.prepare(model, optimizer);
  }
};

TEST(Checkpoint, LoadRestoresTheModelAndOptimizerInPlace) {
  const auto dir = make_temp_dir("checkpoint-roundtrip");
  PreparedWith<torch::optim::Adam> prepared(0.01);
  auto &[accelerator, model, optimizer] = prepared;
  train_one_step(accelerator, model, optimizer);
  accelerator.save_state(dir + "/state");
  const auto saved = state_of(model);
  const auto weight = model->first->weight;
  train_one_step(accelerator, model, optimizer);
  train_one_step(accelerator, model, optimizer);

  EXPECT_EQ(accelerator.load_state(dir + "/state"), dir + "/state");
  const auto loaded = state_of(model);
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_TRUE(torch::equal(saved[i], loaded[i])) << "tensor " << i;
  }
  EXPECT_TRUE(model->first->weight.is_same(weight)) << "the optimizer must keep its parameters";
  EXPECT_EQ(accelerator.global_step(), 1);
  fs::remove_all(dir);
}

TEST(Checkpoint, SavingAgainToOneDirectoryReplacesItWholeAndLeavesNoStaging) {
  const auto dir = make_temp_dir("checkpoint-replace");
  PreparedWith<torch::optim::SGD> prepared(0.1);
  auto &[accelerator, model, optimizer] = prepared;
  accelerator.save_state(dir + "/state");
  train_one_step(accelerator, model, optimizer);
  accelerator.save_state(dir + "/state");
  const auto second = state_of(model);
  train_one_step(accelerator, model, optimizer);
  accelerator.load_state(dir + "/state");
  EXPECT_TRUE(torch::equal(state_of(model)[0], second[0]));
  std::vector<std::string> entries;
  for (const auto &entry : fs::directory_iterator(dir)) {
    entries.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(entries, std::vector<std::string>{"state"});
  fs::remove_all(dir);
}

TEST(Checkpoint, AutomaticNamesCountUpAndTotalLimitKeepsTheNewest) {
  const auto dir = make_temp_dir("checkpoint-rotate");
  accelerate::Accelerator accelerator(in_project(dir, 2));
  Net model;
  accelerator.prepare(model);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(accelerator.save_state(), dir + "/checkpoints/checkpoint_" + std::to_string(i));
  }
  std::vector<std::string> kept;
  for (const auto &entry : fs::directory_iterator(dir + "/checkpoints")) {
    kept.push_back(entry.path().filename().string());
  }
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<std::string>{"checkpoint_2", "checkpoint_3"}));
  EXPECT_EQ(accelerator.load_state(), dir + "/checkpoints/checkpoint_3");
  fs::remove_all(dir);
}

TEST(Checkpoint, NothingToLoadNamesWhereItLooked) {
  const auto dir = make_temp_dir("checkpoint-none");
  accelerate::Accelerator accelerator(in_project(dir));
  EXPECT_TRUE(load_refused(accelerator, "", dir + "/checkpoints"));
  EXPECT_TRUE(
      load_refused(accelerator, dir + "/missing", "there is no checkpoint at " + dir + "/missing"));
  fs::remove_all(dir);
}

TEST(Checkpoint, IncompleteOrDamagedCheckpointIsRefused) {
  const auto dir = make_temp_dir("checkpoint-incomplete");
  PreparedNet prepared;
  auto &accelerator = prepared.accelerator;
  accelerator.save_state(dir + "/state");
  const auto manifest = dir + "/state/checkpoint.json";
  std::ofstream(manifest, std::ios::trunc) << "{\"format\": ";
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "is damaged"));
  fs::remove(manifest);
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "is not a complete checkpoint"));
  fs::remove_all(dir);
}

TEST(Checkpoint, OtherPreparedObjectsAreRefused) {
  const auto dir = make_temp_dir("checkpoint-objects");
  PreparedWith<torch::optim::SGD>(0.1).accelerator.save_state(dir + "/state");
  PreparedNet prepared;
  auto &accelerator = prepared.accelerator;
  EXPECT_TRUE(
      load_refused(accelerator, dir + "/state", "holds 1 optimizers but this program prepared 0"));
  fs::remove_all(dir);
}

TEST(Checkpoint, AModelOfAnotherShapeIsRefusedNamingTheParameter) {
  const auto dir = make_temp_dir("checkpoint-shape");
  {
    accelerate::Accelerator accelerator;
    torch::nn::Linear model(8, 4);
    accelerator.prepare(model);
    accelerator.save_state(dir + "/state");
  }
  accelerate::Accelerator accelerator;
  torch::nn::Linear model(8, 3);
  accelerator.prepare(model);
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "weight has shape"));
  fs::remove_all(dir);
}

TEST(Checkpoint, ARefusedCheckpointChangesNothing) {
  const auto dir = make_temp_dir("checkpoint-unchanged");
  PreparedNet().accelerator.save_state(dir + "/state");
  // Same first layer, another second one: the first must not be half-loaded.
  struct OtherImpl : torch::nn::Module {
    torch::nn::Linear first = register_module("first", torch::nn::Linear(8, 16));
    torch::nn::Linear second = register_module("second", torch::nn::Linear(16, 2));
  };
  accelerate::Accelerator accelerator;
  auto model = std::make_shared<OtherImpl>();
  accelerator.prepare(model);
  const auto before = model->first->weight.clone();
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "second.weight"));
  EXPECT_TRUE(torch::equal(model->first->weight, before));
  fs::remove_all(dir);
}

// Found by test/fuzz/checkpoint_fuzzer.cpp: the optimizer checks its file only while it loads
// it, which used to happen after the model's tensors were overwritten.
TEST(Checkpoint, AnOptimizerFileOfAnotherKindIsRefusedAndChangesNothing) {
  const auto dir = make_temp_dir("checkpoint-optimizer-file");
  PreparedWith<torch::optim::SGD> prepared(torch::optim::SGDOptions(0.1).momentum(0.9));
  auto &[accelerator, model, optimizer] = prepared;
  train_one_step(accelerator, model, optimizer);
  accelerator.save_state(dir + "/state");
  fs::copy_file(dir + "/state/model_0.pt", dir + "/state/optimizer_0.pt",
                fs::copy_options::overwrite_existing);
  train_one_step(accelerator, model, optimizer);
  const auto before = state_of(model);
  // Its checksum gives it away at once now; a checkpoint without checksums still reaches the
  // optimizer's own check, which must undo what was loaded before it.
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "optimizer_0.pt is damaged"));
  write_version_1_manifest(dir + "/state", 1);
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "optimizer_0.pt does not hold"));
  const auto after = state_of(model);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(torch::equal(before[i], after[i])) << "tensor " << i;
  }
  EXPECT_EQ(accelerator.global_step(), 2);
  fs::remove_all(dir);
}

// Also found by the fuzzer: get<int>() of 1e300 is undefined behaviour.
TEST(Checkpoint, AManifestNumberOutOfRangeIsRefused) {
  const auto dir = make_temp_dir("checkpoint-manifest-number");
  PreparedNet prepared;
  auto &accelerator = prepared.accelerator;
  accelerator.save_state(dir + "/state");
  std::ofstream(dir + "/state/checkpoint.json")
      << R"({"format": "accelerate-cpp-checkpoint", "version": 1, "world_size": 1e300,)"
      << R"( "models": 1, "optimizers": 0, "schedulers": 0})";
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", "'world_size' is not a count"));
  fs::remove_all(dir);
}

TEST(Checkpoint, ALoaderInTheMiddleOfAnEpochMustExistBeforeLoading) {
  const auto dir = make_temp_dir("checkpoint-loader");
  {
    accelerate::Accelerator accelerator;
    auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        RegressionDataset().map(torch::data::transforms::Stack<>()), 8);
    auto batch = loader->begin();
    *batch; // one batch of six delivered
    accelerator.save_state(dir + "/state");
  }
  accelerate::Accelerator accelerator;
  EXPECT_TRUE(
      load_refused(accelerator, dir + "/state",
                   "holds a loader of 48 samples in batches of 8 in the middle of an epoch"));
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionDataset().map(torch::data::transforms::Stack<>()), 8);
  accelerator.load_state(dir + "/state");
  EXPECT_EQ(loader->completed_epochs(), 0);
  size_t rest = 0;
  for (auto &batch : *loader) {
    EXPECT_EQ(batch.data.size(0), 8);
    ++rest;
  }
  EXPECT_EQ(rest, 5u) << "the epoch continues after the batch the checkpoint saw";
  EXPECT_EQ(loader->completed_epochs(), 1);
  fs::remove_all(dir);
}

std::string shared_dir() {
  return (fs::temp_directory_path() / ("accel-checkpoint-world-" + std::to_string(job_id())))
      .string();
}

TEST(Checkpoint, ACheckpointOfAnotherWorldSizeIsRefusedSayingWhy) {
  auto results =
      run_in_processes(2, [](const Peer &) { PreparedNet().accelerator.save_state(shared_dir()); });
  ASSERT_TRUE(all_succeeded(results));
  EXPECT_TRUE(fs::exists(shared_dir() + "/process_0.pt"));
  EXPECT_TRUE(fs::exists(shared_dir() + "/process_1.pt"));
  PreparedNet prepared;
  auto &accelerator = prepared.accelerator;
  EXPECT_TRUE(
      load_refused(accelerator, shared_dir(), "was saved by 2 processes and this job has 1"));
  fs::remove_all(shared_dir());
}

// Issue 29: damaged files are refused by name, before anything changes.
TEST(Checkpoint, ATruncatedOrEmptyModelFileIsRefusedByNameAndChangesNothing) {
  const auto dir = make_temp_dir("checkpoint-truncated");
  PreparedWith<torch::optim::SGD> prepared(0.1);
  auto &[accelerator, model, optimizer] = prepared;
  accelerator.save_state(dir + "/state");
  const auto model_file = dir + "/state/model_0.pt";
  const auto whole = read_file(model_file);
  train_one_step(accelerator, model, optimizer);
  const auto before = state_of(model);

  write_file(model_file, whole.substr(0, whole.size() / 2));
  EXPECT_TRUE(load_refused(accelerator, dir + "/state",
                           model_file + " is damaged: it has " + std::to_string(whole.size() / 2) +
                               " bytes where save_state wrote " + std::to_string(whole.size())));
  write_file(model_file, "");
  EXPECT_TRUE(
      load_refused(accelerator, dir + "/state", model_file + " is damaged: it has 0 bytes"));
  fs::remove(model_file);
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", model_file + " cannot be opened"));
  // Without checksums (a checkpoint of version 1), LibTorch's own error, with the file named.
  write_version_1_manifest(dir + "/state", 1);
  write_file(model_file, "");
  EXPECT_TRUE(load_refused(accelerator, dir + "/state", model_file + " cannot be read"));
  EXPECT_TRUE(unchanged(before, model));
  EXPECT_EQ(accelerator.global_step(), 1);
  fs::remove_all(dir);
}

TEST(Checkpoint, AFlippedBitInTensorDataIsRefusedByNameAndChangesNothing) {
  const auto dir = make_temp_dir("checkpoint-bit-flip");
  PreparedWith<torch::optim::SGD> prepared(0.1);
  auto &[accelerator, model, optimizer] = prepared;
  accelerator.save_state(dir + "/state");
  const auto model_file = dir + "/state/model_0.pt";
  auto bytes = read_file(model_file);
  // The second layer's weights lie in the archive as they are in memory: find them, and flip
  // the lowest mantissa bit of one (a change of about 1e-8, which nothing else would notice).
  const auto weight = model->second->weight.detach().contiguous();
  const std::string pattern(static_cast<const char *>(weight.data_ptr()), 64);
  const auto at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos) << "the weights are not stored as they are";
  bytes[at + 16] = static_cast<char>(bytes[at + 16] ^ 1);
  write_file(model_file, bytes);
  train_one_step(accelerator, model, optimizer);
  const auto before = state_of(model);
  EXPECT_TRUE(load_refused(accelerator, dir + "/state",
                           model_file + " is damaged: its contents changed after save_state"));
  EXPECT_TRUE(unchanged(before, model));
  fs::remove_all(dir);
}

TEST(Checkpoint, ACheckpointWrittenBeforeChecksumsStillLoads) {
  const auto dir = make_temp_dir("checkpoint-version-1");
  PreparedWith<torch::optim::SGD> prepared(0.1);
  auto &[accelerator, model, optimizer] = prepared;
  train_one_step(accelerator, model, optimizer);
  accelerator.save_state(dir + "/state");
  const auto manifest = read_file(dir + "/state/checkpoint.json");
  EXPECT_NE(manifest.find("\"version\": 2"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"model_0.pt\": {"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"process_0.pt\": {"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find("\"crc32c\""), std::string::npos) << manifest;
  const auto saved = state_of(model);
  write_version_1_manifest(dir + "/state", 1);
  train_one_step(accelerator, model, optimizer);
  EXPECT_EQ(accelerator.load_state(dir + "/state"), dir + "/state");
  EXPECT_TRUE(unchanged(saved, model));
  EXPECT_EQ(accelerator.global_step(), 1);
  fs::remove_all(dir);
}

TEST(Checkpoint, Crc32cIsCastagnolisChecksum) {
  // The check value of the CRC-32C catalogue entry, whole and in two pieces.
  const std::string text = "123456789";
  EXPECT_EQ(accelerate::detail::crc32c(0, text.data(), text.size()), 0xE3069283u);
  const auto first = accelerate::detail::crc32c(0, text.data(), 4);
  EXPECT_EQ(accelerate::detail::crc32c(first, text.data() + 4, 5), 0xE3069283u);
  // 32 zero bytes (RFC 3720, B.4), through the 8-byte steps.
  const std::string zeros(32, '\0');
  EXPECT_EQ(accelerate::detail::crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
}

} // namespace
