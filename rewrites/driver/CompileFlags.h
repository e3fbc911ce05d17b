//===- CompileFlags.h - The compile command for each input ------*- C++ -*-===//
#pragma once

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace accel::tool {

/// Chooses where compile commands come from, as the command line says: the flags after
/// `--` (AfterDashDash, from FixedCompilationDatabase::loadFromCommandLine), else
/// BuildDir/compile_commands.json (-p), else defaultFlags() for every input.
llvm::Expected<std::unique_ptr<clang::tooling::CompilationDatabase>>
selectCompilations(std::unique_ptr<clang::tooling::CompilationDatabase> AfterDashDash,
                   llvm::StringRef BuildDir);

/// The compile commands for one file an editor opened: BuildDir's database when given, else
/// the compile_commands.json found in the file's directory or above (as clangd does), else
/// defaultFlags().
llvm::Expected<std::unique_ptr<clang::tooling::CompilationDatabase>>
compilationsFor(llvm::StringRef File, llvm::StringRef BuildDir);

/// Flags for a file given alone: C++17, as LibTorch requires, and the LibTorch headers this
/// tool was built against (as system headers, which is how CMake's Torch target adds them).
std::vector<std::string> defaultFlags();

} // namespace accel::tool
