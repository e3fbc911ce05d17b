//===- Calls.h - Calls, expressions and their source text -------*- C++ -*-===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/ExprCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace accel::rewrites {

/// "ns::Class::name" for a declaration, "" for none.
std::string qualifiedName(const clang::NamedDecl *D);

/// A call of the member function Method of the class QualifiedClass (e.g. "at::Tensor",
/// "backward"): the one way the rules recognise "a call to Class::method".
bool isMethodCall(const clang::Stmt *S, llvm::StringRef QualifiedClass, llvm::StringRef Method);
/// The same as a matcher.
AST_MATCHER_P2(clang::CXXMemberCallExpr, callsMethod, std::string, QualifiedClass, std::string,
               Method) {
  return isMethodCall(&Node, QualifiedClass, Method);
}

/// t.backward(...) on an at::Tensor, or torch::autograd::backward(...).
bool isBackwardCall(const clang::Stmt *S);
/// The same as a matcher.
clang::ast_matchers::StatementMatcher backwardCall();
/// Whether S or a statement below it (lambda bodies included) is a backward call.
bool containsBackward(const clang::Stmt *S);

/// A call of torch::nn::utils::clip_grad_norm_ or clip_grad_value_.
bool isGradientClipping(const clang::Stmt *S);
/// Why accelerator.clip_grad_norm_/clip_grad_value_ cannot stand for a clipping call ("" when
/// it can: the parameters are a std::vector<Tensor>, and no error_if_nonfinite is asked).
std::string clippingProblem(const clang::CallExpr *Call);

/// An optimizer's step() (on an optimizer, or a pointer to one); Call is set to the call.
bool isOptimizerStep(const clang::Stmt *S, const clang::CXXMemberCallExpr *&Call);
/// The expression as spelled: implicit conversions, temporaries and parentheses removed.
const clang::Expr *spelled(const clang::Expr *E);
/// The variable an expression names, through one dereference (`loader` or `*loader`).
const clang::VarDecl *namedVar(const clang::Expr *Named);
/// Arguments the user wrote (default arguments dropped).
llvm::SmallVector<const clang::Expr *, 4> writtenArgs(const clang::CallExpr *Call);
/// The object a member call is on, as an lvalue to pass along: `opt` for `opt.step()`, `*opt`
/// for `opt->step()` (raw or smart pointer). Empty when it is not in one file.
std::string calledObject(const clang::CXXMemberCallExpr *Call, const clang::ASTContext &Ctx);
/// "'train'" for a named function, "a lambda" for a lambda's body.
std::string functionLabel(const clang::FunctionDecl *Function);
/// The source text of a node (empty when it is not in one file).
std::string sourceText(const clang::Stmt *S, const clang::ASTContext &Ctx);

/// Calls Visit on S and every statement below it (lambda bodies included).
void forEachStmt(const clang::Stmt *S, llvm::function_ref<void(const clang::Stmt *)> Visit);
/// The range-for whose loop variable Var is (`p` in `for (auto &p : model->parameters())`),
/// or null.
const clang::CXXForRangeStmt *rangeForDeclaring(const clang::VarDecl *Var, clang::ASTContext &Ctx);
/// The body of a for, range-for, while or do loop; null for any other statement.
const clang::Stmt *loopBody(const clang::Stmt *Loop);
/// The condition that decides whether S's children run: of an if, a for, while or do loop,
/// a `?:`, or the left side of `&&` and `||`; null for any other statement.
const clang::Expr *conditionOf(const clang::Stmt *S);
/// Whether S or a statement below it (lambda bodies included) names Var.
bool refersTo(const clang::Stmt *S, const clang::VarDecl *Var);
/// Calls Visit on S and every statement below it that runs once each time S does: loops
/// (for, range-for, while, do) and lambdas are not entered.
void forEachStmtOutsideLoops(const clang::Stmt *S,
                             llvm::function_ref<void(const clang::Stmt *)> Visit);

} // namespace accel::rewrites
