//===- SetupFunction.h - The function that sets up training -----*- C++ -*-===//
//
// The function that creates the optimizer is where training is set up: where the
// Accelerator goes, where prepare goes (after the models, optimizers and schedulers, before
// the training loop), and which functions may name `accelerator`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace accel::rewrites {

/// What the setup function creates (only direct statements of its body count).
struct SetupInfo {
  const clang::FunctionDecl *Function = nullptr;
  llvm::SmallVector<const clang::VarDecl *, 2> Models, Optimizers, Schedulers;
  /// The body statement after which prepare goes; null when prepare cannot go anywhere.
  const clang::Stmt *LastDefinition = nullptr;
  /// The first body statement holding a backward call or a loop over a training loader.
  const clang::Stmt *TrainingLoop = nullptr;
  bool AlreadyPrepared = false;
  /// The body statement holding the first accelerator.prepare call, when there is one.
  const clang::Stmt *PreparedAt = nullptr;
  /// Why prepare cannot be inserted (empty when it can), with the manual edit.
  std::string Problem;
  clang::SourceLocation ProblemLoc;
};
SetupInfo analyzeSetup(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);
/// A backward call that runs in the setup function before prepare (a demonstration, such as a
/// gradient check before the optimizer exists): it is left as written, since no accelerator
/// setting applies to an unprepared model.
bool runsBeforePrepare(const clang::Stmt *Call, clang::ASTContext &Ctx);
/// True when Var is a model that prepare (inserted or already there) places on the device.
bool isPreparedModel(const clang::VarDecl *Var, clang::ASTContext &Ctx);

/// A function that creates an optimizer (by value): the one that sets up training.
clang::ast_matchers::DeclarationMatcher setupFunction();
/// A function that has an `accelerate::Accelerator accelerator` of its own (variable or
/// parameter), or sets up training and has no Accelerator under another name
/// (accel-accelerator declares one), or is a `[&]` lambda defined in such a function.
clang::ast_matchers::DeclarationMatcher declaresAccelerator();
/// A function where generated code may name `accelerator`: one that declaresAccelerator(),
/// a helper that accel-accelerator passes it to (AcceleratorParameter.h), or a `[&]` lambda
/// defined in either.
clang::ast_matchers::DeclarationMatcher acceleratorFunction();
/// Statements and expressions in the main file, template instantiations included.
clang::ast_matchers::internal::Matcher<clang::Stmt> inUserCode();

} // namespace accel::rewrites
