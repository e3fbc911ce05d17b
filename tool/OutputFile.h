//===- OutputFile.h - Writing results without partial files -----*- C++ -*-===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace accel::tool {

/// Replaces Path's contents with Contents so that no reader ever sees a partial file: the
/// text goes to a temporary file in Path's directory, which is then renamed over Path. An
/// existing file keeps its permissions, and a symbolic link keeps pointing at it. On
/// failure Path is untouched and the temporary file removed.
llvm::Error writeFileAtomically(llvm::StringRef Path, llvm::StringRef Contents);

} // namespace accel::tool
