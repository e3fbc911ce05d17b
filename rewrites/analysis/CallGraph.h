//===- CallGraph.h - Who calls what in the main file ------------*- C++ -*-===//
//
// The calls of the main file's code (template patterns, not instantiations): which function
// each names, from which function, and which functions are defined there or have their
// address taken. The accelerator-parameter analysis, the statistics (a loader parameter is
// sharded when a call passes a sharded loader) and the training plans all follow calls; this
// analysis needs none of them, so any of them may use it while it is being computed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/ExprCXX.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>

namespace accel::rewrites {

/// One declaration stands for a function and all its redeclarations and instantiations.
const clang::FunctionDecl *canonicalFunction(const clang::FunctionDecl *Function);

struct CallSite {
  const clang::FunctionDecl
      *Caller; ///< the function whose body holds the call (a lambda's operator)
  const clang::CallExpr *Call;
};

struct CallGraph {
  /// The main file's function definitions, in source order.
  llvm::SmallVector<const clang::FunctionDecl *, 16> Definitions;
  /// By callee (canonicalFunction): where it is called.
  llvm::DenseMap<const clang::FunctionDecl *, llvm::SmallVector<CallSite, 2>> Sites;
  /// By callee: the calls alone.
  llvm::DenseMap<const clang::FunctionDecl *, llvm::SmallVector<const clang::CallExpr *, 2>> Calls;
  /// The function whose body holds each call (a lambda's call operator).
  llvm::DenseMap<const clang::CallExpr *, const clang::FunctionDecl *> CallerOf;
  /// Functions named other than as a call's callee (their address is taken), and where.
  llvm::DenseMap<const clang::FunctionDecl *, clang::SourceLocation> AddressTaken;
  /// The main file's lambda expressions, in source order.
  llvm::SmallVector<const clang::LambdaExpr *, 8> Lambdas;
  /// Lambda classes converted to a function pointer somewhere in the main file, and where.
  llvm::DenseMap<const clang::CXXRecordDecl *, clang::SourceLocation> ConvertedLambdas;

  llvm::ArrayRef<CallSite> sitesOf(const clang::FunctionDecl *Function) const;
};
std::unique_ptr<CallGraph> analyzeCallGraph(clang::ASTContext &Ctx);

/// The calls in the main file's code (template patterns, not instantiations) of a function
/// (any declaration or instantiation of it). Operator calls are not listed.
llvm::ArrayRef<const clang::CallExpr *> callsInMainFile(const clang::FunctionDecl *Function,
                                                        clang::ASTContext &Ctx);
/// The function whose body holds a call listed by callsInMainFile (a lambda's call operator
/// for a lambda), or null.
const clang::FunctionDecl *callerOf(const clang::CallExpr *Call, clang::ASTContext &Ctx);
/// Every function of the main file that callsInMainFile lists calls of.
llvm::SmallVector<const clang::FunctionDecl *, 8> calledFunctions(clang::ASTContext &Ctx);

} // namespace accel::rewrites
