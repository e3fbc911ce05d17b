//===- ExitCodes.h - accel-rewrite's exit statuses --------------*- C++ -*-===//
//
// Scripts and CI tell failures apart by these; docs/accel-rewrite.md lists them too, so
// change both together. When several inputs fail, the first failure decides.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace accel::tool {

enum ExitCode : std::uint8_t { // What a process can return: 0-255.
  /// Every input parsed and its output was written.
  ExitSuccess = 0,
  /// Bad command line: an unknown option (llvm::cl itself exits with 1), no input files,
  /// conflicting output options, -o naming an input, an unknown --rules name, a -p
  /// directory without a usable compile_commands.json or an input missing from it.
  ExitUsage = 1,
  /// Clang reported errors in an input; nothing was written for that input.
  ExitParseError = 2,
  /// Clang's resource directory (builtin headers such as stddef.h) was not found.
  ExitNoResourceDir = 3,
  /// An input could not be read or an output could not be written.
  ExitIOError = 4,
  /// An input is not a LibTorch program: empty, binary (it holds NUL bytes), or it parses but
  /// includes nothing of LibTorch. Nothing was written for it.
  ExitNotLibTorch = 5,
  /// Every output was written, but training that cannot be rewritten right was left as
  /// written (accel-training-loop's warnings say why and what to do by hand): the output
  /// does not yet train data-parallel there.
  ExitDeclined = 6,

  // --check (the lint mode) has its own, as CI gates expect: 0 clean, 1 findings, 2 anything
  // that kept it from checking (a bad command line included).
  ExitCheckFindings = 1,
  ExitCheckError = 2,
};

} // namespace accel::tool
