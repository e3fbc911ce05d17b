//===- TrainingPlan.h - The plan of each training loop ----------*- C++ -*-===//
//
// A rewrite is a transaction per training loop (docs/design.md, "Sound rewrites"): before any
// edit, the plan of each loop that calls backward says what rewriting it needs — the function
// it is in, the optimizers it steps and the setup function that creates (and prepares) them,
// the batch source it iterates — and whether every part can be made right. A loop whose plan
// has a problem must not be half rewritten: its data sharded without gradient
// synchronisation, or its backward rewritten next to a raw step, is a program that runs and
// prints numbers that are wrong. The rule accel-training-loop reports such a loop, and the
// engine then applies none of the edits of its transaction (DeclinedRanges).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accel::rewrites {

/// The plan of one training loop: a loop whose body calls backward, a helper that is one
/// training step (called once per batch), or a backward outside any loop.
struct LoopPlan {
  enum KindType {
    /// A loop with a backward call in its body (not in a nested loop).
    Loop,
    /// A helper that gets the accelerator and calls backward outside any loop.
    StepFunction,
    /// Backward calls outside any loop, in a function that is not a step helper: one step
    /// (or a few) written out on a batch the program holds, in the function that creates the
    /// optimizer.
    StraightLine,
  };
  KindType Kind = Loop;
  /// The loop, the helper's body, or for StraightLine the function's body (its statements
  /// outside loops are the unit).
  const clang::Stmt *Unit = nullptr;
  /// The function the unit is in (a lambda's call operator for a lambda).
  const clang::FunctionDecl *Function = nullptr;
  /// The optimizers the unit steps, as created (a local of the setup function).
  llvm::SmallVector<const clang::VarDecl *, 2> Optimizers;
  /// The function that creates them, where accelerator.prepare is (or goes).
  const clang::FunctionDecl *Setup = nullptr;
  /// The loader whose batches the unit trains on, as created; for a list of batches the
  /// program made (accelerator.prepare_batches), the list's variable; for a loop that cuts
  /// its batches by a counter (accelerator.batch_range), the counter.
  const clang::VarDecl *Loader = nullptr;
  /// Why the unit cannot be rewritten right, and what to do by hand; empty when it can.
  std::string Problem;
  /// Where the problem is (the unit when no better place is known).
  clang::SourceLocation ProblemLoc;

  bool sound() const { return Problem.empty(); }
};

/// The plans of every training loop of a translation unit's main file.
struct TrainingPlans {
  std::vector<LoopPlan> Loops;
  /// The plan of the unit that a backward call belongs to (any instantiation of it), or null
  /// when the call is not training (a demonstration before prepare).
  const LoopPlan *planOf(const clang::Stmt *Backward, const clang::SourceManager &SM) const;
  /// Offsets of each plan's backward calls in the main file (template instantiations share
  /// their pattern's offsets).
  std::vector<std::vector<unsigned>> BackwardOffsets;

  /// What a declined loop takes with it, as [begin, end) offsets of the main file: every
  /// function whose edits belong to the same transaction (the loop's function, its setup
  /// function, the functions of other loops of that setup, the helpers they pass the
  /// accelerator to and the callers that would pass it to those), and the declarations of
  /// the loaders those functions train on. No edit inside them is applied.
  std::vector<std::pair<unsigned, unsigned>> DeclinedRanges;
  /// Whether an offset of the main file lies in a declined range.
  bool declines(unsigned Offset) const;
};

/// The models the training step Body (a loop's body, or a step helper's) trains: those
/// prepared with the optimizers it steps. None when Body is no planned unit's.
std::optional<llvm::SmallVector<const clang::VarDecl *, 2>> modelsTrainedIn(const clang::Stmt *Body,
                                                                            clang::ASTContext &Ctx);

/// A call in the straight-line step of its function: outside loops, in a function with a
/// StraightLine plan, after the prepare (a call before it is a demonstration).
bool isInStraightLineStep(const clang::CallExpr *Call, clang::ASTContext &Ctx);

/// Computes the plans (AnalysisContext::trainingPlans() owns them).
std::unique_ptr<TrainingPlans> planTrainingLoops(clang::ASTContext &Ctx);

} // namespace accel::rewrites
