//===- LspServer.h - accel-rewrite --lsp ------------------------*- C++ -*-===//
#pragma once

#include "PreambleCache.h"
#include "RewriteFile.h"
#include "accel/rewrites/Rules.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/LSP/Transport.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace accel::tool {

struct LspOptions {
  std::string ResourceDir;
  std::vector<accel::rewrites::RuleInfo> Rules;
  /// -p: this compile database for every document; else each document's own, found upwards
  /// from it as clangd does, else the default flags.
  std::string BuildDir;
  /// Keeps each document's precompiled preamble between edits (in memory, and on disk when
  /// it has a directory).
  PreambleCache *Preambles = nullptr;
};

/// Serves the Language Server Protocol on stdin/stdout until the client closes the
/// connection, analysing documents with clang and Options.Rules (LspAnalysis.cpp). Returns the
/// exit status.
int runLspServer(const LspOptions &Options);

/// The findings in File's current Text, or std::nullopt with the reason in Why.
using DocumentAnalyzer = std::function<std::optional<FileRewrite>(
    llvm::StringRef File, llvm::StringRef Text, std::string &Why)>;

/// The protocol side (LspServer.cpp): serves Transport until the client closes the connection,
/// publishing what Analyze finds in each open document.
void serveLsp(llvm::lsp::JSONTransport &Transport, const DocumentAnalyzer &Analyze);

} // namespace accel::tool
