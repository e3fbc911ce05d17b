//===- SequenceBatches.h - Batches that are parts of sequences -*- C++ -*-===//
//
// Sharing a loop's batches among processes assumes that each batch stands alone and that the
// rows a loop cuts are samples. Sequence models break both.
//
// Truncated backpropagation through time, stateful recurrent models: the loop keeps a tensor
// across iterations and feeds it to the model with the next batch,
//
//   auto h = torch::zeros({1, streams, hidden});
//   for (int64_t i = 0; i + bptt < n; i += bptt) {
//     h = h.detach();
//     auto [logits, state] = model->forward(data.narrow(0, i, bptt), {h, c});
//     h = std::get<0>(state);
//
// so each batch depends on the one before it. Sharing the batches among processes cuts that
// chain: each process would carry its state through other batches (and, with split_batches,
// through other parts of each). Such a loop is declined, whatever its batch source.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/Stmt.h"
#include "llvm/ADT/ArrayRef.h"

#include <optional>

namespace accel::rewrites {

struct CarriedState {
  /// The tensor (or tuple or container of tensors) declared before the loop.
  const clang::VarDecl *Var = nullptr;
  /// Where the loop gives it to a module (`model->forward(x, h)`, `model(x, h)`).
  const clang::Stmt *Used = nullptr;
};

/// A tensor that Loop's body both changes and passes to a module's forward, declared outside
/// the loop; none when there is no such tensor.
std::optional<CarriedState> carriedState(const clang::Stmt *Loop, clang::ASTContext &Ctx);

/// The module class of a model type: the class itself, a holder's Impl (TORCH_MODULE's too),
/// a shared_ptr's pointee.
const clang::CXXRecordDecl *moduleClassOf(clang::QualType Type);

/// A tensor member that a model's class assigns in its own methods (`state_ = h.detach();` in
/// forward) and reads again: a recurrent state kept in the model across batches, which
/// sharing the batches would break as a carried local does. The first such member of the
/// first model among Models that has one (to three levels of member modules); null if none.
const clang::FieldDecl *stateKeptInModel(llvm::ArrayRef<const clang::VarDecl *> Models,
                                         const clang::VarDecl *&Model, clang::ASTContext &Ctx);

/// The first model among Models that holds, as the model or as a member (to three levels), a
/// recurrent module (torch::nn::LSTM, GRU or RNN) not built with batch_first(true), a cell
/// (LSTMCell, GRUCell, RNNCell: the forward that steps it may take time first), or an
/// attention module (Transformer, its encoder and decoder and their layers,
/// MultiheadAttention: LibTorch's have no batch_first): such a module reads dimension 0 of its
/// input as time, so the rows a loop cuts with its counter may be
/// time steps, which split_batches would divide among the processes. Null when none does.
const clang::VarDecl *sequenceFirstModel(llvm::ArrayRef<const clang::VarDecl *> Models,
                                         clang::ASTContext &Ctx);

} // namespace accel::rewrites
