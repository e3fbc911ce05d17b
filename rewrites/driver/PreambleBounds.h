//===- PreambleBounds.h - Which part of a file's include block is precompiled -*- C++ -*-===//
//
// clang's preamble is every directive at the top of a file. Programs differ in the standard
// headers they list after <torch/torch.h> (and a rewrite adds <accelerate/accelerate.h>), so
// a cache keyed on the whole block held one 90 MB entry per program. The part worth
// precompiling is LibTorch's headers: the cache builds the block up to the last LibTorch
// #include, and the directives after it are parsed with the file (LibTorch's headers have
// already included most of them). docs/design.md ("The preamble cache") has the numbers.
//
//===----------------------------------------------------------------------------===//
#pragma once

#include "clang/Basic/LangOptions.h"
#include "clang/Lex/Lexer.h"
#include "llvm/Support/MemoryBufferRef.h"

namespace accel::tool {

/// The bounds of MainText's preamble that the cache precompiles: up to the end of the line of
/// the last #include of a LibTorch header (torch/, ATen/, c10/, caffe2/) that is outside any
/// #if and not followed on its line by a block comment; the whole preamble when there is no
/// such #include.
clang::PreambleBounds cachedPreambleBounds(const clang::LangOptions &LangOpts,
                                           llvm::MemoryBufferRef MainText);

} // namespace accel::tool
