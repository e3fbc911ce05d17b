//===- UnifiedDiff.h - Showing a rewrite as a patch -------------*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringRef.h"

#include <string>

namespace accel::tool {

/// A unified diff from Old to New with Context lines of context, as `diff -u` writes it,
/// headed "--- OldName" / "+++ NewName" so that `patch -p0` applies it; empty when the
/// texts are equal.
std::string unifiedDiff(llvm::StringRef OldName, llvm::StringRef NewName, llvm::StringRef Old,
                        llvm::StringRef New, unsigned Context = 3);

} // namespace accel::tool
