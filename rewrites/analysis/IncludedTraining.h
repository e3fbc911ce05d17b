//===- IncludedTraining.h - Training in the headers a file includes -*- C++ -*-===//
//
// accel-rewrite edits only the file it is given. When a project header that file includes
// trains (calls backward), that training would run unchanged on every process: each would
// train its own copy on all the data. The rewrite must not pass in silence then. This finds
// such headers: those of the translation unit that are not system headers and not LibTorch's,
// scanned token by token (comments and strings skipped; their function bodies may not be in
// the AST, which a precompiled preamble builds without them).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/Basic/SourceLocation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace accel::rewrites {

struct IncludedTraining {
  std::string Header;            // its path, as the compiler opened it
  unsigned Line = 0, Column = 0; // its first backward call
  clang::SourceLocation Include; // the main file's #include that brings it in (maybe invalid)
};

/// The project headers of Ctx's translation unit that call backward (`x.backward(` or
/// `torch::autograd::backward(`; not `accelerator.backward(`), in include order.
llvm::SmallVector<IncludedTraining, 2> trainingInIncludedHeaders(clang::ASTContext &Ctx);

} // namespace accel::rewrites
