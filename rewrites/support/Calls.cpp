//===- Calls.cpp - Calls, expressions and their source text ---------------===//
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"

using namespace clang;

namespace accel::rewrites {

std::string qualifiedName(const NamedDecl *D) { return D ? D->getQualifiedNameAsString() : ""; }

bool isMethodCall(const Stmt *S, llvm::StringRef QualifiedClass, llvm::StringRef Method) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(S);
  const CXXMethodDecl *Callee = Call ? Call->getMethodDecl() : nullptr;
  return Callee && Callee->getDeclName().isIdentifier() && Callee->getName() == Method &&
         qualifiedName(Callee->getParent()) == QualifiedClass;
}

clang::ast_matchers::StatementMatcher backwardCall() {
  using namespace clang::ast_matchers;
  return callExpr(anyOf(cxxMemberCallExpr(callsMethod("at::Tensor", "backward")),
                        callExpr(callee(functionDecl(hasName("::torch::autograd::backward"))))));
}

bool isBackwardCall(const Stmt *S) {
  if (isa_and_nonnull<CXXMemberCallExpr>(S)) {
    return isMethodCall(S, "at::Tensor", "backward");
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(S)) {
    return qualifiedName(Call->getDirectCallee()) == "torch::autograd::backward";
  }
  return false;
}

bool containsBackward(const Stmt *S) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) { Found = Found || isBackwardCall(Child); });
  return Found;
}

bool isGradientClipping(const Stmt *S) {
  const auto *Call = dyn_cast<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || isa<CXXMemberCallExpr>(Call)) {
    return false;
  }
  const std::string Name = qualifiedName(Callee);
  return Name == "torch::nn::utils::clip_grad_norm_" ||
         Name == "torch::nn::utils::clip_grad_value_";
}

std::string clippingProblem(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  const auto *Parameters =
      Callee->getNumParams() > 0
          ? Callee->getParamDecl(0)->getType().getNonReferenceType()->getAsCXXRecordDecl()
          : nullptr;
  if (!Parameters || qualifiedName(Parameters) != "std::vector") {
    return "it clips one tensor or a braced list, where the accelerator's clipping takes a "
           "std::vector<torch::Tensor>";
  }
  if (Call->getNumArgs() > 3 && !isa<CXXDefaultArgExpr>(Call->getArg(3))) {
    return "it asks to fail on a non-finite norm (error_if_nonfinite), which "
           "accelerator.clip_grad_norm_ does not";
  }
  return "";
}

bool isOptimizerStep(const Stmt *S, const CXXMemberCallExpr *&Call) {
  Call = dyn_cast<CXXMemberCallExpr>(S);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  if (!Method || !Method->getDeclName().isIdentifier() || Method->getName() != "step") {
    return false;
  }
  const Expr *Object = Call->getImplicitObjectArgument();
  QualType Type = Object ? Object->getType() : QualType();
  if (!Type.isNull() && Type->isPointerType()) {
    Type = Type->getPointeeType();
  }
  return isOptimizerType(Type);
}

const Expr *spelled(const Expr *E) {
  return E ? E->IgnoreUnlessSpelledInSource()->IgnoreParens() : nullptr;
}

const VarDecl *namedVar(const Expr *Named) {
  const Expr *E = spelled(Named);
  if (const auto *Deref = dyn_cast_or_null<UnaryOperator>(E);
      Deref && Deref->getOpcode() == UO_Deref) {
    E = spelled(Deref->getSubExpr());
  } else if (const auto *Op = dyn_cast_or_null<CXXOperatorCallExpr>(E);
             Op && Op->getOperator() == OO_Star && Op->getNumArgs() == 1) {
    E = spelled(Op->getArg(0));
  }
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E);
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

llvm::SmallVector<const Expr *, 4> writtenArgs(const CallExpr *Call) {
  llvm::SmallVector<const Expr *, 4> Args;
  for (const Expr *Arg : Call->arguments()) {
    if (!isa<CXXDefaultArgExpr>(Arg)) {
      Args.push_back(Arg);
    }
  }
  return Args;
}

