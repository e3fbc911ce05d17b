// Parsing a small program against the precompiled LibTorch prelude, and running rules on it.
#pragma once

#include "accel/rewrites/Engine.h"

#include "clang/Frontend/ASTUnit.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace accel::test {

/// The start of a snippet: LibTorch's header and a small model `Net` (a TORCH_MODULE over one
/// Linear layer, 4 inputs), on lines 1 to 7.
extern const char *const NetModel;

/// Code parsed as "input.cpp" after <torch/torch.h>; fails the test on a compile error.
std::unique_ptr<clang::ASTUnit> parseSnippet(llvm::StringRef Code);
/// The declarations the snippet itself wrote (none from the prelude).
std::vector<clang::Decl *> snippetDecls(clang::ASTUnit &AST);
/// The function of that name in the snippet, or null.
const clang::FunctionDecl *functionNamed(clang::ASTUnit &AST, llvm::StringRef Name);

/// What the rules selected by Spec ("backward,device", "" for all) find in Code.
accel::rewrites::FileFindings runRules(llvm::StringRef Code, llvm::StringRef Spec);
/// Code rewritten by the rules selected by Spec.
std::string rewrite(llvm::StringRef Code, llvm::StringRef Spec);

} // namespace accel::test
