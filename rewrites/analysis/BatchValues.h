//===- BatchValues.h - What a value computed from a batch is ---*- C++ -*-===//
//
// accel-reduce combines a statistic across processes by what it is, not by how its update
// line looks: a value that adds up over the batch's samples (a sum-reduced loss, a count of
// correct predictions, the batch size) combines by "sum"; a mean over the batch (a loss with
// the default mean reduction, a sum divided by the batch size) by "mean". This follows the
// value back through local variables, loss functions and their reduction, and the arithmetic
// between them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Expr.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>

namespace accel::rewrites {

enum class BatchValue {
  /// Cannot tell.
  Unknown,
  /// The same on every process (a literal, a constant expression, what a collective of the
  /// accelerator returns, such as the clipped gradients' global norm).
  Constant,
  /// Adds up over the batch's samples: the batch size, a sum over the batch, a count.
  Sum,
  /// A mean over the batch's samples.
  Mean,
  /// The largest (smallest) value over the batch's samples: `per_sample.max()`.
  Max,
  Min,
  /// A value per sample, not reduced over the batch (a loss with reduction None, `eq`,
  /// `argmax(1)`).
  PerSample,
  /// One sample of the batch, taken by a literal row (`x[0]`, `out[0].sum()`): what the main
  /// process prints of it is the original's row under split_batches, and it is never summed
  /// or averaged across processes. A row taken otherwise (`x[-1]`, `x[i]`) is Unknown.
  Row,
};

/// What E is per batch. Depth bounds how far local variables are followed (through their
/// initializer, or, for one declared empty, every value assigned to it).
BatchValue classifyBatchValue(const clang::Expr *E, clang::ASTContext &Ctx, int Depth = 0);

/// Whether the loss Loss (followed through the local variables it is computed from) is a
/// CrossEntropyLoss or NLLLoss averaged with class weights or an ignore_index: it divides by
/// the weights of the batch's targets, so the mean of the processes' losses (and of their
/// gradients) is not the global batch's.
bool averagesOverClassWeights(const clang::Expr *Loss, clang::ASTContext &Ctx, int Depth = 0);

/// Whether E counts the batch's samples: its size (`x.size(0)`, `numel()`), a mask's sum
/// (`mask.sum()`), or a local variable holding one.
bool countsBatchSamples(const clang::Expr *E);

/// Declared without a value: `torch::Tensor loss;`, `double last;`.
bool declaredEmpty(const clang::VarDecl *Var);
/// The values `Var = value` assigns in its function (a tensor's operator= too), in order.
llvm::SmallVector<const clang::Expr *, 2> assignedValues(const clang::VarDecl *Var);

/// Whether E is computed from tensors (a batch, a loss, a model's output: values that differ
/// between processes), directly or through the local variables of FunctionBody it reads
/// (their initializers and every value stored into them). What a collective of the
/// accelerator returns is the same everywhere, and so are parameters and globals.
/// Override, when given, answers first for any expression on the way (true: from tensors,
/// false: not, nothing: follow the rules).
using TensorOriginOverride = std::function<std::optional<bool>(const clang::Expr *)>;
bool computedFromTensors(const clang::Expr *E, const clang::Stmt *FunctionBody,
                         const TensorOriginOverride &Override = {});

} // namespace accel::rewrites
