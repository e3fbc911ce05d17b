// One config file serves both tools: the files `accel config` writes load in Python Accelerate
// (the real package, in .venv-accelerate), and the files Accelerate writes load in accel.
#include "run_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

namespace {

using accel_test::run_command;
namespace fs = std::filesystem;

const std::string kVenv = std::string(ACCEL_SOURCE_DIR) + "/.venv-accelerate";
const std::string kPython = kVenv + "/bin/python";

// Prints the settings as Accelerate's own config classes read them; repr() shows a string
// 'no' apart from the boolean False that an unquoted `no` becomes in YAML 1.1.
const char *kReadWithAccelerate = R"(
import sys
from accelerate.commands.config.config_args import load_config_from_file
config = load_config_from_file(sys.argv[1])
kind = config.distributed_type
print("distributed_type=%r mixed_precision=%r num_processes=%r num_machines=%r use_cpu=%r" % (
    getattr(kind, "value", kind), config.mixed_precision, config.num_processes,
    config.num_machines, config.use_cpu))
)";

std::string read(const std::string &path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class PythonAccelerate : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    // Made by scripts/setup; made here when the tests run without it (and skipped only when it
    // cannot be made).
    const auto made =
        run_command({std::string(ACCEL_SOURCE_DIR) + "/scripts/setup-python-accelerate"}, {}, 600);
    if (made.exit_code != 0) {
      unavailable_ =
          "Python Accelerate is not available: scripts/setup-python-accelerate failed: " + made.err;
    }
  }

  void SetUp() override {
    if (!unavailable_.empty()) {
      GTEST_SKIP() << unavailable_;
    }
    dir_ = accel_test::make_temp_dir("interop");
    // Accelerate's default file, and its cache, stay in this test's directory.
    env_ = {{"HF_HOME", dir_ + "/hf"}};
  }

  void TearDown() override {
    if (!dir_.empty()) {
      fs::remove_all(dir_);
    }
  }

  std::string read_with_accelerate(const std::string &config) {
    const auto result = run_command({kPython, "-c", kReadWithAccelerate, config}, env_);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return result.out;
  }

  static inline std::string unavailable_;
  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(PythonAccelerate, OurDefaultConfigRunsAccelerateLaunch) {
  auto result = run_command({ACCEL_BIN, "config", "default"}, env_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto path = dir_ + "/hf/accelerate/default_config.yaml";
  EXPECT_NE(read(path).find("distributed_type: 'NO'"), std::string::npos) << read(path);
  EXPECT_EQ(read_with_accelerate(path),
            "distributed_type='NO' mixed_precision='no' num_processes=1 num_machines=1 "
            "use_cpu=True\n");

  // `accelerate launch` reads the same file as its default and runs a program with it.
  std::ofstream(dir_ + "/hello.py") << "print('python program ran')\n";
  result = run_command({kVenv + "/bin/accelerate", "launch", dir_ + "/hello.py"}, env_);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("python program ran"), std::string::npos) << result.out << result.err;
}

TEST_F(PythonAccelerate, OurQuestionnaireConfigsLoadInAccelerate) {
  struct Case {
    const char *answers;
    const char *expected;
  };
  const Case cases[] = {
      // No distributed training, no debug, no mixed precision.
      {"0\\nno\\n0\\n", "distributed_type='NO' mixed_precision='no' num_processes=1 "
                        "num_machines=1 use_cpu=True\n"},
      // multi-CPU, 2 machines, rank 1, main at 127.0.0.1:29600, same network, 4 processes,
      // debug, fp16.
      {"1\\n2\\n1\\n127.0.0.1\\n29600\\n\\n4\\nyes\\n1\\n",
       "distributed_type='MULTI_CPU' mixed_precision='fp16' num_processes=4 num_machines=2 "
       "use_cpu=True\n"},
  };
  for (const auto &c : cases) {
    const auto path = dir_ + "/answers.yaml";
    const auto result = run_command({"/bin/sh", "-c",
                                     "printf '" + std::string(c.answers) + "' | " + ACCEL_BIN +
                                         " config --config_file " + path});
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    EXPECT_EQ(read_with_accelerate(path), c.expected) << read(path);
  }
}

TEST_F(PythonAccelerate, AccelerateConfigsLoadInOurs) {
  // What `accelerate config default` writes: JSON text, here in a .yaml file.
  const auto json = dir_ + "/default.yaml";
  auto result = run_command({kVenv + "/bin/accelerate", "config", "default", "--config_file", json,
                             "--mixed_precision", "bf16"},
                            env_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_EQ(read(json).rfind("{", 0), 0u) << "expected JSON text:\n" << read(json);
  result = run_command({ACCEL_BIN, "launch", "--config_file", json, "/bin/sh", "-c",
                        "echo $WORLD_SIZE $ACCELERATE_MIXED_PRECISION $ACCELERATE_USE_CPU"},
                       env_);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] 1 bf16 true\n");
  // (The one line allowed: another program on this machine may hold the default port 29500.)
  EXPECT_EQ(std::regex_replace(result.err,
                               std::regex("accel: port 29500 is busy; using port "
                                          "[0-9]+ instead\n"),
                               ""),
            "")
      << "Accelerate's default values deserve no note";

  // What `accelerate config` writes (its writer, ClusterConfig.to_yaml_file): YAML.
  const auto yaml = dir_ + "/multi_cpu.yaml";
  result = run_command(
      {kPython, "-c",
       "import sys\n"
       "from accelerate.commands.config.config_args import ClusterConfig\n"
       "ClusterConfig(compute_environment='LOCAL_MACHINE', distributed_type='MULTI_CPU',\n"
       "    mixed_precision='no', use_cpu=True, debug=False, num_processes=2, num_machines=1,\n"
       "    machine_rank=0, main_process_port=29533, rdzv_backend='static', same_network=True,\n"
       "    ).to_yaml_file(sys.argv[1])\n",
       yaml},
      env_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  ASSERT_NE(read(yaml).find("mixed_precision: 'no'"), std::string::npos) << read(yaml);
  result = run_command({ACCEL_BIN, "launch", "--config_file", yaml, "/bin/sh", "-c",
                        "echo $WORLD_SIZE $ACCELERATE_MIXED_PRECISION"},
                       env_);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("[rank1] 2 no\n"), std::string::npos) << result.out;

  // And Accelerate's default file is ours too.
  result = run_command({kVenv + "/bin/accelerate", "config", "default"}, env_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  result = run_command({ACCEL_BIN, "launch", "/bin/sh", "-c", "echo $WORLD_SIZE"}, env_);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, "[rank0] 1\n");
}

} // namespace
