#include "snippet.h"

#include "engine_test_paths.h"

#include "clang/AST/ASTContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "clang/Tooling/Tooling.h"

#include <gtest/gtest.h>

namespace accel::test {

const char *const NetModel = R"cpp(#include <torch/torch.h>
struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 2))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);
)cpp";

Snippet::Snippet(std::unique_ptr<clang::ASTUnit> Parsed)
    : Unit(std::move(Parsed)), Installed(Analyses) {}

std::unique_ptr<Snippet> parseSnippet(llvm::StringRef Code) {
  std::vector<std::string> Args = {ACCEL_TEST_PRELUDE_FLAGS};
  Args.insert(Args.end(), {"-include-pch", ACCEL_TEST_PRELUDE_PCH,
                           "-resource-dir=" ACCEL_TEST_RESOURCE_DIR, "-w"});
  std::unique_ptr<clang::ASTUnit> AST =
      clang::tooling::buildASTFromCodeWithArgs(Code, Args, "input.cpp");
  EXPECT_TRUE(AST && !AST->getDiagnostics().hasErrorOccurred()) << "the snippet does not compile";
  if (!AST) {
    return nullptr;
  }
  // Matchers and parent maps see the snippet only: LibTorch's own declarations stay unread.
  AST->getASTContext().setTraversalScope(snippetDecls(*AST));
  return std::make_unique<Snippet>(std::move(AST));
}

std::vector<clang::Decl *> snippetDecls(clang::ASTUnit &AST) {
  // Declarations parsed here, not read back from the precompiled prelude.
  std::vector<clang::Decl *> Decls;
  for (clang::Decl *D : AST.getASTContext().getTranslationUnitDecl()->noload_decls()) {
    if (AST.getSourceManager().isWrittenInMainFile(
            AST.getSourceManager().getExpansionLoc(D->getLocation()))) {
      Decls.push_back(D);
    }
  }
  return Decls;
}

const clang::FunctionDecl *functionNamed(clang::ASTUnit &AST, llvm::StringRef Name) {
  using namespace clang::ast_matchers;
  auto Found = match(functionDecl(hasName(Name), isDefinition()).bind("f"), AST.getASTContext());
  return Found.empty() ? nullptr : Found.front().getNodeAs<clang::FunctionDecl>("f");
}

accel::rewrites::FileFindings runRules(llvm::StringRef Code, llvm::StringRef Spec) {
  std::unique_ptr<Snippet> AST = parseSnippet(Code);
  if (!AST) {
    return {};
  }
  llvm::Expected<std::vector<accel::rewrites::RuleInfo>> Rules =
      accel::rewrites::selectRules(Spec, accel::rewrites::allRules());
  EXPECT_TRUE(bool(Rules));
  if (!Rules) {
    llvm::consumeError(Rules.takeError());
    return {};
  }
  accel::rewrites::RuleRunner Runner(*Rules);
  Runner.match(AST->getASTContext(), snippetDecls(*AST));
  return Runner.finish("input.cpp");
}

std::string rewrite(llvm::StringRef Code, llvm::StringRef Spec) {
  accel::rewrites::FileFindings Found = runRules(Code, Spec);
  clang::tooling::Replacements Composed;
  return accel::rewrites::applyEdits("input.cpp", Code, Found.Edits, Composed);
}

} // namespace accel::test
