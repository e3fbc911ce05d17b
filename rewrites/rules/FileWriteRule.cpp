//===- FileWriteRule.cpp - accel-file-write -------------------------------===//
//
// File writes, renames and removals that every process would run once the program is
// launched on N processes: a CSV written N times over while another process reads it, a
// checkpoint removed before a slower process has loaded it. Where it keeps the program's
// meaning (analysis/FileWrites.h), the statement that writes runs on the main process only,
// between two accelerator.wait_for_everyone() calls; elsewhere the write is warned about with
// the guard to write by hand and the reason the tool did not. accelerator.save covers
// torch::save (accel-save). See docs/rules/accel-file-write.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/FileWrites.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingPlan.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/AST/Expr.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

/// The file trains (it has a training loop the tool plans, or an Accelerator already): only
/// then does it run on N processes. Asked only of the calls the rule is about.
AST_MATCHER(Stmt, inTrainingFile) {
  ASTContext &Ctx = Finder->getASTContext();
  return !AnalysisContext::of(Ctx).trainingPlans().Loops.empty() ||
         !match(varDecl(isExpansionInMainFile(), hasType(isAccelerator())), Ctx).empty();
}

AST_MATCHER(Stmt, onSomeProcessesOnly) {
  return runsOnSomeProcesses(&Node, Finder->getASTContext());
}

AST_MATCHER(Stmt, isGuardedStatement) {
  return AnalysisContext::of(Finder->getASTContext()).fileWrites().Guarded.count(&Node) != 0;
}

AST_MATCHER(Stmt, isUnguardedWrite) {
  std::string Why;
  return !isGuardedWrite(&Node, Finder->getASTContext(), Why);
}

/// The statement beside Guarded in its block (Step -1: before it, +1: after it) when that one
/// is guarded too, with only white space between them: the two share one guard.
bool sharesGuard(const Stmt *Guarded, int Step, ASTContext &Ctx) {
  const DynTypedNodeList Parents = Ctx.getParents(*Guarded);
  const auto *Block = Parents.empty() ? nullptr : Parents[0].get<CompoundStmt>();
  if (!Block) {
    return false;
  }
  llvm::ArrayRef<Stmt *> Body(Block->body_begin(), Block->body_end());
  auto At = llvm::find(Body, Guarded);
  if (At == Body.end() || (Step < 0 && At == Body.begin()) || (Step > 0 && At + 1 == Body.end())) {
    return false;
  }
  const Stmt *First = Step < 0 ? *(At - 1) : Guarded, *Second = Step < 0 ? Guarded : *(At + 1);
  const FileWriteGuards &Guards = AnalysisContext::of(Ctx).fileWrites();
  if (!Guards.Guarded.count(Step < 0 ? First : Second)) {
    return false;
  }
  const SourceManager &SM = Ctx.getSourceManager();
  SourceLocation End =
      Lexer::getLocForEndOfToken(SM.getExpansionLoc(First->getEndLoc()), 0, SM, Ctx.getLangOpts());
  SourceLocation Begin = SM.getExpansionLoc(Second->getBeginLoc());
  if (SM.getFileID(End) != SM.getFileID(Begin)) {
    return false;
  }
  llvm::StringRef Between =
      SM.getBufferData(SM.getFileID(Begin)).slice(SM.getFileOffset(End), SM.getFileOffset(Begin));
  return Between.ltrim(" \t;").find_first_not_of(" \t\r\n") == llvm::StringRef::npos;
}

