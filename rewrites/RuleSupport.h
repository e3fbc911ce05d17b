//===- RuleSupport.h - What the rules share ---------------------*- C++ -*-===//
//
// Internal to the rule library: the LibTorch types the rules match (by declaration, never by
// spelling), the analysis of the function that sets up training, and small builders for
// findings and source ranges. Each rule lives in its own file (rewrites/<Name>Rule.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "accel/rewrites/Rules.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Tooling/Transformer/RangeSelector.h"
#include "clang/Tooling/Transformer/Stencil.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <string>

namespace accel::rewrites {

using MatchResult = clang::ast_matchers::MatchFinder::MatchResult;

// ---- the rules -------------------------------------------------------------------------
Rule makeIncludeRule();
Rule makeAcceleratorRule();
Rule makeDeviceRule();
Rule makePrepareRule();
Rule makeDataLoaderRule();
Rule makeBackwardRule();
Rule makeSaveRule();
Rule makeStepRule();
Rule makeAccumulateRule();
Rule makeAutocastRule();

// ---- types -----------------------------------------------------------------------------
/// True for T, const T, T& and T&& where T is (derived from) the class named QualifiedName.
bool isClassOrDerived(clang::QualType Type, llvm::StringRef QualifiedName);
bool isTensorType(clang::QualType Type);      // at::Tensor (torch::Tensor)
bool isDeviceType(clang::QualType Type);      // c10::Device (torch::Device)
bool isDeviceTypeEnum(clang::QualType Type);  // c10::DeviceType (torch::kCUDA)
bool isScalarTypeEnum(clang::QualType Type);  // c10::ScalarType (torch::kFloat)
bool isOptimizerType(clang::QualType Type);   // torch::optim::Optimizer and subclasses
bool isSchedulerType(clang::QualType Type);   // torch::optim::LRScheduler and subclasses
bool isAcceleratorType(clang::QualType Type); // accelerate::Accelerator
/// A model: a ModuleHolder (TORCH_MODULE), a torch::nn::Module subclass, or a shared_ptr
/// to one. Never a reference or pointer.
bool isModelType(clang::QualType Type);

/// The expression as spelled: implicit conversions, temporaries and parentheses removed.
const clang::Expr *spelled(const clang::Expr *E);

// ---- calls -----------------------------------------------------------------------------
/// t.backward(...) on an at::Tensor, or torch::autograd::backward(...).
bool isBackwardCall(const clang::Stmt *S);
/// Arguments the user wrote (default arguments dropped).
llvm::SmallVector<const clang::Expr *, 4> writtenArgs(const clang::CallExpr *Call);
/// The object a member call is on, as an lvalue to pass along: `opt` for `opt.step()`, `*opt`
/// for `opt->step()` (raw or smart pointer). Empty when it is not in one file.
std::string calledObject(const clang::CXXMemberCallExpr *Call, const clang::ASTContext &Ctx);
/// "'train'" for a named function, "a lambda" for a lambda's body.
std::string functionLabel(const clang::FunctionDecl *Function);
/// The source text of a node (empty when it is not in one file).
std::string sourceText(const clang::Stmt *S, const clang::ASTContext &Ctx);

// ---- the setup function ----------------------------------------------------------------
/// The variable a range-for iterates (`for (auto& b : *loader)` gives `loader`).
const clang::VarDecl *iteratedVar(const clang::CXXForRangeStmt *Loop);
/// A local variable initialised by torch::data::make_data_loader (the stateless overloads).
const clang::CallExpr *makeDataLoaderInit(const clang::VarDecl *Var);
/// A make_data_loader variable that a range-for with a backward call in its body iterates,
/// in its function or in a function it is passed to whose parameter accepts the sharded
/// loader: the rule accel-data-loader shards it.
bool isTrainingLoader(const clang::VarDecl *Loader, clang::ASTContext &Ctx);
/// A call in the loader's function that passes it (or *it) to another function.
struct LoaderHandOff {
  const clang::FunctionDecl *Callee = nullptr; // the instantiation, for a template
  bool Iterates = false;                       // the callee's range-for iterates the parameter
  bool Trains = false;                         // ... with a backward call in its body
  /// The parameter's type is deduced (`Loader &`, `auto &`): the sharded loader fits it.
  bool AcceptsShardedLoader = false;
};
llvm::SmallVector<LoaderHandOff, 2> loaderHandOffs(const clang::VarDecl *Loader);
/// The loop variable of a range-for over a training loader.
bool isTrainingBatch(const clang::VarDecl *Var, clang::ASTContext &Ctx);
/// The function whose body a statement or declaration is in (lambdas count as functions).
const clang::FunctionDecl *enclosingFunction(const clang::DynTypedNode &Node,
                                             clang::ASTContext &Ctx);

/// The innermost loop (for, range-for, while, do) around Node inside its function, or null.
const clang::Stmt *innermostLoop(const clang::DynTypedNode &Node, clang::ASTContext &Ctx);
/// A loop that runs one training step per iteration: a backward call has it as its innermost
/// loop.
bool isTrainingStepLoop(const clang::Stmt *Loop, clang::ASTContext &Ctx);
/// A training-step loop with a braced body, in user code of a function where generated code
/// may name `accelerator`; binds the loop as "loop" and its body as "body".
clang::ast_matchers::StatementMatcher trainingStepLoop();
/// An edit putting Statement first in the body bound to "body" of a trainingStepLoop match,
/// unless the body already calls accelerator.<Method>(...); the finding explains it.
Rule loopGuardRule(std::string Method, std::string Statement, std::string Explanation);

/// What the setup function creates (only direct statements of its body count).
struct SetupInfo {
  const clang::FunctionDecl *Function = nullptr;
  llvm::SmallVector<const clang::VarDecl *, 2> Models, Optimizers, Schedulers;
  /// The body statement after which prepare goes; null when prepare cannot go anywhere.
  const clang::Stmt *LastDefinition = nullptr;
  /// The first body statement holding a backward call or a loop over a training loader.
  const clang::Stmt *TrainingLoop = nullptr;
  bool AlreadyPrepared = false;
  /// Why prepare cannot be inserted (empty when it can), with the manual edit.
  std::string Problem;
  clang::SourceLocation ProblemLoc;
};
SetupInfo analyzeSetup(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);
/// True when Var is a model that prepare (inserted or already there) places on the device.
bool isPreparedModel(const clang::VarDecl *Var, clang::ASTContext &Ctx);

/// A function that creates an optimizer (by value): the one that sets up training.
clang::ast_matchers::DeclarationMatcher setupFunction();
/// A function where generated code may name `accelerator`: it has an
/// `accelerate::Accelerator accelerator` (variable or parameter), or it sets up training and
/// has no Accelerator under another name (accel-accelerator adds one), or it is a `[&]`
/// lambda defined in such a function.
clang::ast_matchers::DeclarationMatcher acceleratorFunction();
/// Statements and expressions in the main file, outside template instantiations.
clang::ast_matchers::internal::Matcher<clang::Stmt> inUserCode();

// ---- findings and ranges ---------------------------------------------------------------
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

/// The statement bound to Id with its whole line (indentation and line break) when nothing
/// else is on that line, else the statement and its semicolon.
clang::transformer::RangeSelector wholeStatementLine(std::string Id);
/// Where a new line goes before Loc: the start of Loc's line when only white space
/// precedes Loc on it (the inserted text then ends with a line break), else Loc itself.
clang::SourceLocation lineStartBefore(clang::SourceLocation Loc, const clang::SourceManager &SM);
/// Where a new line goes after the token at Loc: the start of the next line when only white
/// space or a // comment follows on Loc's line, else right after the token.
clang::SourceLocation lineStartAfter(clang::SourceLocation Loc, const clang::SourceManager &SM,
                                     const clang::LangOptions &LangOpts, bool &AtLineStart);

/// An edit inserting Text at Loc (a file location).
clang::transformer::Edit insertionAt(clang::SourceLocation Loc, std::string Text);

} // namespace accel::rewrites
