// Parsing a small program against the precompiled LibTorch prelude, and running rules on it.
#pragma once

#include "accel/rewrites/Engine.h"
#include "analysis/AnalysisContext.h"

#include "clang/Frontend/ASTUnit.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace accel::test {

/// The start of a snippet: LibTorch's header and a small model `Net` (a TORCH_MODULE over one
/// Linear layer, 4 inputs), on lines 1 to 7.
extern const char *const NetModel;

/// A parsed snippet. While it lives, the analyses of its translation unit are installed, so
/// that a test can call them directly, as a rule does under the RuleRunner.
class Snippet {
public:
  explicit Snippet(std::unique_ptr<clang::ASTUnit> Parsed);
  clang::ASTContext &getASTContext() { return Unit->getASTContext(); }
  clang::DiagnosticsEngine &getDiagnostics() { return Unit->getDiagnostics(); }
  clang::SourceManager &getSourceManager() { return Unit->getSourceManager(); }
  operator clang::ASTUnit &() { return *Unit; }

private:
  std::unique_ptr<clang::ASTUnit> Unit;
  accel::rewrites::AnalysisContext::OneUnit Analyses;
  accel::rewrites::AnalysisContext::Scope Installed;
};

/// Code parsed as "input.cpp" after <torch/torch.h>; fails the test on a compile error (and
/// returns null).
std::unique_ptr<Snippet> parseSnippet(llvm::StringRef Code);
/// The declarations the snippet itself wrote (none from the prelude).
std::vector<clang::Decl *> snippetDecls(clang::ASTUnit &AST);
/// The function of that name in the snippet, or null.
const clang::FunctionDecl *functionNamed(clang::ASTUnit &AST, llvm::StringRef Name);

/// What the rules selected by Spec ("backward,device", "" for all) find in Code.
accel::rewrites::FileFindings runRules(llvm::StringRef Code, llvm::StringRef Spec);
/// Code rewritten by the rules selected by Spec.
std::string rewrite(llvm::StringRef Code, llvm::StringRef Spec);

} // namespace accel::test
