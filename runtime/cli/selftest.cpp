// The runtime's multi-process self-check. Run with no launcher variables it starts
// --num_processes copies of itself on 127.0.0.1; each copy (a worker) joins the c10d process
// group and checks all-reduce, broadcast and barrier against values it can compute alone.
#include "process_group.h"
#include "worker_group.h"

#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

using accelerate::detail::ProcessGroup;

// Throws with `what` unless `ok`; the worker's exit code then reports the failed check.
void check(bool ok, const std::string& what) {
  if (!ok) {
    throw std::runtime_error("check failed: " + what);
  }
}

void check_all_reduce(ProcessGroup& group) {
  const int n = group.size();
  std::vector<at::Tensor> tensors{torch::full({1000}, static_cast<float>(group.rank() + 1))};
  group.wait(group.backend().allreduce(tensors), "all-reduce");
  const float expected = static_cast<float>(n * (n + 1) / 2);
  check(torch::all(tensors[0] == expected).item<bool>(), "all-reduce sums every process");
}

void check_broadcast(ProcessGroup& group) {
  const int root = group.size() - 1;
  std::vector<at::Tensor> tensors{torch::arange(16, torch::kFloat32) + group.rank()};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  group.wait(group.backend().broadcast(tensors, options), "broadcast");
  check(torch::equal(tensors[0], torch::arange(16, torch::kFloat32) + root),
        "broadcast delivers the root's tensor");
}

int run_worker() {
  const auto info = accelerate::detect_process_info();
  accelerate::detail::ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(60);
  auto group = ProcessGroup::connect(info, c10::DeviceType::CPU, options);
  check_all_reduce(*group);
  check_broadcast(*group);
  group->barrier();
  std::ostringstream line;
  line << "[rank " << info.rank << "/" << info.world_size << "] all-reduce, broadcast, barrier: ok ("
       << group->backend_name() << ")\n";
  std::cout << line.str() << std::flush;
  return 0;
}

int run_job(int num_processes) {
  using namespace accelerate::launch;
  const int port = free_loopback_port();
  std::vector<WorkerSpec> specs(num_processes);
  for (int rank = 0; rank < num_processes; ++rank) {
    specs[rank].argv = {"/proc/self/exe"};
    specs[rank].env = rank_environment(rank, num_processes, rank, num_processes, "127.0.0.1",
                                       port);
  }
  WorkerGroup group(specs);
  bool ok = true;
  for (const auto& exit : group.wait(std::chrono::seconds(120))) {
    if (!exit.succeeded()) {
      std::cerr << "accel-selftest: " << exit.describe() << "\n";
      ok = false;
    }
  }
  std::cout << (ok ? "Self-check passed on " : "Self-check FAILED on ") << num_processes
            << " processes\n";
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  try {
    if (std::getenv("RANK") != nullptr) {
      return run_worker();
    }
    int num_processes = 2;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--num_processes" && i + 1 < argc) {
        num_processes = std::atoi(argv[++i]);
      } else {
        std::cerr << "usage: accel-selftest [--num_processes N]\n";
        return 2;
      }
    }
    if (num_processes < 1) {
      std::cerr << "accel-selftest: --num_processes must be at least 1\n";
      return 2;
    }
    return run_job(num_processes);
  } catch (const std::exception& error) {
    std::cerr << "accel-selftest: " << error.what() << "\n";
    return 1;
  }
}
