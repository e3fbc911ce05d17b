//===- BatchCoupling.h - Losses that couple the rows of a batch -*- C++ -*-===//
//
// Data parallelism gives each process its own rows of the global batch. A loss that treats
// each row on its own (a mean or a sum of per-row terms) then averages across processes to
// the original's; a loss that relates rows to each other does not: each process sees only
// its own rows. Two shapes are recognised:
//   - a value reduced over the batch combined with each row: `cf - cr.mean()` (relativistic
//     GANs), `(adv - adv.mean()) / adv.std()`, `p / p.sum()`;
//   - rows compared with rows: `z1.mm(z2.t())`, `torch::matmul(a, b.transpose(0, 1))`,
//     `torch::cdist(a, b)` (contrastive losses' in-batch negatives).
// Dividing by a count of the batch's samples (`x / x.size(0)`) is a mean, not a coupling.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"

namespace accel::rewrites {

/// The first expression that couples the batch's rows in what Loss is computed from, or null:
/// Loss itself, the local variables of Scope (the training loop or step helper) it reads,
/// and what the functions of the main file it calls return. Data prepared before the loop is
/// the same on every process and not looked at.
const clang::Expr *rowCoupling(const clang::Expr *Loss, const clang::Stmt *Scope,
                               clang::ASTContext &Ctx);

} // namespace accel::rewrites
