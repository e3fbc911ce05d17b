//===- RewriteFile.cpp - Running clang and the rules over one input -------===//
#include "RewriteFile.h"

#include "clang/AST/ASTConsumer.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Format/Format.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/FrontendAction.h"
#include "clang/Frontend/PrecompiledPreamble.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/Lex/Lexer.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "clang/Tooling/Core/Replacement.h"
#include "clang/Tooling/Tooling.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>
#include <tuple>

namespace accel::tool {
namespace {

using accel::rewrites::Finding;
using accel::rewrites::RuleInfo;
using accel::tool::FixEdit;
using accel::tool::RuleFinding;
using clang::ast_matchers::MatchFinder;

/// One edit of the main file, by offset.
struct TextEdit {
  unsigned Offset = 0;
  unsigned Length = 0;
  std::string Text;
  size_t RuleIndex = 0;
  bool operator<(const TextEdit &Other) const {
    return std::tie(Offset, Length, RuleIndex, Text) <
           std::tie(Other.Offset, Other.Length, Other.RuleIndex, Other.Text);
  }
};

/// What the rules found in one file.
struct Collected {
  std::set<TextEdit> Edits;
  /// Keyed by position, rule and message: a node matched twice is reported once.
  std::map<std::tuple<unsigned, unsigned, std::string, std::string>, RuleFinding> Findings;
};

/// Runs one rule's cases on each match, as tooling::Transformer does, but keeps the
/// metadata (the Finding) of matches without edits: those are the warnings.
class RuleCallback : public MatchFinder::MatchCallback {
public:
  RuleCallback(const RuleInfo &Info, size_t Index, Collected &Out)
      : Info(Info), Index(Index), Rule(Info.Build()), Out(Out) {}

  void registerWith(MatchFinder &Finder) {
    for (const clang::ast_matchers::internal::DynTypedMatcher &Matcher :
         clang::transformer::detail::buildMatchers(Rule)) {
      Finder.addDynamicMatcher(Matcher, this);
    }
  }

  void run(const MatchFinder::MatchResult &Match) override {
    const clang::SourceManager &SM = *Match.SourceManager;
    size_t Case = clang::transformer::detail::findSelectedCase(Match, Rule);
    llvm::Expected<Finding> Note = Rule.Metadata[Case]->eval(Match);
    if (!Note) {
      warn(SM, clang::transformer::detail::getRuleMatchLoc(Match),
           "internal error: " + llvm::toString(Note.takeError()));
      return;
    }
    if (Note->Kind == Finding::Warning) {
      warn(SM, Note->Loc, Note->Message);
      return;
    }
    // No edits inside macro expansions: the macro's other uses would change too.
    auto Root = Match.Nodes.getMap().find(clang::transformer::RootID);
    if (Root != Match.Nodes.getMap().end()) {
      clang::SourceRange Range = Root->second.getSourceRange();
      if (Range.getBegin().isMacroID() || Range.getEnd().isMacroID()) {
        clang::SourceLocation Spelled = Range.getBegin();
        llvm::StringRef Macro =
            clang::Lexer::getImmediateMacroName(Spelled, SM, Match.Context->getLangOpts());
        warn(SM, Spelled,
             "not rewritten: this is inside the expansion of macro '" + Macro.str() +
                 "'; make the edit by hand (" + Note->Message + ")");
        return;
      }
    }
    llvm::Expected<llvm::SmallVector<clang::transformer::Edit, 1>> Edits =
        Rule.Cases[Case].Edits(Match);
    if (!Edits) {
      warn(SM, Note->Loc, "internal error: " + llvm::toString(Edits.takeError()));
      return;
    }
    RuleFinding Found = finding(SM, Note->Loc, Note->Message, /*Rewrite=*/true);
    for (const clang::transformer::Edit &Edit : *Edits) {
      if (Edit.Kind != clang::transformer::EditKind::Range) {
        continue;
      }
      clang::CharSourceRange Range = Edit.Range;
      if (Range.isTokenRange()) {
        Range = clang::Lexer::makeFileCharRange(Range, SM, Match.Context->getLangOpts());
      }
      if (Range.isInvalid() || Range.getBegin().isMacroID() || Range.getEnd().isMacroID() ||
          !SM.isWrittenInMainFile(Range.getBegin())) {
        continue; // Only the main file is rewritten.
      }
      unsigned Begin = SM.getFileOffset(Range.getBegin());
      unsigned End = SM.getFileOffset(Range.getEnd());
      Out.Edits.insert({Begin, End - Begin, Edit.Replacement, Index});
      FixEdit Fix;
      Fix.Offset = Begin;
      Fix.Length = End - Begin;
      Fix.Text = Edit.Replacement;
      Fix.BeginLine = SM.getSpellingLineNumber(Range.getBegin());
      Fix.BeginColumn = SM.getSpellingColumnNumber(Range.getBegin());
      Fix.EndLine = SM.getSpellingLineNumber(Range.getEnd());
      Fix.EndColumn = SM.getSpellingColumnNumber(Range.getEnd());
      Found.Fix.push_back(std::move(Fix));
    }
    if (!Found.Fix.empty()) {
      record(std::move(Found));
    }
  }

private:
  RuleFinding finding(const clang::SourceManager &SM, clang::SourceLocation Loc,
                      const std::string &Message, bool Rewrite) const {
    RuleFinding Found;
    Found.Rule = Info.Name.str();
    Found.Rewrite = Rewrite;
    Found.Message = Message;
    if (Loc.isValid()) {
      clang::PresumedLoc Presumed = SM.getPresumedLoc(SM.getExpansionLoc(Loc));
      Found.File = Presumed.getFilename();
      Found.Line = Presumed.getLine();
      Found.Column = Presumed.getColumn();
    }
    return Found;
  }

