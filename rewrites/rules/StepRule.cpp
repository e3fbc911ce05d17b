//===- StepRule.cpp - accel-step ------------------------------------------===//
//
// In a loop that runs a training step (or in a helper that is one step): optimizer.step() ->
// accelerator.step(optimizer), scheduler.step() -> accelerator.step(scheduler),
// optimizer.zero_grad(...) -> accelerator.zero_grad(optimizer, ...), and model->zero_grad(...)
// -> accelerator.zero_grad(*model, ...), a loop clearing a model's gradients by hand
// (`for (auto &p : model->parameters()) p.grad().zero_();`) -> accelerator.zero_grad(*model,
// false). A prepared optimizer's step or zero_grad after its training started (the step that
// flushes the last micro-batches after the loop) becomes the accelerator's too. The accelerator
// skips them on gradient-accumulation steps and, under fp16, unscales the gradients and skips
// a step that overflowed. A scheduler stepped once per epoch (outside the batch loop) is left
// alone. See docs/rules/accel-step.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/Lex/Lexer.h"

#include <functional>

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

/// `X.zero_()` or `X.fill_(0)` with X a parameter's gradient (`p.grad()`, `p.mutable_grad()`):
/// gradients cleared by hand. Sets Parameter to the variable p (null for another expression).
bool zeroesGradient(const Stmt *S, const VarDecl **Parameter = nullptr) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(S);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  if (!Method || !Method->getDeclName().isIdentifier()) {
    return false;
  }
  auto Args = writtenArgs(Call);
  // fill_(0): the literal made a c10::Scalar.
  const Expr *Value = Args.size() == 1 ? Args[0]->IgnoreImplicit() : nullptr;
  if (const auto *Scalar = dyn_cast_or_null<CXXConstructExpr>(Value);
      Scalar && Scalar->getNumArgs() == 1) {
    Value = Scalar->getArg(0)->IgnoreImplicit();
  }
  const auto *Integer = dyn_cast_or_null<IntegerLiteral>(Value);
  const auto *Floating = dyn_cast_or_null<FloatingLiteral>(Value);
  const bool Zero =
      (Integer && Integer->getValue() == 0) || (Floating && Floating->getValue().isZero());
  if (!(Method->getName() == "zero_" && Args.empty()) && !(Method->getName() == "fill_" && Zero)) {
    return false;
  }
  const auto *Grad = dyn_cast_or_null<CXXMemberCallExpr>(
      Call->getImplicitObjectArgument() ? Call->getImplicitObjectArgument()->IgnoreImplicit()
                                        : nullptr);
  const CXXMethodDecl *GradMethod = Grad ? Grad->getMethodDecl() : nullptr;
  if (!GradMethod || !GradMethod->getDeclName().isIdentifier() ||
      !(GradMethod->getName() == "grad" || GradMethod->getName() == "mutable_grad")) {
    return false;
  }
  if (Parameter) {
    *Parameter = namedVar(Grad->getImplicitObjectArgument()->IgnoreParenImpCasts());
  }
  return true;
}

/// `for (auto &p : model->parameters()) { if (p.grad().defined()) p.grad().zero_(); }`: a loop
/// over a model's parameters that only clears their gradients; the parameters() call, or null.
const CXXMemberCallExpr *clearedModel(const CXXForRangeStmt *Loop) {
  const auto *Parameters = dyn_cast_or_null<CXXMemberCallExpr>(
      Loop->getRangeInit() ? Loop->getRangeInit()->IgnoreImplicit() : nullptr);
  const CXXMethodDecl *Method = Parameters ? Parameters->getMethodDecl() : nullptr;
  if (!Method || !Method->getDeclName().isIdentifier() || Method->getName() != "parameters" ||
      qualifiedName(Method->getParent()) != "torch::nn::Module") {
    return nullptr;
  }
  const VarDecl *Var = Loop->getLoopVariable();
  // Each statement clears Var's gradient, alone or under `if (p.grad().defined())`.
  std::function<bool(const Stmt *)> Clears = [&](const Stmt *S) -> bool {
    if (const auto *Block = dyn_cast<CompoundStmt>(S)) {
      return !Block->body_empty() && llvm::all_of(Block->body(), Clears);
    }
    if (const auto *If = dyn_cast<IfStmt>(S)) {
      const auto *Defined = dyn_cast<CXXMemberCallExpr>(If->getCond()->IgnoreImplicit());
      const auto *Grad =
          Defined
              ? dyn_cast<CXXMemberCallExpr>(Defined->getImplicitObjectArgument()->IgnoreImplicit())
              : nullptr;
      return !If->getElse() && !If->getInit() && !If->getConditionVariable() && Grad &&
             Defined->getMethodDecl()->getName() == "defined" &&
             namedVar(Grad->getImplicitObjectArgument()->IgnoreParenImpCasts()) == Var &&
             Clears(If->getThen());
    }
    const VarDecl *Cleared = nullptr;
    return zeroesGradient(dyn_cast<Expr>(S) ? cast<Expr>(S)->IgnoreImplicit() : S, &Cleared) &&
           Cleared && Cleared == Var;
  };
  return Clears(Loop->getBody()) ? Parameters : nullptr;
}

AST_MATCHER(CXXForRangeStmt, clearsModelGradients) { return clearedModel(&Node) != nullptr; }

