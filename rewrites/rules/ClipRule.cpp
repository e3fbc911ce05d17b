//===- ClipRule.cpp - accel-clip ------------------------------------------===//
//
// In a training step, torch::nn::utils::clip_grad_norm_(parameters, ...) and
// clip_grad_value_(parameters, ...) become accelerator.clip_grad_norm_/clip_grad_value_: under
// fp16 loss scaling LibTorch's own would clip the scaled gradients, and under gradient
// accumulation each partial sum. See docs/rules/accel-clip.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/SetupFunction.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

namespace {

AST_MATCHER(CallExpr, isClippingTheAcceleratorDoes) {
  return isGradientClipping(&Node) && clippingProblem(&Node).empty();
}

} // namespace

Rule makeClipRule() {
  // Other forms (one tensor, error_if_nonfinite) decline their loop (analysis/TrainingPlan).
  auto Clipping = callExpr(inUserCode(), isClippingTheAcceleratorDoes(), inTrainingStep(),
                           forFunction(acceleratorFunction()),
                           callee(expr(ignoringImplicit(declRefExpr().bind("name")))))
                      .bind("call");
  auto Replacement = [](const MatchResult &Match) -> std::string {
    const auto *Name = Match.Nodes.getNodeAs<DeclRefExpr>("name");
    return "accelerator." + Name->getDecl()->getNameAsString();
  };
  return makeRule(Clipping, changeTo(node("name"), run(Replacement)),
                  explain("call", "the accelerator clips the true gradients (unscaled under "
                                  "fp16) and only the whole gradient of an accumulation cycle"));
}

} // namespace accel::rewrites
