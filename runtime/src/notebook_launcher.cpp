#include "accelerate/notebook_launcher.h"

#include "runtime.h"
#include "worker_group.h"
#include "worker_output.h"

#include <ATen/detail/CUDAHooksInterface.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace accelerate::detail {
namespace {

namespace fs = std::filesystem;

// Forking copies the caller; some state does not survive the copy.
void refuse_unsafe_fork() {
  if (live_accelerators() > 0) {
    throw std::runtime_error(
        "accelerate: notebook_launcher: an Accelerator already exists in this process; create "
        "it inside the launched function instead (each worker needs its own)");
  }
  const auto &cuda = at::detail::getCUDAHooks();
  for (c10::DeviceIndex device = 0; device < cuda.deviceCount(); ++device) {
    if (cuda.hasPrimaryContext(device)) {
      throw std::runtime_error(
          "accelerate: notebook_launcher: CUDA is already initialised in this process (device " +
          std::to_string(device) +
          "), and a forked process cannot use it; do not touch CUDA before launching");
    }
  }
}

std::string read_all(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_all(const fs::path &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A private directory for the workers' results and errors.
fs::path make_exchange_dir() {
  std::string pattern = (fs::temp_directory_path() / "accel-notebook-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("accelerate: notebook_launcher: cannot create a temporary directory");
  }
  return pattern;
}

} // namespace

std::string run_in_forked_workers(int num_processes, const std::function<std::string()> &body,
                                  const NotebookLauncherOptions &options) {
  if (num_processes < 1) {
    throw std::invalid_argument("accelerate: notebook_launcher: num_processes must be at least 1");
  }
  refuse_unsafe_fork();
  const auto exchange = make_exchange_dir();
  const int port = launch::free_loopback_port();
  std::vector<launch::WorkerSpec> specs(num_processes);
  for (int rank = 0; rank < num_processes; ++rank) {
    auto &spec = specs[rank];
    spec.env =
        launch::rank_environment(rank, num_processes, rank, num_processes, "127.0.0.1", port);
    spec.capture_output = true;
    spec.function = [&body, &exchange, rank]() -> int {
      try {
        auto result = body();
        if (rank == 0) {
          write_all(exchange / "result", result);
        }
        return 0;
      } catch (const std::exception &error) {
        write_all(exchange / ("error-" + std::to_string(rank)), error.what());
      } catch (...) {
        write_all(exchange / ("error-" + std::to_string(rank)), "an exception of unknown type");
      }
      return 1;
    };
  }

  launch::WorkerOutputOptions output_options;
  output_options.prefix = options.prefix_output;
  launch::WorkerOutput output(num_processes, output_options);
  std::vector<launch::WorkerExit> exits;
  {
    launch::WorkerGroup group(
        specs,
        [&output](int rank, int stream, std::string_view chunk) {
          output.add(rank, stream, chunk);
        },
        [&output] { return output.flush_due(); }); // partial lines, as accel launch shows them
    exits = group.wait(options.timeout, std::chrono::seconds(5));
  }
  output.flush();

  std::string failure;
  for (const auto &exit : exits) {
    if (exit.succeeded() || exit.stopped_by_group) {
      continue;
    }
    const auto error_file = exchange / ("error-" + std::to_string(exit.rank));
    failure = fs::exists(error_file)
                  ? "rank " + std::to_string(exit.rank) + " failed: " + read_all(error_file)
                  : exit.describe();
    break; // the root cause; the others were stopped because of it
  }
  if (failure.empty() && !exits.empty() && !exits[0].succeeded()) {
    failure = "the workers did not finish within the timeout and were stopped";
  }
  const std::string result = failure.empty() ? read_all(exchange / "result") : std::string();
  std::error_code ignored;
  fs::remove_all(exchange, ignored);
  if (!failure.empty()) {
    throw std::runtime_error("accelerate: notebook_launcher: " + failure);
  }
  return result;
}

} // namespace accelerate::detail
