//===- RewriteFile.h - Parsing one input for the rule engine ----*- C++ -*-===//
#pragma once

#include "PreambleCache.h"
#include "accel/rewrites/Engine.h"

#include "clang/Tooling/CompilationDatabase.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace accel::tool {

using accel::rewrites::FixEdit;
using accel::rewrites::RuleFinding;

/// One input before and after rewriting.
struct FileRewrite {
  /// The file's text as clang read it; edits are computed against exactly this.
  std::string Original;
  std::string Rewritten;
  /// "file:line:col: warning: message [accel-rule]" for what the rules left to the user.
  std::vector<std::string> Warnings;
  /// The tool's own warnings among them (two rules editing the same text in ways that do not
  /// combine), which are no rule's finding.
  std::vector<std::string> ToolWarnings;
  /// Every finding in file order: the rewrites (those of rules that only edit next to other
  /// rules' edits only when there are such) and the warnings.
  std::vector<RuleFinding> Findings;
  /// Rewritten as replacements of Original: the merged edits composed with the formatting of
  /// the text they insert (what --export-fixes writes).
  clang::tooling::Replacements Replacements;
  /// A training loop was declined (accel-training-loop): it is left as written, and a
  /// warning says why.
  bool Declined = false;
  /// The translation unit declares one of LibTorch's namespaces (torch, at, c10): it
  /// includes LibTorch's headers.
  bool UsesLibTorch = false;
  /// Where the parse's precompiled preamble came from, and that in words.
  PreambleSource PreambleOrigin = PreambleSource::None;
  std::string PreambleNote;
};

/// Parses File with the compile command Compilations gives it, using the builtin headers in
/// ResourceDir, and runs the rule engine (accel/rewrites/Engine.h) with Rules over the main
/// file. Returns
/// std::nullopt when clang reports errors. Clang's diagnostics go to ClangOutput (so that
/// files analysed side by side do not interleave theirs). Contents, when given, stands for
/// the file's text on disk (an editor's unsaved buffer). With Preambles, the file's include
/// block comes precompiled from that cache (built there when missing or stale).
std::optional<FileRewrite> rewriteFile(const clang::tooling::CompilationDatabase &Compilations,
                                       llvm::StringRef File, llvm::StringRef ResourceDir,
                                       llvm::ArrayRef<accel::rewrites::RuleInfo> Rules,
                                       std::string &ClangOutput, PreambleCache *Preambles,
                                       std::optional<llvm::StringRef> Contents = std::nullopt);

} // namespace accel::tool
