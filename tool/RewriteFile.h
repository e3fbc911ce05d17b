//===- RewriteFile.h - Running clang and the rules over one input -*- C++ -*-===//
#pragma once

#include "accel/rewrites/Rules.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace accel::tool {

/// One input before and after rewriting.
struct FileRewrite {
  /// The file's text as clang read it; edits are computed against exactly this.
  std::string Original;
  std::string Rewritten;
  /// "file:line:col: warning: message [accel-rule]" for what the rules left to the user.
  std::vector<std::string> Warnings;
  /// The translation unit declares one of LibTorch's namespaces (torch, at, c10): it
  /// includes LibTorch's headers.
  bool UsesLibTorch = false;
};

/// Parses File with the compile command Compilations gives it, using the builtin headers in
/// ResourceDir, and applies Rules to the main file: their edits are merged, applied and
/// formatted with the file's .clang-format (LLVM style when there is none). Returns
/// std::nullopt when clang reports errors (it has printed them).
std::optional<FileRewrite> rewriteFile(const clang::tooling::CompilationDatabase &Compilations,
                                       llvm::StringRef File, llvm::StringRef ResourceDir,
                                       llvm::ArrayRef<accel::rewrites::RuleInfo> Rules);

} // namespace accel::tool