  void record(RuleFinding Found) {
    auto Key = std::make_tuple(Found.Line, Found.Column, Found.Rule, Found.Message);
    Out.Findings.emplace(std::move(Key), std::move(Found));
  }

  void warn(const clang::SourceManager &SM, clang::SourceLocation Loc, const std::string &Message) {
    record(finding(SM, Loc, Message, /*Rewrite=*/false));
  }

  const RuleInfo &Info;
  size_t Index;
  accel::rewrites::Rule Rule;
  Collected &Out;
};

/// "file:line:col: warning: message [accel-rule]", as clang prints a warning.
std::string warningLine(const RuleFinding &Found) {
  std::string Text;
  if (!Found.File.empty()) {
    Text =
        Found.File + ":" + std::to_string(Found.Line) + ":" + std::to_string(Found.Column) + ": ";
  }
  return Text + "warning: " + Found.Message + " [" + Found.Rule + "]";
}

/// Merges the edits into Replacements: duplicates (the same edit found twice) once, two
/// insertions at one place in rule order, and an edit overlapping an earlier one dropped
/// with a warning.
clang::tooling::Replacements merge(const std::set<TextEdit> &Edits, llvm::StringRef FileName,
                                   std::vector<std::string> &Warnings) {
  std::vector<TextEdit> Sorted(Edits.begin(), Edits.end());
  llvm::stable_sort(Sorted, [](const TextEdit &A, const TextEdit &B) {
    return std::tie(A.Offset, A.Length, A.RuleIndex) < std::tie(B.Offset, B.Length, B.RuleIndex);
  });
  std::vector<TextEdit> Merged;
  for (const TextEdit &Edit : Sorted) {
    if (!Merged.empty()) {
      TextEdit &Last = Merged.back();
      if (Last.Offset == Edit.Offset && Last.Length == Edit.Length && Last.Text == Edit.Text) {
        continue;
      }
      if (Last.Offset == Edit.Offset && Last.Length == 0 && Edit.Length == 0) {
        Last.Text += Edit.Text;
        continue;
      }
      if (Edit.Offset < Last.Offset + Last.Length ||
          (Edit.Offset == Last.Offset && Last.Length == 0)) {
        if (Edit.Offset == Last.Offset && Last.Length == 0) {
          // An insertion before a replacement at the same place: keep both.
          Last.Length = Edit.Length;
          Last.Text += Edit.Text;
          continue;
        }
        Warnings.push_back(FileName.str() +
                           ": warning: two rules edit overlapping text at "
                           "offset " +
                           std::to_string(Edit.Offset) + "; the later edit was dropped");
        continue;
      }
    }
    Merged.push_back(Edit);
  }
  clang::tooling::Replacements Result;
  for (const TextEdit &Edit : Merged) {
    if (llvm::Error Error = Result.add(
            clang::tooling::Replacement(FileName, Edit.Offset, Edit.Length, Edit.Text))) {
      Warnings.push_back(FileName.str() + ": warning: " + llvm::toString(std::move(Error)));
    }
  }
  return Result;
}

/// Applies the replacements, then formats only the text they inserted (without the line
/// breaks around it) with the file's style, so that the lines around an edit stay as the user
/// wrote them.
std::string applyFormatted(llvm::StringRef FileName, llvm::StringRef Code,
                           const clang::tooling::Replacements &Replaces,
                           clang::tooling::Replacements &Composed) {
  Composed = Replaces;
  llvm::Expected<std::string> Applied = clang::tooling::applyAllReplacements(Code, Replaces);
  if (!Applied) {
    llvm::consumeError(Applied.takeError());
    Composed = clang::tooling::Replacements();
    return Code.str();
  }
  llvm::Expected<clang::format::FormatStyle> Style =
      clang::format::getStyle("file", FileName, "LLVM", Code);
  clang::format::FormatStyle Chosen = clang::format::getLLVMStyle();
  if (Style) {
    Chosen = *Style;
  } else {
    llvm::consumeError(Style.takeError());
  }
  std::vector<clang::tooling::Range> Ranges;
  long Delta = 0;
  for (const clang::tooling::Replacement &R : Replaces) {
    llvm::StringRef Text = R.getReplacementText();
    unsigned Start = unsigned(long(R.getOffset()) + Delta);
    Delta += long(Text.size()) - long(R.getLength());
    size_t Leading = Text.find_first_not_of(" \t\r\n");
    if (Leading == llvm::StringRef::npos) {
      continue; // A removal: nothing new to format.
    }
    size_t Trailing = Text.find_last_not_of(" \t\r\n");
    Ranges.emplace_back(Start + Leading, unsigned(Trailing + 1 - Leading));
  }
  if (Ranges.empty()) {
    return *Applied;
  }
  clang::tooling::Replacements Formatting =
      clang::format::reformat(Chosen, *Applied, Ranges, FileName);
  llvm::Expected<std::string> Formatted =
      clang::tooling::applyAllReplacements(*Applied, Formatting);
  if (!Formatted) {
    llvm::consumeError(Formatted.takeError());
    return *Applied;
  }
  Composed = Replaces.merge(Formatting);
  return *Formatted;
}

/// Runs the matchers over the main file's declarations only (with their template
/// instantiations), as clangd does: the headers' declarations are no rule's business, and
/// walking them would read the whole precompiled preamble back. The translation unit itself
/// is matched too (accel-include matches it).
class MainFileMatcher : public clang::ASTConsumer {
public:
  MainFileMatcher(MatchFinder &Finder, const clang::SourceManager &SM) : Finder(Finder), SM(SM) {}

