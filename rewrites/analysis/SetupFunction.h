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

/// One accelerator.prepare call: the optimizers of one block that the same statement is the
/// first to train, with their models and schedulers. A function that trains several models
/// one after the other has a group per model, each prepared before its own loop; a k-fold
/// loop that creates a model and optimizer per fold has its group in the fold's body, so each
/// fold prepares its own.
struct PrepareGroup {
  /// The block whose statements declare the optimizers: the function's body (or the try
  /// block that holds it), or a block inside it such as a loop body.
  const clang::CompoundStmt *Block = nullptr;
  llvm::SmallVector<const clang::VarDecl *, 2> Models, Optimizers, Schedulers;
  /// The optimizer each of Schedulers schedules (prepare binds a scheduler to the optimizer
  /// before it in its arguments).
  llvm::SmallVector<const clang::VarDecl *, 2> ScheduledOptimizers;
  /// The statement of Block after which prepare goes.
  const clang::Stmt *LastDefinition = nullptr;
  /// The first statement of Block after the definitions that trains (a backward call, or a
  /// call of a function of this file that trains); null when none does.
  const clang::Stmt *TrainingLoop = nullptr;
};

/// What the setup function creates and where each prepare goes.
struct SetupInfo {
  const clang::FunctionDecl *Function = nullptr;
  /// In source order; empty when prepare cannot go anywhere (see Problem).
  llvm::SmallVector<PrepareGroup, 1> Groups;
  bool AlreadyPrepared = false;
  /// With AlreadyPrepared: the models the program's own prepare calls name.
  llvm::SmallVector<const clang::VarDecl *, 2> PreparedModels;
  /// The body statement holding the first accelerator.prepare call, when there is one.
  const clang::Stmt *PreparedAt = nullptr;
  /// Why prepare cannot be inserted (empty when it can), with the manual edit.
  std::string Problem;
  clang::SourceLocation ProblemLoc;

  /// The group that prepares Optimizer, or null.
  const PrepareGroup *groupOf(const clang::VarDecl *Optimizer) const;
  /// True when Model is prepared here (by a group, or by the program's own prepare).
  bool prepares(const clang::VarDecl *Model) const;
  /// Every model prepared here, each once, in source order.
  llvm::SmallVector<const clang::VarDecl *, 2> models() const;
};
SetupInfo analyzeSetup(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);
/// A backward call that runs in the setup function before prepare (a demonstration, such as a
/// gradient check before the optimizer exists): it is left as written, since no accelerator
/// setting applies to an unprepared model.
bool runsBeforePrepare(const clang::Stmt *Call, clang::ASTContext &Ctx);
/// True when Var is a model that prepare (inserted or already there) places on the device.
bool isPreparedModel(const clang::VarDecl *Var, clang::ASTContext &Ctx);
/// Whether code between Move (a `model->to(device)` statement) and the prepare that
/// accel-prepare inserts for Model uses the model (a forward pass, a print; not
/// `parameters()`, which an optimizer takes by reference): then the move must stay, or that
/// code would run with the model on the CPU and its inputs on the accelerator's device.
bool modelUsedBeforePrepare(const clang::VarDecl *Model, const clang::Stmt *Move,
                            clang::ASTContext &Ctx);

/// A function that creates an optimizer (by value): the one that sets up training.
clang::ast_matchers::DeclarationMatcher setupFunction();
/// A setup function that gets the Accelerator from main (analysis/EntryFunction.h).
clang::ast_matchers::DeclarationMatcher hostedByEntry();
/// main, when it declares the Accelerator for the setup functions it calls.
clang::ast_matchers::DeclarationMatcher hostsAcceleratorOfSetups();
/// A function that has an `accelerate::Accelerator accelerator` of its own (variable or
/// parameter), or sets up training and has no Accelerator under another name
/// (accel-accelerator declares one) unless main hosts it, or is such a main, or is a `[&]`
/// lambda defined in such a function.
clang::ast_matchers::DeclarationMatcher declaresAccelerator();
/// A function where generated code may name `accelerator`: one that declaresAccelerator(),
/// a helper that accel-accelerator passes it to (AcceleratorParameter.h), or a `[&]` lambda
/// defined in either.
clang::ast_matchers::DeclarationMatcher acceleratorFunction();
/// Statements and expressions in the main file, template instantiations included.
clang::ast_matchers::internal::Matcher<clang::Stmt> inUserCode();

} // namespace accel::rewrites
