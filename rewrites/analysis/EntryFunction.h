//===- EntryFunction.h - main declares the Accelerator ----------*- C++ -*-===//
//
// The Accelerator belongs where the program starts. When training is set up in a function
// that main calls (`double train(...)` creating the model and optimizer), an Accelerator
// declared there would leave main's own prints, saves and file writes to every process:
// "starting" and "final loss" printed N times, a data file written N times at once. So when
// main prints, saves or writes files, main declares the Accelerator and the setup functions it
// calls get it as their first parameter (accel-accelerator), like any helper. (Several
// Accelerators one after the other share the process group, so a main that only calls setup
// functions keeps theirs.)
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Decl.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <memory>

namespace accel::rewrites {

struct EntryHosting {
  /// main, when it declares the Accelerator for the setup functions it calls; else null.
  const clang::FunctionDecl *Main = nullptr;
  /// Those setup functions (canonical declarations): plain functions of the main file,
  /// without an Accelerator, that only main calls.
  llvm::SmallPtrSet<const clang::FunctionDecl *, 4> Hosted;
};

/// Computes it (AnalysisContext::entryHosting() owns it).
std::unique_ptr<EntryHosting> analyzeEntryHosting(clang::ASTContext &Ctx);

} // namespace accel::rewrites
