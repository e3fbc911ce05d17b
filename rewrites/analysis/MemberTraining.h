//===- MemberTraining.h - Training in a class's method ----------*- C++ -*-===//
//
// A trainer class: the model and the optimizer are members, the constructor builds the
// optimizer from the model's parameters (or binds references to a model and its optimizer
// that every maker of the object built so), and a method trains (`void train_epoch(Loader &)`
// stepping `optimizer_`); in a class template, what its instantiations step. Such a method gets the
// accelerator like any helper, and prepares the members itself, first in its body: a prepare again
// on the next call is harmless (the runtime keeps one gradient sync per model, and every process
// already holds the same parameters), so no constructor or class layout changes. This is the
// analysis of which members a method prepares, or why it cannot.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/Decl.h"
#include "clang/AST/DeclCXX.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace accel::rewrites {

struct MemberTraining {
  /// The method (its template pattern's declaration for a member template).
  const clang::CXXMethodDecl *Method = nullptr;
  /// The member optimizers the method steps, and the member models they train, in order.
  llvm::SmallVector<const clang::FieldDecl *, 2> Models, Optimizers;
  /// Why the members cannot be prepared there (empty when they can), with the manual edit.
  std::string Problem;
  /// The method calls accelerator.prepare itself.
  bool AlreadyPrepared = false;
  /// Optimizers held by std::unique_ptr or std::shared_ptr (prepared as `*optimizer_`).
  llvm::SmallVector<const clang::FieldDecl *, 2> HeldBySmartPointer;

  /// "model_, optimizer_": the arguments of the members' prepare.
  std::string prepareArguments() const;

  /// Whether the method steps member optimizers that accel-rewrite can have prepared.
  bool sound() const { return !Optimizers.empty() && Problem.empty(); }
  /// Whether accel-prepare inserts the members' prepare first in the method.
  bool needsPrepare() const { return sound() && !AlreadyPrepared; }
};

/// What Function (a method, any instantiation of it) prepares; empty for other functions
/// (AnalysisContext::memberTraining() caches it).
MemberTraining analyzeMemberTraining(const clang::FunctionDecl *Function);

/// What every constructor of Member's class that the user wrote (copies, moves and implicit
/// ones aside) sets Member to: its initializer-list entry or the member's own initializer,
/// then the last assignment to it in the body (`optimizer_ = ...`, `optimizer_.reset(...)`);
/// null for a constructor that sets nothing. Empty when the class declares no constructor;
/// std::nullopt when one is defined in another file.
std::optional<llvm::SmallVector<const clang::Expr *, 2>>
memberInitializers(const clang::FieldDecl *Member);

/// The member a step is on, when it is a field of the class whose method the step is in:
/// `optimizer_` in `optimizer_.step()` or `this->optimizer_.step()`.
const clang::FieldDecl *memberObject(const clang::Expr *Object);

} // namespace accel::rewrites
