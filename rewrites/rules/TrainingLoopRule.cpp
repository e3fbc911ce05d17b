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
#include "analysis/IncludedTraining.h"
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
  // Training in a project header is no loop of this file: declined out loud, never passed
  // over in silence.
  auto Headers = dynamicFinding("unit", [](const MatchResult &Match) {
    Finding Result;
    Result.Message = "no included header trains";
    const SourceManager &SM = *Match.SourceManager;
    for (const IncludedTraining &Header : trainingInIncludedHeaders(*Match.Context)) {
      if (Result.Kind != Finding::Decline) {
        Result.Kind = Finding::Decline;
        Result.Loc =
            Header.Include.isValid() ? Header.Include : SM.getLocForStartOfFile(SM.getMainFileID());
        Result.Message = "the training in included headers is left as written, and would run "
                         "unchanged on every process, each on all the data with its own "
                         "model (accel-rewrite edits only the file it is given):";
      } else {
        Result.Message += ";";
      }
      Result.Message +=
          " '" + Header.Header + "' calls backward on line " + std::to_string(Header.Line);
    }
    Result.Message += "; move the training loop into this file, or rewrite it there by hand "
                      "(accelerator.prepare, accelerator.backward, accelerator.step, "
                      "accelerator.prepare_data_loader)";
    return Result;
  });
  return applyFirst<Finding>({makeRule(Backward, noEdits(), Verdict),
                              makeRule(translationUnitDecl().bind("unit"), noEdits(), Headers)});
}

} // namespace accel::rewrites
