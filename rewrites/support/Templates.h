//===- Templates.h - A template's pattern and its instantiations --*- C++ -*-===//
//
// In a template, a call on a dependent value (`opt_.step()` with `Optimizer &opt_;`,
// `loss.backward()` on a loss computed from a dependent batch) is a call only in the
// instantiations, where the types are known; the edits go to the pattern's text. These find
// one from the other.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/Decl.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/SmallVector.h"

namespace accel::rewrites {

/// The instantiations of a function written as a template: a function template's
/// specializations, a class template's specializations' copies of one of its methods, and
/// their member templates' specializations. Only those with a body.
llvm::SmallVector<const clang::FunctionDecl *, 2>
instantiationsOf(const clang::FunctionDecl *Pattern);

/// Whether Function is the pattern of a template that has instantiations: what a dependent
/// value in it is shows in those (the pattern's dependent calls classify as nothing).
bool isInstantiatedPattern(const clang::FunctionDecl *Function);

/// The copies in Pattern's instantiations of S, a statement of Pattern: the statements of the
/// same kind written at the same place.
llvm::SmallVector<const clang::Stmt *, 2> instantiatedCopies(const clang::Stmt *S,
                                                             const clang::FunctionDecl *Pattern);

} // namespace accel::rewrites
