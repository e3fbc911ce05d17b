//===- RewriteFile.cpp - Parsing one input for the rule engine --------===//
#include "RewriteFile.h"
#include "PreambleBounds.h"

#include "accel/rewrites/Engine.h"

#include "clang/Basic/SourceManager.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

namespace accel::tool {
namespace {

using accel::rewrites::RuleInfo;

/// Runs Sema over the whole translation unit (so the main file's template instantiation
/// errors count, as in a real build; a cached preamble has skipped header function bodies),
/// runs the rules over its AST and rewrites the main file.
class RewriteAction : public clang::ASTFrontendAction {
public:
  RewriteAction(llvm::ArrayRef<RuleInfo> Rules, FileRewrite &Result)
      : Runner(Rules), Result(Result) {}

protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance &Compiler,
                                                        llvm::StringRef) override {
    return Runner.makeConsumer(Compiler.getSourceManager());
  }

  void EndSourceFileAction() override {
    const clang::SourceManager &SM = getCompilerInstance().getSourceManager();
    Result.Original = SM.getBufferData(SM.getMainFileID()).str();
    if (getCompilerInstance().getDiagnostics().hasErrorOccurred()) {
      return;
    }
    clang::ASTContext &Ctx = getCompilerInstance().getASTContext();
    // LibTorch's namespaces: torch (the C++ API), at (ATen) and c10 (its core).
    for (llvm::StringRef Namespace : {"torch", "at", "c10"}) {
      for (const clang::NamedDecl *Found :
           Ctx.getTranslationUnitDecl()->lookup(&Ctx.Idents.get(Namespace))) {
        Result.UsesLibTorch = Result.UsesLibTorch || clang::isa<clang::NamespaceDecl>(Found);
      }
    }
    llvm::StringRef FileName = SM.getFileEntryRefForID(SM.getMainFileID())->getName();
    accel::rewrites::FileFindings Found = Runner.finish(FileName);
    for (const RuleFinding &Finding : Found.Findings) {
      if (!Finding.Rewrite) {
        Result.Warnings.push_back(accel::rewrites::warningLine(Finding));
      }
    }
    Result.Declined = Found.Declined;
    Result.Findings = std::move(Found.Findings);
    Result.ToolWarnings = std::move(Found.ToolWarnings);
    Result.Warnings.insert(Result.Warnings.end(), Result.ToolWarnings.begin(),
                           Result.ToolWarnings.end());
    Result.Rewritten =
        accel::rewrites::applyEdits(FileName, Result.Original, Found.Edits, Result.Replacements);
  }

private:
  accel::rewrites::RuleRunner Runner;
  FileRewrite &Result;
};

class RewriteFactory : public clang::tooling::FrontendActionFactory {
public:
  RewriteFactory(llvm::ArrayRef<RuleInfo> Rules, FileRewrite &Result, PreambleCache *Preambles)
      : Rules(Rules), Result(Result), Preambles(Preambles) {}
  std::unique_ptr<clang::FrontendAction> create() override {
    return std::make_unique<RewriteAction>(Rules, Result);
  }

