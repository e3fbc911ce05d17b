// Runs a test body in N real processes that talk over 127.0.0.1, the way `accel launch` would
// start them. The parent re-executes this test binary once per rank with a filter selecting the
// current test; each copy runs the body and exits with its verdict. A worker re-runs its test
// from the start and leaves at the first run_in_processes call, so a test makes one such call.
#pragma once

#include "worker_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace accel_test {

struct Peer {
  int rank = 0;
  int world_size = 1;
  int port = 0; ///< MASTER_PORT, free on 127.0.0.1 when the job started
};

struct RunOptions {
  /// The world size the workers are told; defaults to the number started. Start fewer to test
  /// a peer that never arrives.
  int world_size = 0;
  std::chrono::seconds timeout{120};
};

struct WorkerResult {
  accelerate::launch::WorkerExit exit;
  std::string output;
};

/// In the test process: starts `processes` workers, waits for them (stopping all when one fails
/// or the timeout passes) and returns their exits and output. In a worker: runs `body` and exits
/// the process with 0 when the body raised no gtest failure and no exception, 1 otherwise.
std::vector<WorkerResult> run_in_processes(int processes,
                                           const std::function<void(const Peer &)> &body,
                                           const RunOptions &options = {});

/// True when every worker exited with 0; otherwise says which did not, with their output.
::testing::AssertionResult all_succeeded(const std::vector<WorkerResult> &results);

/// True in a worker started by run_in_processes.
bool is_worker();

/// The same number in the test process and in the workers it starts (the test process's pid),
/// for naming files they share.
int job_id();

} // namespace accel_test
