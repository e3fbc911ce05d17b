//===- TrainingLoopRule.cpp - accel-training-loop -------------------------===//
//
// The safety net of the per-loop plans (analysis/TrainingPlan.h): a training loop whose plan
// cannot be made right — its optimizer created inside an outer loop, its model outside the
// function that creates the optimizer, its batches from a source no rule shards, a step
// outside any loop — is declined: the engine applies none of the edits of its transaction
// (the loop's function, its setup function, their helpers and loaders), so nothing is half
// rewritten, and this rule's warning says why and what to write by hand. See
// docs/rules/accel-training-loop.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

Rule makeTrainingLoopRule() {
  auto Backward = callExpr(inUserCode(), backwardCall()).bind("call");
  auto Verdict = dynamicFinding("call", [](const MatchResult &Match) {
    Finding Result;
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    const LoopPlan *Plan =
        AnalysisContext::of(*Match.Context).trainingPlans().planOf(Call, *Match.SourceManager);
    if (Plan && !Plan->sound()) {
      // Every backward of the loop reports the same place and text: one warning per loop.
      Result.Kind = Finding::Decline;
      Result.Loc = Plan->ProblemLoc;
      Result.Message = "this training is left as written, with its setup and helpers (a partial "
                       "rewrite would train each process on its own): " +
                       Plan->Problem;
    } else {
      Result.Message = "this training loop can be rewritten whole";
    }
    return Result;
  });
  return makeRule(Backward, noEdits(), Verdict);
}

} // namespace accel::rewrites