std::string calledObject(const CXXMemberCallExpr *Call, const ASTContext &Ctx) {
  const Expr *Object = Call->getImplicitObjectArgument();
  // A smart pointer's `opt->`: the object is `opt`, not the operator-> call.
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object->IgnoreImplicit());
      Arrow && Arrow->getOperator() == OO_Arrow) {
    Object = Arrow->getArg(0);
  }
  std::string Text = sourceText(Object, Ctx);
  const auto *Member = dyn_cast<MemberExpr>(Call->getCallee());
  return !Text.empty() && Member && Member->isArrow() ? "*" + Text : Text;
}

std::string functionLabel(const FunctionDecl *Function) {
  if (!Function) {
    return "this function";
  }
  if (const auto *Method = dyn_cast<CXXMethodDecl>(Function);
      Method && Method->getParent()->isLambda()) {
    return "a lambda";
  }
  return "'" + Function->getNameAsString() + "'";
}

std::string sourceText(const Stmt *S, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  CharSourceRange Range = Lexer::makeFileCharRange(
      CharSourceRange::getTokenRange(S->getSourceRange()), SM, Ctx.getLangOpts());
  if (Range.isInvalid()) {
    return "";
  }
  return Lexer::getSourceText(Range, SM, Ctx.getLangOpts()).str();
}

void forEachStmt(const Stmt *S, llvm::function_ref<void(const Stmt *)> Visit) {
  if (!S) {
    return;
  }
  Visit(S);
  if (const auto *Lambda = dyn_cast<LambdaExpr>(S)) {
    forEachStmt(Lambda->getBody(), Visit);
  }
  for (const Stmt *Child : S->children()) {
    forEachStmt(Child, Visit);
  }
}

const Expr *conditionOf(const Stmt *S) {
  if (const auto *If = dyn_cast_or_null<IfStmt>(S)) {
    return If->getCond();
  }
  if (const auto *For = dyn_cast_or_null<ForStmt>(S)) {
    return For->getCond();
  }
  if (const auto *While = dyn_cast_or_null<WhileStmt>(S)) {
    return While->getCond();
  }
  if (const auto *Do = dyn_cast_or_null<DoStmt>(S)) {
    return Do->getCond();
  }
  if (const auto *Choice = dyn_cast_or_null<ConditionalOperator>(S)) {
    return Choice->getCond();
  }
  if (const auto *Logical = dyn_cast_or_null<BinaryOperator>(S);
      Logical && Logical->isLogicalOp()) {
    return Logical->getLHS();
  }
  return nullptr;
}

const CXXForRangeStmt *rangeForDeclaring(const VarDecl *Var, ASTContext &Ctx) {
  for (const DynTypedNode &Declaration : Ctx.getParents(*Var)) {
    for (const DynTypedNode &Parent : Ctx.getParents(Declaration)) {
      if (const auto *Loop = Parent.get<CXXForRangeStmt>();
          Loop && Loop->getLoopVariable() == Var) {
        return Loop;
      }
    }
  }
  return nullptr;
}

const Stmt *loopBody(const Stmt *Loop) {
  if (const auto *For = dyn_cast_or_null<ForStmt>(Loop)) {
    return For->getBody();
  }
  if (const auto *Range = dyn_cast_or_null<CXXForRangeStmt>(Loop)) {
    return Range->getBody();
  }
  if (const auto *While = dyn_cast_or_null<WhileStmt>(Loop)) {
    return While->getBody();
  }
  if (const auto *Do = dyn_cast_or_null<DoStmt>(Loop)) {
    return Do->getBody();
  }
  return nullptr;
}

bool refersTo(const Stmt *S, const VarDecl *Var) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) {
    const auto *Ref = dyn_cast<DeclRefExpr>(Child);
    Found = Found || (Ref && Ref->getDecl() == Var);
  });
  return Found;
}

void forEachStmtOutsideLoops(const Stmt *S, llvm::function_ref<void(const Stmt *)> Visit) {
  if (!S || isa<ForStmt>(S) || isa<CXXForRangeStmt>(S) || isa<WhileStmt>(S) || isa<DoStmt>(S) ||
      isa<LambdaExpr>(S)) {
    return;
  }
  Visit(S);
  for (const Stmt *Child : S->children()) {
    forEachStmtOutsideLoops(Child, Visit);
  }
}

} // namespace accel::rewrites