/// The guard's lines around the statement bound to "guarded": a wait and the main-process
/// branch before it, its lines one level deeper, the branch's end and a wait after it. Guarded
/// statements next to each other share one guard; a block alone becomes the branch.
llvm::Expected<llvm::SmallVector<Edit, 1>> guardEdits(const MatchResult &Match) {
  const auto *Guarded = Match.Nodes.getNodeAs<Stmt>("guarded");
  const SourceManager &SM = *Match.SourceManager;
  const LangOptions &LangOpts = Match.Context->getLangOpts();
  llvm::SmallVector<Edit, 1> Result;
  CharSourceRange Range = Lexer::makeFileCharRange(
      CharSourceRange::getTokenRange(Guarded->getSourceRange()), SM, LangOpts);
  if (Range.isInvalid()) {
    return Result;
  }
  SourceLocation Last = Guarded->getEndLoc();
  if (!isa<CompoundStmt>(Guarded)) {
    // An expression statement ends at its semicolon.
    if (std::optional<Token> Next = Lexer::findNextToken(Last, SM, LangOpts);
        Next && Next->is(tok::semi)) {
      Last = Next->getLocation();
    }
  }
  bool AtLineStart = false;
  SourceLocation After = lineStartAfter(SM.getExpansionLoc(Last), SM, LangOpts, AtLineStart);
  SourceLocation Before = lineStartBefore(Range.getBegin(), SM);
  if (!AtLineStart || Before == Range.getBegin()) {
    return Result; // the analysis only guards statements on lines of their own
  }
  auto [FID, Begin] = SM.getDecomposedLoc(Before);
  const unsigned End = SM.getFileOffset(After);
  llvm::StringRef Data = SM.getBufferData(FID);
  const std::string Unit = indentationUnit(Data);
  const bool SharesBefore = sharesGuard(Guarded, -1, *Match.Context),
             SharesAfter = sharesGuard(Guarded, +1, *Match.Context);
  // A block of its own becomes the branch: `{` turns into `if (...) {`, its lines stay.
  if (isa<CompoundStmt>(Guarded) && !SharesBefore && !SharesAfter) {
    Result.push_back(insertionAt(Before, "accelerator.wait_for_everyone();\n"));
    Result.push_back(insertionAt(Range.getBegin(), "if (accelerator.is_main_process()) "));
    Result.push_back(insertionAt(After, "accelerator.wait_for_everyone();\n"));
    return Result;
  }
  if (!SharesBefore) {
    Result.push_back(insertionAt(
        Before, "accelerator.wait_for_everyone();\nif (accelerator.is_main_process()) {\n"));
  }
  // One level deeper (blank and preprocessor lines stay): at the start of each line, which
  // keeps a continuation line's alignment; on the first line after its indentation, since
  // the branch's lines go in at its start.
  for (unsigned Line = Begin; Line < End;) {
    unsigned Text = Line;
    while (Text < End && (Data[Text] == ' ' || Data[Text] == '\t')) {
      ++Text;
    }
    if (Text < End && Data[Text] != '\n' && Data[Text] != '\r' && Data[Text] != '#') {
      const unsigned At = Line == Begin ? Text : Line;
      Result.push_back(insertionAt(Before.getLocWithOffset(int(At) - int(Begin)), Unit));
    }
    size_t Break = Data.find('\n', Text);
    Line = Break == llvm::StringRef::npos ? End : unsigned(Break) + 1;
  }
  if (!SharesAfter) {
    Result.push_back(insertionAt(After, "}\naccelerator.wait_for_everyone();\n"));
  }
  return Result;
}

std::string message(llvm::StringRef What, llvm::StringRef Why) {
  return ("every process runs this " + What +
          " at the same time once the program is launched on several (a file written over by "
          "each, or gone before a slower process has read it), and the tool did not guard it: " +
          Why +
          ". Run it on the main process only, `if (accelerator.is_main_process()) { ... }`, "
          "with `accelerator.wait_for_everyone();` before any process reads the file")
      .str();
}

} // namespace

Rule makeFileWriteRule() {
  auto Writes = traverse(TK_IgnoreUnlessSpelledInSource,
                         stmt(fileWrite(), inUserCode(), inTrainingFile(),
                              unless(onSomeProcessesOnly()), isUnguardedWrite())
                             .bind("found"));
  auto Warning = [](const MatchResult &Match) {
    std::string Why;
    isGuardedWrite(Match.Nodes.getNodeAs<Stmt>("found"), *Match.Context, Why);
    const bool Removes = Match.Nodes.getNodeAs<Stmt>("remove") != nullptr;
    return message(Removes ? "file removal or rename" : "file write", Why);
  };
  return applyFirst<Finding>({
      makeRule(traverse(TK_IgnoreUnlessSpelledInSource,
                        stmt(isGuardedStatement(), inTrainingFile()).bind("guarded")),
               guardEdits,
               explain("guarded",
                       "this writes or removes a file: it runs on the main process only, "
                       "between two accelerator.wait_for_everyone() calls, so that no process "
                       "still reads the file when it changes and every process reads it "
                       "changed")),
      makeRule(Writes, noEdits(), finding(Finding::Warning, "found", Warning)),
  });
}

} // namespace accel::rewrites
