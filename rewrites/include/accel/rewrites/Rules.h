//===- Rules.h - The registry of accel-rewrite's rules ----------*- C++ -*-===//
//
// The narrow public surface of the rule library: which rules exist and which of them a
// user selected. Front ends (the CLI, --check, the LSP server, the clang-tidy plugin) only
// see this header.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace accel::rewrites {

/// One rewrite rule as front ends list and select it. The name is the same in diagnostics
/// ("[accel-backward]"), in test/rewrite/<name>.cpp and in docs/rules/<name>.md.
struct RuleInfo {
  /// Full name, e.g. "accel-backward". Selections may drop the "accel-" prefix.
  llvm::StringRef Name;
  /// One line saying what the rule changes, for --list-rules.
  llvm::StringRef Description;
};

/// Every rule the library provides, in the order they are applied.
llvm::ArrayRef<RuleInfo> allRules();

/// Resolves a rule selection such as "backward,device" (only these) or "-save" (all but
/// this) against Registry; see docs/accel-rewrite.md. An empty Spec selects every rule.
/// Fails naming the offending item for an unknown rule or an empty item.
llvm::Expected<std::vector<RuleInfo>> selectRules(llvm::StringRef Spec,
                                                  llvm::ArrayRef<RuleInfo> Registry);

} // namespace accel::rewrites
