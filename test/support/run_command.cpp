#include "run_command.h"

#include "worker_group.h"

#include <filesystem>
#include <unistd.h>

namespace accel_test {

CommandResult run_command(const std::vector<std::string> &argv,
                          const std::map<std::string, std::string> &env, int timeout_s) {
  accelerate::launch::WorkerSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.capture_output = true;
  CommandResult result;
  accelerate::launch::WorkerGroup group({spec}, [&](int, int stream, std::string_view chunk) {
    (stream == 1 ? result.out : result.err).append(chunk);
  });
  const auto exit = group.wait(std::chrono::seconds(timeout_s), std::chrono::seconds(5))[0];
  result.exit_code = exit.signal != 0 ? 128 + exit.signal : exit.exit_code;
  return result;
}

std::string make_temp_dir(const std::string &name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("accel-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

} // namespace accel_test
