//===- AcceleratorParameter.h - Helpers that get the accelerator -*- C++ -*-===//
//
// Programs often train in a helper function (`train(model, optimizer, loader)`) that main or
// another setup function calls. accel-accelerator passes the accelerator into such a helper:
// a first parameter `accelerate::Accelerator &accelerator` on each of its declarations, and
// `accelerator` as the first argument of each call, so that the other rules rewrite the
// helper's backward, step, accumulate, autocast, prints and saves as in main. This is the analysis
// of which functions get it, computed once per translation unit (analysis/AnalysisContext.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "analysis/CallGraph.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <string>

namespace accel::rewrites {

/// What the analysis says about one function of the main file that needs the accelerator
/// (it trains, prints or saves, or calls a function that does) and has none.
struct AcceleratorParameterPlan {
  /// The function's canonical declaration (the pattern's, for a template).
  const clang::FunctionDecl *Function = nullptr;
  /// It calls backward itself: a warning is due when the parameter cannot be added.
  bool Trains = false;
  /// accel-accelerator adds the parameter and passes the accelerator at every call.
  bool Receives = false;
  /// Why it cannot (empty when it can): the function is virtual, its address is taken, it is
  /// declared outside the main file, or a caller has no accelerator to pass.
  std::string Problem;
};

/// Which functions of a translation unit get the parameter, and why others cannot (owned by
/// the unit's AnalysisContext).
struct AcceleratorParameterAnalysis {
  llvm::DenseMap<const clang::FunctionDecl *, AcceleratorParameterPlan> Plans;
  llvm::DenseMap<const clang::CallExpr *, const clang::FunctionDecl *> PassingCalls;
  /// Lambdas without a by-reference default (`[]`, `[n]`, `[=]`) that print, save or call a
  /// helper that gets the parameter, defined where the accelerator is: accel-accelerator adds
  /// `&accelerator` to their captures.
  llvm::DenseSet<const clang::CXXRecordDecl *> CapturingLambdas;
  /// Functions that print or save on every process because the accelerator cannot reach
  /// them, with why: such lambdas that cannot capture it (converted to a function pointer,
  /// static), and constructors and destructors of classes made where it is.
  llvm::DenseMap<const clang::FunctionDecl *, std::string> PrintingWithoutAccelerator;
};
std::unique_ptr<AcceleratorParameterAnalysis> analyzeAcceleratorParameters(clang::ASTContext &Ctx);

/// The plan for a function (any declaration or instantiation of it), or null when it needs
/// no accelerator parameter.
const AcceleratorParameterPlan *acceleratorParameterPlan(const clang::FunctionDecl *Function,
                                                         clang::ASTContext &Ctx);
/// True when accel-accelerator gives Function the accelerator parameter.
bool receivesAcceleratorParameter(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);
/// The function a call in user code calls, when that function receives the accelerator
/// parameter (so the call must pass it); null otherwise.
const clang::FunctionDecl *callPassingAccelerator(const clang::CallExpr *Call,
                                                  clang::ASTContext &Ctx);

/// True when accel-accelerator adds `&accelerator` to the captures of the lambda whose call
/// operator is Function.
bool capturesAccelerator(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);
/// Why Function prints or saves on every process although the program gets the accelerator
/// (empty when it does not): see AcceleratorParameterAnalysis::PrintingWithoutAccelerator.
std::string printsWithoutAccelerator(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);

/// The C stdio calls that write to standard output.
enum class StdoutCall {
  None,
  Printf,        ///< printf(format, ...)
  Puts,          ///< puts(text): the text and a newline
  Putchar,       ///< putchar(c)
  FprintfStdout, ///< fprintf(stdout, format, ...)
  FputsStdout,   ///< fputs(text, stdout): no newline
  FputcStdout,   ///< fputc(c, stdout), putc(c, stdout)
};
/// Which of them S is a call of.
StdoutCall stdoutCall(const clang::Stmt *S);
/// std::cout, or a C call that writes to standard output (printf, puts, fprintf(stdout, ...)):
/// what accel-print makes print once.
bool isStdoutPrint(const clang::Stmt *S);
/// Whether S or a statement below it writes what every process would write again (a print
/// to standard output, torch::save): functions that do get the accelerator.
bool writesOutput(const clang::Stmt *S);
/// Whether S or a statement below it reads a running statistic of a sharded loop that
/// accel-reduce combines (an evaluation helper given the sharded training loader): functions
/// that do get the accelerator to combine it.
bool readsStatistic(const clang::Stmt *S, clang::ASTContext &Ctx);

AST_MATCHER(clang::FunctionDecl, receivesAccelerator) {
  return receivesAcceleratorParameter(&Node, Finder->getASTContext());
}
/// The call operator of a lambda that accel-accelerator gives `&accelerator` as a capture.
AST_MATCHER(clang::FunctionDecl, capturesTheAccelerator) {
  return capturesAccelerator(&Node, Finder->getASTContext());
}
/// A function that prints or saves on every process because the accelerator cannot reach it.
AST_MATCHER(clang::FunctionDecl, printsWithoutTheAccelerator) {
  return !printsWithoutAccelerator(&Node, Finder->getASTContext()).empty();
}

/// A call in a training step where the accelerator is: in a loop that runs one step per
/// iteration, outside loops in a helper that is one training step and gets the accelerator,
/// or in the straight-line step of the function that creates the optimizer.
AST_MATCHER(clang::CallExpr, inTrainingStep) {
  clang::ASTContext &Ctx = Finder->getASTContext();
  if (!isInTrainingStep(&Node, Ctx)) {
    return false;
  }
  const auto Where = clang::DynTypedNode::create(Node);
  if (innermostLoop(Where, Ctx)) {
    return true;
  }
  const clang::FunctionDecl *Function = enclosingFunction(Where, Ctx);
  return Function &&
         (receivesAcceleratorParameter(Function, Ctx) || isInStraightLineStep(&Node, Ctx));
}

} // namespace accel::rewrites
