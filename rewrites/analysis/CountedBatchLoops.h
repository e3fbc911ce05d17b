//===- CountedBatchLoops.h - Loops that cut their batches by a counter -*- C++ -*-===//
//
// Book chapters and course code often make batches by hand: a counter steps through a tensor
// held whole (or through a permutation of its rows), and the body cuts each batch's rows:
//
//   auto perm = torch::randperm(n);
//   for (int64_t i = 0; i < n; i += batch_size) {
//     auto idx = perm.slice(0, i, std::min(i + batch_size, n));
//     auto x = X.index_select(0, idx), y = Y.index_select(0, idx);
//     ... backward ...
//   }
//   for (int b = 0; b < batches; ++b) { auto x = X.narrow(0, b * size, size); ... }
//   for (int b = 0; b < batches; ++b) { int64_t start = b * size; auto x = X.slice(0, start, start
//   + size); } auto xs = X.split(size);  for (size_t b = 0; b < xs.size(); ++b) { auto x = xs[b];
//   ... }
//
// accel-data-loader shares such a loop as a prepared loader shares batches: the header runs
// this process's iterations (`for (int64_t i : accelerator.batch_range(0, n, batch_size))`)
// and each cut takes this process's rows of its batch (`accelerator.batch_rows(...)`, the
// whole batch unless split_batches). That is right only when the counter does nothing but cut
// rows, the bounds stay what they were when the loop began, and every iteration runs to its
// end; what this analysis finds out.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <utility>

namespace accel::rewrites {

struct CountedBatchLoop {
  /// Whether the loop counts `for (INT i = begin; i < end; i += step)` (or `++i`, `<=`,
  /// `i + ahead < end`) and cuts batch rows with the counter; the fields below are set only
  /// then.
  bool Counted = false;
  const clang::VarDecl *Counter = nullptr;
  const clang::Expr *Begin = nullptr;
  /// The condition's bound, what it adds to the counter first (`i + batch <= n`, a loop that
  /// drops a last partial batch; `i + window + 1 <= n` adds two; none for `i < n`) and whether
  /// it takes the bound itself (`<=`).
  const clang::Expr *End = nullptr;
  llvm::SmallVector<const clang::Expr *, 2> Aheads;
  bool Inclusive = false;
  /// What the counter grows by each iteration; null for `++i`.
  const clang::Expr *Step = nullptr;
  /// The expressions that cut a batch's rows with the counter: `t.slice(0, start, end)`,
  /// `t.narrow(0, start, length)`, `t.index({Slice(start, end), ...})` on a tensor, or take
  /// a batch made beforehand, `batches[b]` of a container of tensors.
  llvm::SmallVector<const clang::Expr *, 4> Cuts;
  /// Integer variables declared in the body from the counter and read only by the cuts
  /// (`int64_t start = i * batch_size;` then `X.slice(0, start, start + batch_size)`).
  llvm::SmallVector<const clang::VarDecl *, 2> Offsets;
  /// Variables declared as references that are not const which a cut initializes
  /// (`auto& x = xs[b];`), which nothing in the loop changes: each becomes a copy, which can
  /// hold the batch a shared cut makes (a tensor's copy shares its memory).
  llvm::SmallVector<const clang::VarDecl *, 2> ReferencesCopied;
  /// The variables that size a batch: the step (`i += batch`) and what the condition adds to
  /// the counter (`i + batch <= n`), and those the cuts add to or
  /// multiply with the counter (`b * batch`, `i + batch`) or take as narrow's length. Like a
  /// loader's batch size, each is one process's batch by default and the global batch under
  /// split_batches.
  llvm::SmallVector<const clang::VarDecl *, 2> BatchSizes;
  /// The same written as a member of a local or a parameter (`h.batch_size` of a settings
  /// struct): the variable and the member.
  llvm::SmallVector<std::pair<const clang::VarDecl *, const clang::FieldDecl *>, 1>
      BatchSizeMembers;
  /// Why the loop cannot be shared this way, and what to write instead; empty when it can.
  std::string Problem;

  bool shareable() const { return Counted && Problem.empty(); }
};

/// What a for-loop is as a source of batches (AnalysisContext::countedBatchLoop caches it).
CountedBatchLoop analyzeCountedBatchLoop(const clang::ForStmt *Loop, clang::ASTContext &Ctx);

/// A training-step loop (its body calls backward, or a helper that is one training step) that
/// counts through batches and cuts them in a way accel-data-loader shares.
bool cutsSharedBatches(const clang::ForStmt *Loop, clang::ASTContext &Ctx);

} // namespace accel::rewrites
