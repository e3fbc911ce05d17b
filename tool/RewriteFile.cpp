//===- RewriteFile.cpp - Running clang over one input ---------------------===//
#include "RewriteFile.h"

#include "clang/AST/ASTConsumer.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"

namespace accel::tool {
namespace {

/// Runs Sema over the whole translation unit (so template instantiation errors count, as
/// in a real build) and keeps the main file's text.
class ReadMainFileAction : public clang::ASTFrontendAction {
public:
  explicit ReadMainFileAction(std::string &Text) : Text(Text) {}

protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance &,
                                                        llvm::StringRef) override {
    return std::make_unique<clang::ASTConsumer>();
  }

  void EndSourceFileAction() override {
    const clang::SourceManager &SM = getCompilerInstance().getSourceManager();
    Text = SM.getBufferData(SM.getMainFileID()).str();
  }

private:
  std::string &Text;
};

class ReadMainFileFactory : public clang::tooling::FrontendActionFactory {
public:
  explicit ReadMainFileFactory(std::string &Text) : Text(Text) {}
  std::unique_ptr<clang::FrontendAction> create() override {
    return std::make_unique<ReadMainFileAction>(Text);
  }

private:
  std::string &Text;
};

} // namespace

std::optional<FileRewrite> rewriteFile(const clang::tooling::CompilationDatabase &Compilations,
                                       llvm::StringRef File, llvm::StringRef ResourceDir) {
  clang::tooling::ClangTool Tool(Compilations, {File.str()});
  // ClangTool would derive the resource dir from this executable's path, which is wrong
  // outside LLVM's own bin/ (see ResourceDir.h); it keeps one that is already given. Last,
  // so that it also beats one a compile_commands.json names for a different clang.
  Tool.appendArgumentsAdjuster(clang::tooling::getInsertArgumentAdjuster(
      {("-resource-dir=" + ResourceDir).str()}, clang::tooling::ArgumentInsertPosition::END));
  Tool.setPrintErrorMessage(false); // The caller reports the failure its own way.

  FileRewrite Result;
  ReadMainFileFactory Factory(Result.Original);
  if (Tool.run(&Factory) != 0) {
    return std::nullopt;
  }
  Result.Rewritten = Result.Original;
  return Result;
}

} // namespace accel::tool
