//===- LspServer.h - accel-rewrite --lsp ------------------------*- C++ -*-===//
#pragma once

#include "PreambleCache.h"
#include "accel/rewrites/Rules.h"

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
/// connection. Returns the exit status.
int runLspServer(const LspOptions &Options);

} // namespace accel::tool
