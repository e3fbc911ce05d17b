// `accel`: the launcher command line — launch, config, env, test, verify.
#include "config_command.h"
#include "env_command.h"
#include "launch_arguments.h"
#include "launch_command.h"
#include "option_values.h"
#include "verify_command.h"

#include <accel/build_info.h>

#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

void print_version() {
  std::cout << "accel " << ACCEL_VERSION << "\n"
            << "LibTorch " << ACCEL_TORCH_VERSION << "\n"
            << "LLVM " << ACCEL_LLVM_VERSION << "\n"
            << "Gloo " << ACCEL_GLOO_SOURCE << "\n";
}

// accel-selftest is installed beside accel.
std::string selftest_path() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return (self.parent_path() / "accel-selftest").string();
}

} // namespace

int main(int argc, char **argv) {
  using namespace accel::cli;
  CLI::App app{"accel: run LibTorch programs data-parallel on many processes and machines"};
  app.set_version_flag("--version", [] {
    print_version();
    return std::string();
  });
  app.require_subcommand(1);

  LaunchRequest launch_request;
  auto *launch = add_launch_command(app, launch_request);

  std::optional<std::string> config_file;
  auto *config = app.add_subcommand("config", "Write a config file by answering questions");
  config->add_option("--config_file,--config-file", config_file,
                     "Where to write (default: Accelerate's default_config.yaml)");
  auto *config_default =
      config->add_subcommand("default", "Write a default config without questions; never "
                                        "overwrites");
  config_default->add_option("--config_file,--config-file", config_file);

  auto *env = app.add_subcommand("env", "Print versions, the machine and the config in effect");
  env->add_option("--config_file,--config-file", config_file);

  LaunchRequest test_request;
  auto *test = app.add_subcommand("test", "Run the bundled self-test with the config in effect");
  test->add_option("--config_file,--config-file", test_request.config_file);
  test->add_option("--num_processes,--num-processes", test_request.flags.num_processes)
      ->check(whole_number(1, std::numeric_limits<int>::max()));

  VerifyRequest verify_request;
  auto *verify = add_verify_command(app, verify_request);

  // `--` ends the launcher's options: accel launch [OPTIONS] -- PROGRAM [ARGS...].
  const LaunchArguments split = split_launch_arguments(argc, argv);

  try {
    app.parse(split.launcher_argc, argv);
  } catch (const CLI::CallForVersion &) {
    return 0;
  } catch (const CLI::ParseError &error) {
    if (error.get_exit_code() == 0) {
      return app.exit(error); // --help
    }
    // Bad usage exits 2, as docs/launcher.md promises, with CLI11's message in our words.
    std::cerr << "accel: error: " << error.what() << " (see accel --help)\n";
    return 2;
  }

  try {
    if (launch->parsed()) {
      launch_request.command = launch_command_words(launch->remaining(), split);
      return run_launch(launch_request);
    }
    if (verify->parsed()) {
      verify_request.stray = verify->remaining();
      verify_request.args = split.after_dashes.value_or(std::vector<std::string>{});
      return run_verify(verify_request, std::cout);
    }
    if (config_default->parsed()) {
      return run_config_default(config_file.value_or(default_config_path()), std::cout);
    }
    if (config->parsed()) {
      return run_config_questions(config_file.value_or(default_config_path()), std::cin, std::cout);
    }
    if (env->parsed()) {
      return run_env(config_file, std::cout);
    }
    if (test->parsed()) {
      test_request.command = {selftest_path()};
      const int code = run_launch(test_request);
      std::cout << (code == 0 ? "Test is a success! You are ready for your distributed training!"
                              : "Test failed: see the failed check above.")
                << std::endl;
      return code;
    }
  } catch (const std::exception &error) {
    std::cerr << "accel: error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}
