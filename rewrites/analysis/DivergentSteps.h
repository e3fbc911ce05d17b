//===- DivergentSteps.h - Steps some processes take and others not -*- C++ -*-===//
//
// Every process of a sharded training loop must run the same steps: each backward and step
// of the accelerator meets the other processes in a collective (the gradients' all-reduce,
// the overflow check under fp16). A loop that leaves early, skips a batch or steps only when
// a value computed from this process's batch says so,
//
//   for (auto &batch : *loader) {
//     ...
//     if (loss.item<float>() < 0.25f) break;
//
// makes the processes part ways: the one still training waits forever for the others. Such a
// loop is declined. A condition on what is the same everywhere (a step counter, a setting, a
// parameter) keeps the processes together and is fine.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "clang/AST/Stmt.h"

#include <optional>

namespace accel::rewrites {

/// Whether S is inside a loop over this process's shard of the batches, in its own function
/// (a lambda's body is a function of its own).
bool insideShardedLoop(const clang::Stmt *S, clang::ASTContext &Ctx);

/// Whether Var, a tensor, holds data every process holds whole in a function that trains on
/// a sharded loop: a local declared outside the sharded loops, or a parameter, of a function
/// that has one, and never assigned in one (the data set `X` a loop cuts its batches from).
/// Its shape (`X.size(0)`) is the same on every process, not a batch's.
bool heldWholeByEveryProcess(const clang::VarDecl *Var, clang::ASTContext &Ctx);

/// Whether E, computed inside a sharded loop, may differ between the processes: computed from
/// tensors (computedFromTensors), except the shape of a tensor every process holds whole
/// (`n = X.size(0)`, a schedule's length from the data set's size). A loop's counter used for
/// more than cutting its batches is declined apart (CountedBatchLoops). FunctionBody is the
/// body of E's function.
bool differsInShardedLoop(const clang::Expr *E, const clang::Stmt *FunctionBody,
                          clang::ASTContext &Ctx);

struct DivergentStep {
  /// The break, continue, return, goto or throw, or the backward or optimizer step.
  const clang::Stmt *Statement = nullptr;
  /// The condition around it that is computed from this process's batches.
  const clang::Expr *Condition = nullptr;
  /// Statement leaves the iteration (break, continue, return, goto, throw).
  bool Leaves = false;
};

/// The first statement of Loop's body that leaves the loop or the iteration, or runs backward
/// or an optimizer step, under a condition computed from tensors (the batch, the loss, the
/// model's output) directly or through local variables; none when there is no such
/// statement. The shape of a tensor every process holds whole (`X.size(0)` of the data set)
/// is the same everywhere.
std::optional<DivergentStep> divergentStep(const clang::Stmt *Loop, clang::ASTContext &Ctx);

/// The same one level up: a loop around the training loop Loop (the epoch loop) that leaves,
/// or stops by its own condition, on a value this process's shard gave it and accel-reduce
/// does not combine where it is read (a smoothed loss kept by the training loop, the last
/// batch's loss), directly or through local variables: `if (running < best) ... else if
/// (++bad > patience) break;`. Statement is the leaving statement, or the outer loop itself
/// when its condition is the one. Values accel-reduce combines at their read (sums, counts,
/// sums of per-batch means) are the same on every process after the rewrite and are fine.
std::optional<DivergentStep> divergentLeaveAround(const clang::Stmt *Loop, clang::ASTContext &Ctx);

/// Whether S runs under a condition (an if, a loop, `?:`, `&&`, `||` of its function) whose
/// value may differ between the processes after the rewrite: computed inside a sharded loop
/// from tensors (as for divergentStep), or reading a value given there that
/// accel-reduce does not combine. The sharded loop's own condition does not count: every
/// process runs it as often. A collective there (accelerator.reduce) would wait forever for
/// the processes that skip it.
bool underConditionThatDiffers(const clang::Stmt *S, clang::ASTContext &Ctx);

/// A setting of the optimizer (its learning rate, momentum or weight decay, through its
/// options: `options.lr(...)`, `set_lr(...)`) in the function that holds the training loop
/// Loop, to a value or under a condition that may differ between the processes (as for
/// underConditionThatDiffers): the processes would then step with different settings and
/// their weights drift apart. Statement is the call; Condition the value or the condition.
std::optional<DivergentStep> divergentSetting(const clang::Stmt *Loop, clang::ASTContext &Ctx);

} // namespace accel::rewrites
