#include "multiprocess.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace accel_test {
namespace {

constexpr const char *kWorkerVariable = "ACCEL_TEST_WORKER";

std::string current_test_filter() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

std::string read_file(const std::filesystem::path &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int env_int(const char *name) {
  const char *value = std::getenv(name);
  return value == nullptr ? 0 : std::atoi(value);
}

[[noreturn]] void run_as_worker(const std::function<void(const Peer &)> &body) {
  Peer peer;
  peer.rank = env_int("RANK");
  peer.world_size = env_int("WORLD_SIZE");
  peer.port = env_int("MASTER_PORT");
  bool ok = true;
  try {
    body(peer);
    ok = !::testing::Test::HasFailure();
  } catch (const std::exception &error) {
    std::cerr << "rank " << peer.rank << " threw: " << error.what() << "\n";
    ok = false;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // Leave without running static destructors: the verdict is all the parent needs.
  std::_Exit(ok ? 0 : 1);
}

} // namespace

bool is_worker() { return std::getenv(kWorkerVariable) != nullptr; }

int job_id() { return is_worker() ? env_int(kWorkerVariable) : static_cast<int>(getpid()); }

std::vector<WorkerResult> run_in_processes(int processes,
                                           const std::function<void(const Peer &)> &body,
                                           const RunOptions &options) {
  if (is_worker()) {
    run_as_worker(body);
  }
  using namespace accelerate::launch;
  const int world_size = options.world_size > 0 ? options.world_size : processes;
  const int port = free_loopback_port();
  const auto log_dir = std::filesystem::temp_directory_path() /
                       ("accel-test-" + std::to_string(getpid()) + "-" + std::to_string(port));
  std::filesystem::create_directories(log_dir);

  std::vector<WorkerSpec> specs(processes);
  for (int rank = 0; rank < processes; ++rank) {
    specs[rank].argv = {"/proc/self/exe", "--gtest_filter=" + current_test_filter()};
    specs[rank].env = rank_environment(rank, world_size, rank, world_size, "127.0.0.1", port);
    specs[rank].env[kWorkerVariable] = std::to_string(job_id());
    specs[rank].output_path = (log_dir / ("rank" + std::to_string(rank) + ".log")).string();
  }
  std::vector<WorkerResult> results;
  {
    WorkerGroup group(specs);
    for (const auto &exit : group.wait(options.timeout)) {
      results.push_back({exit, read_file(specs[exit.rank].output_path)});
    }
  }
  std::filesystem::remove_all(log_dir);
  return results;
}

::testing::AssertionResult all_succeeded(const std::vector<WorkerResult> &results) {
  std::ostringstream failures;
  for (const auto &result : results) {
    if (!result.exit.succeeded()) {
      failures << result.exit.describe() << "; its output:\n" << result.output << "\n";
    }
  }
  if (failures.str().empty()) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << failures.str();
}

} // namespace accel_test
