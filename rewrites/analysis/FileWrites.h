//===- FileWrites.h - File writes run once ----------------------*- C++ -*-===//
//
// Launched on N processes, a program writes its files N times at once: a CSV written over by
// each process while another reads it back, a checkpoint removed before a slower process has
// loaded it. accel-file-write runs such a write on the main process only, between two
// `accelerator.wait_for_everyone()` calls (no process still reads the file's old content when
// it is written, and every process reads the new one), where that keeps the program's
// meaning: the statement runs once per process in the function that declares the accelerator,
// and nothing the other processes need happens in it. It changes no variable declared outside
// it, draws no random numbers (the main process's random state would differ from the
// others'), and calls nothing every process must call (a reduce, a save, a backward). A write
// in a helper function is guarded where the helper is called. This is the analysis of which
// statement guards each write, or why none can.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"
#include "clang/AST/Stmt.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <memory>
#include <string>

namespace accel::rewrites {

/// A file write (an std::ofstream opened on a path, fopen with a mode that writes), bound as
/// "write", or a removal or rename (remove, rename, std::filesystem's), bound as "remove".
clang::ast_matchers::StatementMatcher fileWrite();

struct FileWriteGuards {
  /// The statements accel-file-write runs on the main process only (none inside another).
  llvm::SmallPtrSet<const clang::Stmt *, 4> Guarded;
  /// Why a write of the main file (by where it begins) is not guarded; absent when it is.
  llvm::DenseMap<clang::SourceLocation, std::string> WhyNot;
};
/// Computes it (AnalysisContext::fileWrites() owns it).
std::unique_ptr<FileWriteGuards> analyzeFileWrites(clang::ASTContext &Ctx);

/// Whether Function writes files itself or through the main file's functions it calls that do
/// not set up training: main that does hosts the Accelerator (analysis/EntryFunction.h), so
/// that its writes can be guarded where it runs them.
bool writesFiles(const clang::FunctionDecl *Function, clang::ASTContext &Ctx);

/// Whether Write (a fileWrite() match; any instantiation of it) is run on the main process by
/// a guard; else Why says why not.
bool isGuardedWrite(const clang::Stmt *Write, clang::ASTContext &Ctx, std::string &Why);

} // namespace accel::rewrites
