//===- Statistics.h - Running statistics over a sharded loader --*- C++ -*-===//
//
// A training loop over the sharded loader sees 1/N of each global batch on each process, so a
// local running sum (`running_loss += loss.item<double>() * data.size(0)`, `correct += ...`,
// `seen += data.size(0)`) holds this process's share only. accel-reduce combines such an
// accumulator across processes where the program reads it. How depends on what it adds up:
//   - per-sample quantities (the increment involves a batch size or a sum over the batch, or
//     is an integer count): the processes' sums add up ("sum");
//   - per-batch means (`total += loss.item<double>()`): every process ran as many steps as the
//     single-process program, each on half a batch, so the mean of the sums is the sum of the
//     global batches' means ("mean");
//   - step counters (`++step`, `i += 1`): equal on every process, left alone.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/Expr.h"
#include "clang/AST/StmtCXX.h"

#include <string>

namespace accel::rewrites {

/// A loop over this process's share of the batches: a range-for over a training loader (one
/// made by make_data_loader that accel-data-loader shards, one made by
/// accelerator.prepare_data_loader, or a parameter that such a loader is passed to) or over a
/// list of batches it shares, or a for-loop that cuts its batches by a counter
/// (CountedBatchLoops.h).
bool iteratesShardedLoader(const clang::Stmt *Loop, clang::ASTContext &Ctx);

/// How a read of a running statistic combines across processes: Op is "sum" (it adds up a
/// value per sample, BatchValues.h), "mean" (it adds up per-batch means) or "" (not a running
/// statistic of a sharded loop, or a step counter); Unclear when it is added up over the
/// sharded loop but what it adds cannot be told (or mixes kinds, or also adds up over a loader
/// every process sees whole): accel-reduce warns there instead of guessing.
struct StatisticRead {
  std::string Op;
  bool Unclear = false;
  /// For some unclear reads, why (empty: the kind of the values added up cannot be told).
  std::string Why;
};
/// The writes a read sees are those since the last reset before it, and those later in a
/// loop around it: a variable reset and reused by an evaluation loop is combined (or not) by
/// what each read sees.
StatisticRead classifyStatisticRead(const clang::VarDecl *Var, const clang::Stmt *Read,
                                    clang::ASTContext &Ctx);

/// A reference that reads a running statistic's value (not an update of it inside its loop,
/// not an assignment to it, not already inside accelerator.reduce), classified.
bool isStatisticRead(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx, StatisticRead &Read);
/// isStatisticRead with a combination: Op is set to it.
bool readsRunningStatistic(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx, std::string &Op);
/// isStatisticRead that cannot be combined safely (StatisticRead::Unclear).
bool readsUnclearStatistic(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx);

/// `x /= n` or `x *= n` after the loop on a running statistic x: where it is combined (its
/// value read in place). Read tells how (Op, or Unclear).
bool rescalesStatistic(const clang::CompoundAssignOperator *Rescale, clang::ASTContext &Ctx,
                       StatisticRead &Read);

/// Whether Use, naming a tensor, is the target of a change of its values or of the variable:
/// the object of an in-place method (`t.add_(v)`, `t.index_put_(...)`, through views such as
/// `t[0]` or `t.select(...)`), or the left side of an assignment (`t[0] += v`, `t = ...`).
bool changesTensor(const clang::DeclRefExpr *Use, clang::ASTContext &Ctx);

/// Whether S runs only on some processes: it is inside an `if`, loop or `?:` whose condition
/// asks the accelerator which process this is (is_main_process(), process_index(), ...). A
/// collective there would wait forever for the processes that skip it.
bool runsOnSomeProcesses(const clang::Stmt *S, clang::ASTContext &Ctx);

/// A value of this process's batch printed inside the sharded training loop
/// (`printf("loss %.4f", loss.item<double>())`, a progress count's `data.size(0)`): Op is
/// set to how accel-reduce combines it so that the line shows the global batch's value: "sum"
/// for a sum over the batch or its size, "mean" for a mean (BatchValues.h). One sample's value
/// (`x[0].item()`) is not combined: the main process prints its own. Unclear (when given) is
/// set for a printed value whose kind cannot be told.
bool printsBatchValue(const clang::CXXMemberCallExpr *Item, clang::ASTContext &Ctx, std::string &Op,
                      bool *Unclear = nullptr);

/// printsBatchValue for a local copy made in the same iteration and never changed
/// (`float l = loss.item<float>(); ... printf("%f", l)`), or a tensor printed whole
/// (`std::cout << loss`): Ref is the printed copy.
bool printsBatchValueCopy(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx, std::string &Op);

/// A value of this process's batch (a loss, a count; BatchValues.h) handed inside the sharded
/// loop to something accel-reduce does not follow: an object's method
/// (`meter.update(loss.item<double>(), n)`, `losses.push_back(loss.item<float>())`) or a
/// field added to (`stats.loss += ...`). Read later, it holds this process's share only.
/// Holder is set to the object's or field's name.
bool storesBatchValue(const clang::Stmt *S, clang::ASTContext &Ctx, std::string &Holder);

/// A store of storesBatchValue that can hand the object the global batch's values instead: a
/// method of a class of the program (not LibTorch's, nor the standard library's) whose every
/// arithmetic argument is either a batch value that combines by a rule or computed from
/// nothing of the batch (`meter.update(loss.item<double>(), b.data.size(0))`). Then every
/// process's object receives what the original's does each step, so whatever it computes
/// (an average, a history) is the original's. Combined gets each argument to combine and its
/// accelerator.reduce operation ("sum" for per-sample sums and counts, "mean" for per-batch
/// means).
bool combinesStoredArguments(
    const clang::CXXMemberCallExpr *Call, clang::ASTContext &Ctx,
    llvm::SmallVectorImpl<std::pair<const clang::Expr *, std::string>> &Combined);

/// The safety net under the forms above: Ref, printed and not combined, names a variable
/// (of any type, a global too) that the sharded loop, or a lambda called in it, changes with
/// this process's batches in a way the analyses above do not follow (`counts[label] += 1`,
/// `t = torch::cat({t, loss})`, `confusion.index_put_(...)`, a helper's reference parameter).
/// Printed, it is this process's share. Change is set to the first such change (in a helper
/// for a variable passed to it by reference), Source to the variable of Ref's function that
/// holds it: Ref's own, or the one Ref is made from.
bool printsValueChangedFromBatches(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx,
                                   const clang::Stmt *&Change, const clang::VarDecl *&Source);

} // namespace accel::rewrites