  bool HandleTopLevelDecl(clang::DeclGroupRef Group) override {
    for (clang::Decl *D : Group) {
      if (SM.isWrittenInMainFile(SM.getExpansionLoc(D->getLocation()))) {
        TopLevel.push_back(D);
      }
    }
    return true;
  }

  void HandleTranslationUnit(clang::ASTContext &Ctx) override {
    Ctx.setTraversalScope(TopLevel);
    Finder.matchAST(Ctx);
    Finder.match(*Ctx.getTranslationUnitDecl(), Ctx);
  }

private:
  MatchFinder &Finder;
  const clang::SourceManager &SM;
  std::vector<clang::Decl *> TopLevel;
};

/// Runs Sema over the whole translation unit (so the main file's template instantiation
/// errors count, as in a real build; a cached preamble has skipped header function bodies),
/// runs the rules over its AST and rewrites the main file.
class RewriteAction : public clang::ASTFrontendAction {
public:
  RewriteAction(llvm::ArrayRef<RuleInfo> Rules, FileRewrite &Result)
      : Rules(Rules), Result(Result) {
    for (size_t I = 0; I < Rules.size(); ++I) {
      auto &Out = Rules[I].OnlyWithOtherEdits ? Companions : Primary;
      Callbacks.push_back(std::make_unique<RuleCallback>(Rules[I], I, Out));
      Callbacks.back()->registerWith(Finder);
    }
  }

protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance &Compiler,
                                                        llvm::StringRef) override {
    return std::make_unique<MainFileMatcher>(Finder, Compiler.getSourceManager());
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
    std::set<TextEdit> Edits = Primary.Edits;
    if (!Edits.empty()) {
      Edits.insert(Companions.Edits.begin(), Companions.Edits.end());
    }
    auto Findings = Primary.Findings;
    for (const auto &[Key, Found] : Companions.Findings) {
      if (!Found.Rewrite || !Primary.Edits.empty()) {
        Findings.emplace(Key, Found);
      }
    }
    for (auto &[Key, Found] : Findings) {
      if (!Found.Rewrite) {
        Result.Warnings.push_back(warningLine(Found));
      }
      Result.Findings.push_back(std::move(Found));
    }
    llvm::StringRef FileName = SM.getFileEntryRefForID(SM.getMainFileID())->getName();
    clang::tooling::Replacements Replaces = merge(Edits, FileName, Result.ToolWarnings);
    Result.Warnings.insert(Result.Warnings.end(), Result.ToolWarnings.begin(),
                           Result.ToolWarnings.end());
    Result.Rewritten =
        Replaces.empty() ? Result.Original
                         : applyFormatted(FileName, Result.Original, Replaces, Result.Replacements);
  }

private:
  llvm::ArrayRef<RuleInfo> Rules;
  FileRewrite &Result;
  MatchFinder Finder;
  Collected Primary, Companions;
  std::vector<std::unique_ptr<RuleCallback>> Callbacks;
};

/// Counts what clang reports, and drops it.
class DiagnosticCounter : public clang::DiagnosticConsumer {};

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
    if (Preambles && Invocation->getFrontendOpts().Inputs.size() == 1) {
      llvm::StringRef MainFile = Invocation->getFrontendOpts().Inputs[0].getFile();
      auto Text = Files->getVirtualFileSystem().getBufferForFile(MainFile);
      if (Text) {
        clang::PreambleBounds Bounds = clang::ComputePreambleBounds(
            Invocation->getLangOpts(), (*Text)->getMemBufferRef(), /*MaxLines=*/0);
        std::shared_ptr<const Preamble> Built = Preambles->get(
            *Invocation, (*Text)->getBuffer(), Bounds, Files->getVirtualFileSystemPtr(),
            PCHContainerOps, Result.PreambleOrigin, Result.PreambleNote);
        if (Built) {
          auto WithPreamble = std::make_shared<clang::CompilerInvocation>(*Invocation);
          auto FS =
              PreambleCache::use(*Built, Bounds, *WithPreamble, Files->getVirtualFileSystemPtr());
          auto PreambleFiles =
              llvm::makeIntrusiveRefCnt<clang::FileManager>(Files->getFileSystemOpts(), FS);
          DiagnosticCounter Counter;
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
  Tool.setPrintErrorMessage(false); // The caller reports the failure its own way.

  FileRewrite Result;
  RewriteFactory Factory(Rules, Result, Preambles);
  if (Tool.run(&Factory) != 0) {
    return std::nullopt;
  }
  return Result;
}

} // namespace accel::tool
