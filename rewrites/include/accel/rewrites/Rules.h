//===- Rules.h - The registry of accel-rewrite's rules ----------*- C++ -*-===//
//
// The narrow public surface of the rule library: which rules exist, which of them a user
// selected, and how to build each as a Clang Transformer rule. Front ends (the CLI, --check,
// the LSP server, the clang-tidy plugin) only see this header.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/Basic/SourceLocation.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace accel::rewrites {

/// What a rule says about one match, next to its edits (the rule's metadata).
struct Finding {
  enum KindType {
    /// The match is rewritten; Message explains the edit (the lint mode shows it).
    Rewrite,
    /// The match is left alone; Message says why and what to change by hand.
    Warning,
    /// A training loop that cannot be made right (docs/rules/accel-training-loop.md): the
    /// engine applies none of the edits of its transaction (analysis/TrainingPlan.h,
    /// DeclinedRanges) and reports this as a warning.
    Decline,
  };
  KindType Kind = Rewrite;
  /// A warning that only applies where the code is rewritten ("backward in 'main', which has
  /// no accelerator"): in code a declined loop leaves as written, its decline says what to do,
  /// and the engine drops this one.
  bool OnlyWhereRewritten = false;
  /// Where the finding points (may be a macro location; front ends map it to the file).
  clang::SourceLocation Loc;
  std::string Message;
};

/// A rule as the front ends run it: a Transformer rule whose metadata is a Finding.
using Rule = clang::transformer::RewriteRuleWith<Finding>;

/// One rewrite rule as front ends list, select and run it. The name is the same in
/// diagnostics ("[accel-backward]"), in test/rewrite/<name>.cpp and in docs/rules/<name>.md.
struct RuleInfo {
  /// Full name, e.g. "accel-backward". Selections may drop the "accel-" prefix.
  llvm::StringRef Name;
  /// One line saying what the rule changes, for --list-rules.
  llvm::StringRef Description;
  /// Builds the Transformer rule.
  Rule (*Build)() = nullptr;
  /// The rule's edits only make sense next to other rules' edits (the include and the
  /// Accelerator declaration): front ends apply them to a file only when another selected
  /// rule edits that file.
  bool OnlyWithOtherEdits = false;
};

/// Every rule the library provides, in the order they are applied.
llvm::ArrayRef<RuleInfo> allRules();

/// Resolves a rule selection such as "backward,device" (only these) or "-save" (all but
/// this) against Registry; see docs/accel-rewrite.md. An empty Spec selects every rule.
/// Fails naming the offending item for an unknown rule or an empty item.
llvm::Expected<std::vector<RuleInfo>> selectRules(llvm::StringRef Spec,
                                                  llvm::ArrayRef<RuleInfo> Registry);

} // namespace accel::rewrites
