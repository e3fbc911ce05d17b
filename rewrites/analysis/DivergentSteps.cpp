//===- DivergentSteps.cpp - Steps some processes take and others not -----===//
#include "analysis/DivergentSteps.h"

#include "analysis/BatchValues.h"
#include "support/Calls.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "llvm/ADT/SmallVector.h"

using namespace clang;

namespace accel::rewrites {

std::optional<DivergentStep> divergentStep(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *Body = loopBody(Loop);
  const Stmt *FunctionBody = Body;
  for (DynTypedNodeList Parents = Ctx.getParents(*Loop); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (const auto *Function = Parents[0].get<FunctionDecl>()) {
      FunctionBody = Function->getBody();
      break;
    }
    if (const auto *Lambda = Parents[0].get<LambdaExpr>()) {
      FunctionBody = Lambda->getBody();
      break;
    }
  }
  std::optional<DivergentStep> Result;
  llvm::SmallVector<const Expr *, 4> Conditions;
  // Nested: inside a loop or switch of the body, where break and continue are its own.
  std::function<void(const Stmt *, bool)> Walk = [&](const Stmt *S, bool Nested) {
    if (!S || Result || isa<LambdaExpr>(S)) {
      return;
    }
    const CXXMemberCallExpr *Step = nullptr;
    const bool Leaves =
        isa<ReturnStmt, GotoStmt, CXXThrowExpr>(S) || (!Nested && isa<BreakStmt, ContinueStmt>(S));
    if (Leaves || isBackwardCall(S) || isOptimizerStep(S, Step)) {
      for (const Expr *Condition : Conditions) {
        if (computedFromTensors(Condition, FunctionBody)) {
          Result = DivergentStep{S, Condition, Leaves};
          return;
        }
      }
    }
    auto Under = [&](const Expr *Condition, const Stmt *Child, bool ChildNested) {
      if (Condition) {
        Conditions.push_back(Condition);
      }
      Walk(Child, ChildNested);
      if (Condition) {
        Conditions.pop_back();
      }
    };
    if (const auto *If = dyn_cast<IfStmt>(S)) {
      Walk(If->getCond(), Nested);
      Under(If->getCond(), If->getThen(), Nested);
      Under(If->getCond(), If->getElse(), Nested);
      return;
    }
    if (const auto *While = dyn_cast<WhileStmt>(S)) {
      Under(While->getCond(), While->getBody(), true);
      return;
    }
    if (const auto *For = dyn_cast<ForStmt>(S)) {
      Walk(For->getInit(), Nested);
      Under(For->getCond(), For->getBody(), true);
      return;
    }
    if (const auto *Do = dyn_cast<DoStmt>(S)) {
      Under(Do->getCond(), Do->getBody(), true);
      return;
    }
    if (const auto *Switch = dyn_cast<SwitchStmt>(S)) {
      Under(Switch->getCond(), Switch->getBody(), true);
      return;
    }
    if (const auto *Conditional = dyn_cast<ConditionalOperator>(S)) {
      Walk(Conditional->getCond(), Nested);
      Under(Conditional->getCond(), Conditional->getTrueExpr(), Nested);
      Under(Conditional->getCond(), Conditional->getFalseExpr(), Nested);
      return;
    }
    const bool Inner = Nested || isa<CXXForRangeStmt>(S);
    for (const Stmt *Child : S->children()) {
      Walk(Child, Inner);
    }
  };
  Walk(Body, false);
  return Result;
}

} // namespace accel::rewrites
