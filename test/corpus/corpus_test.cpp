// The end-to-end corpus: each program in test/corpus is a plain single-process LibTorch
// training program. The build compiles it as written and, rewritten by accel-rewrite, against
// the runtime. Here the original trains on 1 process at batch 2B and the rewrite under
// `accel launch --num_processes 2` at batch B; both see the same global batches, so the final
// parameters and the printed metrics must agree (tolerances below: float sums in another order).
#include "run_command.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace {

namespace fs = std::filesystem;
using accel_test::run_command;

constexpr double kRelative = 1e-4, kAbsolute = 1e-5;
constexpr int64_t kBatchPerProcess = 8;

struct Program {
  std::string name;
};

std::string describe(const accel_test::CommandResult &result) {
  return "exit " + std::to_string(result.exit_code) + "\nstdout:\n" + result.out + "\nstderr:\n" +
         result.err;
}

// "metric NAME VALUE" lines; from a launcher's output, only the main process's.
std::map<std::string, double> metrics(const std::string &output) {
  std::map<std::string, double> found;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("[rank", 0) == 0) {
      if (line.rfind("[rank0] ", 0) != 0) {
        continue;
      }
      line = line.substr(8);
    }
    std::istringstream words(line);
    std::string tag, name;
    double value = 0;
    if (words >> tag >> name >> value && tag == "metric") {
      found[name] = value;
    }
  }
  return found;
}

// Every tensor of two module archives (torch::save of a model), compared by name.
void expect_same_archives(torch::serialize::InputArchive &expected,
                          torch::serialize::InputArchive &actual, const std::string &where) {
  for (const auto &key : expected.keys()) {
    torch::Tensor expected_tensor, actual_tensor;
    if (expected.try_read(key, expected_tensor) || expected.try_read(key, expected_tensor, true)) {
      ASSERT_TRUE(actual.try_read(key, actual_tensor) || actual.try_read(key, actual_tensor, true))
          << where << key << " is missing from the distributed run's model";
      EXPECT_TRUE(torch::allclose(expected_tensor, actual_tensor, kRelative, kAbsolute))
          << where << key << " differs by " << (expected_tensor - actual_tensor).abs().max();
      continue;
    }
    torch::serialize::InputArchive expected_child, actual_child;
    ASSERT_TRUE(expected.try_read(key, expected_child)) << where << key;
    ASSERT_TRUE(actual.try_read(key, actual_child)) << where << key << " is missing";
    expect_same_archives(expected_child, actual_child, where + key + ".");
  }
}

class Corpus : public ::testing::TestWithParam<Program> {};

TEST_P(Corpus, TwoProcessesAtBatchBMatchOneProcessAt2B) {
  const std::string name = GetParam().name;
  const auto dir = accel_test::make_temp_dir("corpus-" + name);
  fs::create_directories(dir + "/single");
  fs::create_directories(dir + "/distributed");
  const std::string original = std::string(CORPUS_BIN_DIR) + "/corpus_" + name;
  const std::string rewritten = original + "_dist";

  const auto single = run_command({original, std::to_string(2 * kBatchPerProcess), dir + "/single"},
                                  {{"OMP_NUM_THREADS", "1"}});
  ASSERT_EQ(single.exit_code, 0) << describe(single);
  const auto distributed = run_command({ACCEL_BIN, "launch", "--num_processes", "2", rewritten,
                                        std::to_string(kBatchPerProcess), dir + "/distributed"},
                                       {{"HF_HOME", "/nonexistent-accel-test"}});
  ASSERT_EQ(distributed.exit_code, 0) << describe(distributed);

  const auto expected_metrics = metrics(single.out);
  const auto actual_metrics = metrics(distributed.out);
  ASSERT_FALSE(expected_metrics.empty()) << single.out;
  ASSERT_EQ(expected_metrics.size(), actual_metrics.size()) << distributed.out;
  for (const auto &[metric, value] : expected_metrics) {
    ASSERT_EQ(actual_metrics.count(metric), 1u) << metric << " missing:\n" << distributed.out;
    EXPECT_NEAR(actual_metrics.at(metric), value, 1e-3 * std::max(1.0, std::abs(value)))
        << "metric " << metric;
  }

  torch::serialize::InputArchive expected, actual;
  expected.load_from(dir + "/single/model.pt");
  actual.load_from(dir + "/distributed/model.pt");
  expect_same_archives(expected, actual, "");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Programs, Corpus,
                         ::testing::Values(Program{"regression_sgd"}, Program{"classifier_adam"},
                                           Program{"gan_adamw"}, Program{"gru_sequences"},
                                           Program{"mnist_templated"}, Program{"lambda_epoch"},
                                           Program{"conv_sequential"}, Program{"lstm_classifier"},
                                           Program{"autoencoder"}, Program{"early_stopping"},
                                           Program{"logistic_bce"}, Program{"csv_param_groups"}),
                         [](const auto &info) { return info.param.name; });

// The product's own example, examples/mnist/train.cpp, on MNIST-format files (Debian's
// Fashion-MNIST, which scripts/setup installs), rewritten by the build like the corpus: one
// epoch, 1 process at batch 100 against 2 at 50.
TEST(CorpusMnistExample, TwoProcessesAtBatch50MatchOneProcessAt100) {
  const std::string source = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(source + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << source << " is missing (apt-get install dataset-fashion-mnist)";
  }
  const auto dir = accel_test::make_temp_dir("corpus-mnist");
  for (const std::string file : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                 "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    const auto unpacked = run_command({"/bin/sh", "-c", "gunzip -c \"$0\" > \"$1\"",
                                       source + "/" + file + ".gz", dir + "/" + file});
    ASSERT_EQ(unpacked.exit_code, 0) << describe(unpacked);
  }
  const std::string bin = CORPUS_BIN_DIR;
  const auto single = run_command({bin + "/mnist_train", dir, "100", "1"});
  ASSERT_EQ(single.exit_code, 0) << describe(single);
  const auto distributed = run_command(
      {ACCEL_BIN, "launch", "--num_processes", "2", bin + "/mnist_train_dist", dir, "50", "1"},
      {{"HF_HOME", "/nonexistent-accel-test"}});
  ASSERT_EQ(distributed.exit_code, 0) << describe(distributed);
  const auto accuracy = [](const std::string &output) {
    const auto at = output.find("epoch 1 test accuracy ");
    return at == std::string::npos ? -1.0 : std::stod(output.substr(at + 22));
  };
  ASSERT_GT(accuracy(single.out), 0.5) << single.out;
  EXPECT_NEAR(accuracy(distributed.out), accuracy(single.out), 1e-3) << distributed.out;
  fs::remove_all(dir);
}

} // namespace
