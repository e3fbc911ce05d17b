//===- StepRule.cpp - accel-step ------------------------------------------===//
//
// In a loop that runs a training step (or in a helper that is one step): optimizer.step() ->
// accelerator.step(optimizer), scheduler.step() -> accelerator.step(scheduler),
// optimizer.zero_grad(...) -> accelerator.zero_grad(optimizer, ...), and model->zero_grad(...)
// -> accelerator.zero_grad(*model, ...). The accelerator skips
// them on gradient-accumulation steps and, under fp16, unscales the gradients and skips a step
// that overflowed. A scheduler stepped once per epoch (outside the batch loop) is left alone.
// See docs/rules/accel-step.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

const CXXMemberCallExpr *call(const MatchResult &Match) {
  return Match.Nodes.getNodeAs<CXXMemberCallExpr>("call");
}

std::string arguments(const MatchResult &Match) {
  const auto *Call = call(Match);
  if (writtenArgs(Call).empty()) {
    return "";
  }
  llvm::Expected<CharSourceRange> Written = callArgs("call")(Match);
  if (!Written) {
    llvm::consumeError(Written.takeError());
    return "";
  }
  return ", " + Lexer::getSourceText(*Written, *Match.SourceManager, Match.Context->getLangOpts())
                    .trim()
                    .str();
}

} // namespace

Rule makeStepRule() {
  auto Optimizer = cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer"));
  auto Scheduler = cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::LRScheduler"));
  auto InLoop = allOf(inUserCode(), inTrainingStep(), forFunction(acceleratorFunction()));
  // step(closure) (LBFGS) needs the closure: left alone, with a warning.
  auto OptimizerStep =
      cxxMemberCallExpr(InLoop, callee(cxxMethodDecl(hasName("step"), ofClass(Optimizer))))
          .bind("call");
  auto ZeroGrad =
      cxxMemberCallExpr(InLoop, callee(cxxMethodDecl(hasName("zero_grad"), ofClass(Optimizer))))
          .bind("call");
  // Clearing through the model (`model->zero_grad()`): Module::zero_grad.
  auto ModelZeroGrad =
      cxxMemberCallExpr(
          InLoop,
          callee(cxxMethodDecl(hasName("zero_grad"),
                               ofClass(cxxRecordDecl(isSameOrDerivedFrom("::torch::nn::Module"))))))
          .bind("call");
  auto SchedulerStep =
      cxxMemberCallExpr(InLoop, callee(cxxMethodDecl(hasName("step"), ofClass(Scheduler))))
          .bind("call");
  auto Step = [](const MatchResult &Match) -> std::string {
    return "accelerator.step(" + calledObject(call(Match), *Match.Context) + ")";
  };
  auto Zero = [](const MatchResult &Match) -> std::string {
    return "accelerator.zero_grad(" + calledObject(call(Match), *Match.Context) + arguments(Match) +
           ")";
  };
  return applyFirst<Finding>({
      makeRule(cxxMemberCallExpr(OptimizerStep, argumentCountIs(1),
                                 unless(hasArgument(0, cxxDefaultArgExpr()))),
               noEdits(),
               warn("call", "this optimizer step takes a closure, which accelerator.step does "
                            "not; under gradient accumulation or fp16, step only when "
                            "accelerator.sync_gradients() and check "
                            "accelerator.optimizer_step_was_skipped() by hand")),
      makeRule(OptimizerStep, changeTo(node("call"), run(Step)),
               explain("call", "accelerator.step(optimizer) steps only when gradients were "
                               "synchronised and, under fp16, unscales them and skips a step "
                               "that overflowed")),
      makeRule(SchedulerStep, changeTo(node("call"), run(Step)),
               explain("call", "accelerator.step(scheduler) moves the schedule once per "
                               "optimizer step, whatever the number of processes")),
      makeRule(ZeroGrad, changeTo(node("call"), run(Zero)),
               explain("call", "accelerator.zero_grad(optimizer) keeps the gradients that "
                               "accumulate between synchronised steps")),
      makeRule(ModelZeroGrad, changeTo(node("call"), run(Zero)),
               explain("call", "accelerator.zero_grad(model) keeps the gradients that "
                               "accumulate between synchronised steps")),
  });
}

} // namespace accel::rewrites