/// Inside a loop that runs a training step, also through loops of its own (the clearing loop
/// over the parameters is one).
AST_MATCHER(Stmt, inTrainingStepLoop) {
  ASTContext &Ctx = Finder->getASTContext();
  auto Parents = Ctx.getParents(Node);
  for (const Stmt *Loop = Parents.empty() ? nullptr : innermostLoop(Parents[0], Ctx); Loop;) {
    if (isTrainingStepLoop(Loop, Ctx)) {
      return true;
    }
    Parents = Ctx.getParents(*Loop);
    Loop = Parents.empty() ? nullptr : innermostLoop(Parents[0], Ctx);
  }
  return false;
}
AST_MATCHER(CXXMemberCallExpr, zeroesGradientNode) { return zeroesGradient(&Node); }

/// A call on an optimizer that its function prepares, written after the prepare and outside
/// the training step: the step that flushes the last micro-batches of a hand-written
/// accumulation after the loop. Raw, it would apply gradients that accelerator.backward scaled
/// under fp16.
AST_MATCHER(CXXMemberCallExpr, onOptimizerPreparedBefore) {
  ASTContext &Ctx = Finder->getASTContext();
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(
      Node.getImplicitObjectArgument() ? Node.getImplicitObjectArgument()->IgnoreParenImpCasts()
                                       : nullptr);
  const auto *Optimizer = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  const auto *Function = Optimizer ? dyn_cast<FunctionDecl>(Optimizer->getDeclContext()) : nullptr;
  if (!Function || enclosingFunction(DynTypedNode::create(Node), Ctx) != Function) {
    return false;
  }
  const PrepareGroup *Group = AnalysisContext::of(Ctx).setup(Function).groupOf(Optimizer);
  const SourceManager &SM = Ctx.getSourceManager();
  return Group && Group->TrainingLoop &&
         SM.isBeforeInTranslationUnit(SM.getExpansionLoc(Group->TrainingLoop->getBeginLoc()),
                                      SM.getExpansionLoc(Node.getBeginLoc())) &&
         Group->Block->getSourceRange().fullyContains(Node.getSourceRange());
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
  auto AfterTraining =
      cxxMemberCallExpr(inUserCode(), unless(inTrainingStep()), forFunction(acceleratorFunction()),
                        onOptimizerPreparedBefore(),
                        callee(cxxMethodDecl(hasAnyName("step", "zero_grad"), ofClass(Optimizer))),
                        // Only its default arguments (a closure is LBFGS's, said above).
                        unless(hasAnyArgument(unless(cxxDefaultArgExpr()))))
          .bind("call");
  auto Step = [](const MatchResult &Match) -> std::string {
    return "accelerator.step(" + calledObject(call(Match), *Match.Context) + ")";
  };
  auto Zero = [](const MatchResult &Match) -> std::string {
    return "accelerator.zero_grad(" + calledObject(call(Match), *Match.Context) + arguments(Match) +
           ")";
  };
  // Gradients cleared by hand in a loop over the model's parameters: the model's zero_grad,
  // which keeps them within an accumulation cycle. Cleared any other way: said.
  auto ClearedByHand =
      cxxMemberCallExpr(inUserCode(), forFunction(acceleratorFunction()), zeroesGradientNode(),
                        anyOf(inTrainingStep(), inTrainingStepLoop()));
  auto ClearingLoop = cxxForRangeStmt(inUserCode(), forFunction(acceleratorFunction()),
                                      inTrainingStepLoop(), clearsModelGradients())
                          .bind("loop");
  auto ModelCleared = [](const MatchResult &Match) -> std::string {
    const auto *Loop = Match.Nodes.getNodeAs<CXXForRangeStmt>("loop");
    return "accelerator.zero_grad(" + calledObject(clearedModel(Loop), *Match.Context) +
           ", /*set_to_none=*/false);";
  };
  auto ClearedElsewhere =
      cxxMemberCallExpr(ClearedByHand, unless(hasAncestor(cxxForRangeStmt(clearsModelGradients()))))
          .bind("call");
  return applyFirst<Finding>({
      makeRule(ClearingLoop, changeTo(statement("loop"), run(ModelCleared)),
               explain("loop", "accelerator.zero_grad(model) clears the model's gradients like "
                               "this loop, and keeps them within a gradient-accumulation cycle")),
      makeRule(ClearedElsewhere, noEdits(),
               warn("call", "this clears a gradient by hand, every step: under gradient "
                            "accumulation (accel launch --gradient_accumulation_steps) it would "
                            "clear the gradients the cycle is accumulating; clear them with "
                            "optimizer.zero_grad() or model->zero_grad() (accel-rewrite makes "
                            "them the accelerator's, which keep a cycle's gradients)")),
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
      makeRule(AfterTraining, changeTo(node("call"), run([Step, Zero](const MatchResult &Match) {
                                         return call(Match)->getMethodDecl()->getName() == "step"
                                                    ? Step(Match)
                                                    : Zero(Match);
                                       })),
               explain("call", "a step of a prepared optimizer after its training loop (the "
                               "last micro-batches of an accumulation): accelerator.step "
                               "unscales the gradients accelerator.backward scaled under fp16 "
                               "and skips a step that overflowed")),
  });
}

} // namespace accel::rewrites
