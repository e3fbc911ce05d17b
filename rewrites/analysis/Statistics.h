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

/// A range-for over a training loader: one made by make_data_loader that accel-data-loader
/// shards, one made by accelerator.prepare_data_loader, or a parameter that such a loader is
/// passed to.
bool iteratesShardedLoader(const clang::CXXForRangeStmt *Loop, clang::ASTContext &Ctx);

/// How accel-reduce combines a local variable across processes where it is read: "sum",
/// "mean", or "" when it is not a running statistic of a sharded loop (or is a step counter).
std::string combinationOf(const clang::VarDecl *Var, clang::ASTContext &Ctx);

/// A reference that reads a running statistic's value (not an update of it inside its loop,
/// not an assignment to it, not already inside accelerator.reduce): Op is set to the
/// combination.
bool readsRunningStatistic(const clang::DeclRefExpr *Ref, clang::ASTContext &Ctx, std::string &Op);

/// Whether S runs only on some processes: it is inside an `if`, loop or `?:` whose condition
/// asks the accelerator which process this is (is_main_process(), process_index(), ...). A
/// collective there would wait forever for the processes that skip it.
bool runsOnSomeProcesses(const clang::Stmt *S, clang::ASTContext &Ctx);

/// A value of this process's batch printed inside the sharded training loop
/// (`printf("loss %.4f", loss.item<double>())`): Op is set to how accel-reduce combines it
/// so that the line shows the global batch's value: "sum" when the tensor sums over the batch,
/// else "mean".
bool printsBatchValue(const clang::CXXMemberCallExpr *Item, clang::ASTContext &Ctx,
                      std::string &Op);

} // namespace accel::rewrites
