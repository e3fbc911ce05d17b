//===- RewriteFile.h - Running clang over one input --------------*- C++ -*-===//
#pragma once

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace accel::tool {

/// One input before and after rewriting.
struct FileRewrite {
  /// The file's text as clang read it; edits are computed against exactly this.
  std::string Original;
  std::string Rewritten;
};

/// Parses File with the compile command Compilations gives it, using the builtin headers in
/// ResourceDir. Returns std::nullopt when clang reports errors (it has printed them). No
/// rules exist yet, so Rewritten equals Original.
std::optional<FileRewrite> rewriteFile(const clang::tooling::CompilationDatabase &Compilations,
                                       llvm::StringRef File, llvm::StringRef ResourceDir);

} // namespace accel::tool
