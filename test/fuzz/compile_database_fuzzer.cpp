// accel-rewrite's compile databases (rewrites/driver/CompileFlags.cpp): the input is a build
// directory's compile_commands.json, read as `-p DIR` reads it (selectCompilations) and as the
// language server finds it beside a file (compilationsFor), then asked for every file's command and
// for one of a file it does not list (which is inferred from its neighbours).
#include "CompileFlags.h"
#include "scratch_directory.h"

#include <cstdint>
#include <fstream>
#include <string>

namespace {

// Asks Database everything accel-rewrite asks it, bounded for a fuzzer's sake.
void query(clang::tooling::CompilationDatabase &Database, llvm::StringRef Directory) {
  size_t Asked = 0;
  for (const std::string &File : Database.getAllFiles()) {
    if (++Asked > 16) {
      break;
    }
    for (const clang::tooling::CompileCommand &Command : Database.getCompileCommands(File)) {
      (void)Command.CommandLine.size();
    }
  }
  Database.getCompileCommands((Directory + "/unlisted.cpp").str());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static const std::string Directory = (accel_fuzz::scratch_directory() / "build").string();
  static const bool Made = std::filesystem::create_directories(Directory);
  (void)Made;
  std::ofstream(Directory + "/compile_commands.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char *>(Data), static_cast<std::streamsize>(Size));

  llvm::Expected<std::unique_ptr<clang::tooling::CompilationDatabase>> FromBuildDir =
      accel::tool::selectCompilations(nullptr, Directory);
  if (FromBuildDir) {
    query(**FromBuildDir, Directory);
  } else {
    llvm::consumeError(FromBuildDir.takeError());
  }
  llvm::Expected<std::unique_ptr<clang::tooling::CompilationDatabase>> BesideFile =
      accel::tool::compilationsFor(Directory + "/opened.cpp", "");
  if (BesideFile) {
    query(**BesideFile, Directory);
  } else {
    llvm::consumeError(BesideFile.takeError());
  }
  return 0;
}
