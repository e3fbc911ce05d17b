//===- RuleBuilders.h - Pieces the rules are built from ---------*- C++ -*-===//
//
// A rule's metadata (its Finding), and the shapes several rules share: a statement put first
// in each training step, and the warning for a construct in a function with no accelerator.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "accel/rewrites/Rules.h"

#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Tooling/Transformer/RangeSelector.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "clang/Tooling/Transformer/Stencil.h"

#include <functional>
#include <string>

namespace accel::rewrites {

using MatchResult = clang::ast_matchers::MatchFinder::MatchResult;

/// The rule's metadata: a Finding of Kind at the node bound to Id, with a message computed
/// from the match.
clang::transformer::Generator<Finding>
finding(Finding::KindType Kind, std::string Id,
        std::function<std::string(const MatchResult &)> Message);
/// The rule's metadata computed whole from the match; Loc defaults to the node bound to Id.
clang::transformer::Generator<Finding>
dynamicFinding(std::string Id, std::function<Finding(const MatchResult &)> Compute);
inline clang::transformer::Generator<Finding> explain(std::string Id, std::string Message) {
  return finding(Finding::Rewrite, std::move(Id),
                 [Message](const MatchResult &) { return Message; });
}
inline clang::transformer::Generator<Finding> warn(std::string Id, std::string Message) {
  return finding(Finding::Warning, std::move(Id),
                 [Message](const MatchResult &) { return Message; });
}

/// An edit putting Statement first in the body bound to "body" of a trainingStepBody match,
/// unless the body already calls accelerator.<Method>(...); the finding explains it.
/// "$models" in Statement stands for the models the loop trains (modelsTrainedIn).
Rule loopGuardRule(std::string Method, std::string Statement, std::string Explanation);

/// The warning for a construct the rule would rewrite, found in a function that has no
/// accelerator: "<What> in 'f', which has no accelerator: <Consequence>". Matcher binds the
/// construct as Id and its function as "function". In code a declined loop leaves as written
/// the warning is dropped (Finding::OnlyWhereRewritten): the decline says what to do there.
Rule noAcceleratorRule(clang::ast_matchers::internal::DynTypedMatcher Matcher, std::string Id,
                       std::string What, std::string Consequence);

} // namespace accel::rewrites
