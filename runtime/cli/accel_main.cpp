// `accel`: the launcher command line.
#include <accel/build_info.h>

#include <CLI/CLI.hpp>

#include <iostream>

namespace {

void print_version() {
  std::cout << "accel " << ACCEL_VERSION << "\n"
            << "LibTorch " << ACCEL_TORCH_VERSION << "\n"
            << "LLVM " << ACCEL_LLVM_VERSION << "\n"
            << "Gloo " << ACCEL_GLOO_SOURCE << "\n";
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"accel: run LibTorch programs data-parallel on many processes and machines"};
  app.set_version_flag("--version", [] {
    print_version();
    return std::string();
  });
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion&) {
    return 0;
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
  }
  return 0;
}
