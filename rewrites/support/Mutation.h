//===- Mutation.h - What code changes ---------------------------*- C++ -*-===//
//
// Whether code changes a variable or leaves a loop early: what the analyses ask before they
// move code (a write guarded, a loop's bounds evaluated once).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

namespace accel::rewrites {

/// Whether the expression Named (naming a variable) is used to change it: assigned,
/// incremented, its address taken, bound to a reference or pointer that is not const, or the
/// object of a method that is not const. Reading it is not.
bool changesWhatItNames(const clang::Expr *Named, clang::ASTContext &Ctx);
/// The target of S when S assigns (`x = v`, `x += v`, a class's `operator=` or `operator+=`),
/// with the assigned value in Value; null for any other statement.
const clang::Expr *assignmentTarget(const clang::Stmt *S, const clang::Expr **Value = nullptr);
/// Whether code in Scope changes Var.
bool changedInside(const clang::VarDecl *Var, const clang::Stmt *Scope, clang::ASTContext &Ctx);
/// Whether a change of Var can reach Use, a read of it: a change written before Use, or one
/// inside a loop that also holds Use and runs within Var's scope (its next round reads the
/// changed value). A change written after Use and outside such loops does not reach it, so Use
/// reads the initializer's value: `total += loss.item(); loss = loss / accum;`.
bool changeReaches(const clang::VarDecl *Var, const clang::Expr *Use, clang::ASTContext &Ctx);
/// Whether something in Body leaves the loop it is the body of early: a break of that loop
/// (not of a loop or switch inside it), a return, a goto or a throw.
bool leavesEarly(const clang::Stmt *Body);

} // namespace accel::rewrites