  /// Parses with the cached preamble when there is one; a parse that fails with it is
  /// repeated without, so that what clang reports never depends on the cache.
  bool runInvocation(std::shared_ptr<clang::CompilerInvocation> Invocation,
                     clang::FileManager *Files,
                     std::shared_ptr<clang::PCHContainerOperations> PCHContainerOps,
                     clang::DiagnosticConsumer *Diagnostics) override {
    // No "N errors generated." line: clang writes it straight to stderr, ahead of the
    // diagnostics the caller prints from its capture (and once more for a parse repeated
    // without the preamble); the tool says itself that the file has compile errors.
    Invocation->getDiagnosticOpts().ShowCarets = false;
    if (Preambles && Invocation->getFrontendOpts().Inputs.size() == 1) {
      llvm::StringRef MainFile = Invocation->getFrontendOpts().Inputs[0].getFile();
      auto Text = Files->getVirtualFileSystem().getBufferForFile(MainFile);
      if (Text) {
        clang::PreambleBounds Bounds =
            cachedPreambleBounds(Invocation->getLangOpts(), (*Text)->getMemBufferRef());
        std::shared_ptr<const Preamble> Built = Preambles->get(
            *Invocation, (*Text)->getBuffer(), Bounds, Files->getVirtualFileSystemPtr(),
            PCHContainerOps, Result.PreambleOrigin, Result.PreambleNote);
        if (Built) {
          auto WithPreamble = std::make_shared<clang::CompilerInvocation>(*Invocation);
          auto FS =
              PreambleCache::use(*Built, Bounds, *WithPreamble, Files->getVirtualFileSystemPtr());
          auto PreambleFiles =
              llvm::makeIntrusiveRefCnt<clang::FileManager>(Files->getFileSystemOpts(), FS);
          clang::DiagnosticConsumer Counter; // counts errors, prints nothing
          if (FrontendActionFactory::runInvocation(WithPreamble, PreambleFiles.get(),
                                                   PCHContainerOps, &Counter) &&
              Counter.getNumErrors() == 0) {
            return true;
          }
          std::string Note = Result.PreambleNote + "; the parse with it failed, so parsed without";
          Result = FileRewrite();
          Result.PreambleNote = std::move(Note);
        }
      }
    }
    return FrontendActionFactory::runInvocation(std::move(Invocation), Files,
                                                std::move(PCHContainerOps), Diagnostics);
  }

private:
  llvm::ArrayRef<RuleInfo> Rules;
  FileRewrite &Result;
  PreambleCache *Preambles;
};

// A build's clang precompiled header (CMake passes `-Xclang -include-pch -Xclang F.pch`
// beside `-Xclang -include -Xclang F.hxx`) may come from another clang than the one this tool
// links, which refuses it, or not be built yet. The header it was made from is still included,
// so dropping it changes nothing but speed, and the preamble cache gives that back.
clang::tooling::CommandLineArguments
withoutClangPrecompiledHeader(const clang::tooling::CommandLineArguments &Args,
                              llvm::StringRef /*File*/) {
  clang::tooling::CommandLineArguments Kept;
  for (size_t I = 0; I < Args.size(); ++I) {
    const bool ThroughXclang = Args[I] == "-Xclang" && I + 3 < Args.size() &&
                               Args[I + 1] == "-include-pch" && Args[I + 2] == "-Xclang";
    if (ThroughXclang) {
      I += 3;
      continue;
    }
    if (Args[I] == "-include-pch" && I + 1 < Args.size()) {
      ++I;
      continue;
    }
    if (llvm::StringRef(Args[I]).starts_with("-include-pch=")) {
      continue;
    }
    Kept.push_back(Args[I]);
  }
  return Kept;
}

} // namespace

std::optional<FileRewrite> rewriteFile(const clang::tooling::CompilationDatabase &Compilations,
                                       llvm::StringRef File, llvm::StringRef ResourceDir,
                                       llvm::ArrayRef<RuleInfo> Rules, std::string &ClangOutput,
                                       PreambleCache *Preambles,
                                       std::optional<llvm::StringRef> Contents) {
  clang::tooling::ClangTool Tool(Compilations, {File.str()});
  if (Contents) {
    Tool.mapVirtualFile(File, *Contents);
  }
  llvm::raw_string_ostream Captured(ClangOutput);
  clang::DiagnosticOptions DiagnosticOptions;
#if LLVM_VERSION_MAJOR >= 21
  clang::TextDiagnosticPrinter Printer(Captured, DiagnosticOptions);
#else
  clang::TextDiagnosticPrinter Printer(Captured, &DiagnosticOptions);
#endif
  Tool.setDiagnosticConsumer(&Printer);
  // ClangTool would derive the resource dir from this executable's path, which is wrong
  // outside LLVM's own bin/ (see ResourceDir.h); it keeps one that is already given. Last,
  // so that it also beats one a compile_commands.json names for a different clang.
  // -w: the tool reports its own findings, not the compiler's warnings, and a build's -Werror
  // (or its GCC precompiled header, which clang ignores with a warning) must not fail it.
  Tool.appendArgumentsAdjuster(clang::tooling::getInsertArgumentAdjuster(
      {("-resource-dir=" + ResourceDir).str(), "-w"}, clang::tooling::ArgumentInsertPosition::END));
  Tool.appendArgumentsAdjuster(withoutClangPrecompiledHeader);
  Tool.setPrintErrorMessage(false); // The caller reports the failure its own way.

  FileRewrite Result;
  RewriteFactory Factory(Rules, Result, Preambles);
  if (Tool.run(&Factory) != 0) {
    return std::nullopt;
  }
  return Result;
}

} // namespace accel::tool
