//===- RuleRunner.cpp - Matches of the rules, as findings and edits -------===//
#include "accel/rewrites/Engine.h"

#include "analysis/AnalysisContext.h"
#include "analysis/TrainingPlan.h"

#include "clang/AST/ASTContext.h"
#include "clang/Lex/Lexer.h"
#include "clang/Tooling/Transformer/RewriteRule.h"
#include "llvm/ADT/STLExtras.h"

#include <iterator>
#include <optional>

namespace accel::rewrites {

using clang::ast_matchers::MatchFinder;

/// Forwards one rule's matches to the runner.
class RuleRunner::Callback : public MatchFinder::MatchCallback {
public:
  Callback(RuleRunner &Runner, size_t RuleIndex) : Runner(Runner), RuleIndex(RuleIndex) {}
  void run(const MatchFinder::MatchResult &Match) override { Runner.collect(RuleIndex, Match); }

private:
  RuleRunner &Runner;
  size_t RuleIndex;
};

/// The analyses of the unit being matched, and their installation for a whole unit.
class RuleRunner::Analyses {
public:
  AnalysisContext::OneUnit Owner;
  std::optional<AnalysisContext::Scope> WholeUnit;
};

RuleRunner::RuleRunner(llvm::ArrayRef<RuleInfo> Selected)
    : Rules(Selected.begin(), Selected.end()), UnitAnalyses(std::make_unique<Analyses>()) {
  for (size_t I = 0; I < Rules.size(); ++I) {
    Built.push_back(Rules[I].Build());
    Callbacks.push_back(std::make_unique<Callback>(*this, I));
    registerMatchers(I, Finder, Callbacks.back().get());
  }
}

RuleRunner::~RuleRunner() = default;

void RuleRunner::beginTranslationUnit() {
  UnitAnalyses->WholeUnit.reset();
  UnitAnalyses->Owner.reset();
  UnitAnalyses->WholeUnit.emplace(UnitAnalyses->Owner);
}

void RuleRunner::endTranslationUnit() { UnitAnalyses->WholeUnit.reset(); }

void RuleRunner::registerMatchers(size_t RuleIndex, MatchFinder &Into,
                                  MatchFinder::MatchCallback *Receiver) const {
  for (const clang::ast_matchers::internal::DynTypedMatcher &Matcher :
       clang::transformer::detail::buildMatchers(Built[RuleIndex])) {
    Into.addDynamicMatcher(Matcher, Receiver);
  }
}

namespace {

/// A finding of rule Name at Loc (mapped to where it is written in the file).
RuleFinding findingAt(llvm::StringRef Name, const clang::SourceManager &SM,
                      clang::SourceLocation Loc, const std::string &Message, bool Rewrite) {
  RuleFinding Found;
  Found.Rule = Name.str();
  Found.Rewrite = Rewrite;
  Found.Message = Message;
  if (Loc.isValid()) {
    Found.Loc = SM.getExpansionLoc(Loc);
    clang::PresumedLoc Presumed = SM.getPresumedLoc(Found.Loc);
    Found.File = Presumed.getFilename();
    Found.Line = Presumed.getLine();
    Found.Column = Presumed.getColumn();
  }
  return Found;
}

/// The match's root node lies (partly) in a macro expansion: where it is spelled, else an
/// invalid location.
clang::SourceLocation macroExpansionOfRoot(const MatchFinder::MatchResult &Match) {
  auto Root = Match.Nodes.getMap().find(clang::transformer::RootID);
  if (Root == Match.Nodes.getMap().end()) {
    return {};
  }
  clang::SourceRange Range = Root->second.getSourceRange();
  if (Range.getBegin().isMacroID() || Range.getEnd().isMacroID()) {
    return Range.getBegin();
  }
  return {};
}

} // namespace

void RuleRunner::record(RuleFinding Found, size_t RuleIndex) {
  Collected &Into = Rules[RuleIndex].OnlyWithOtherEdits ? Companions : Primary;
  auto Key = std::make_tuple(Found.Line, Found.Column, Found.Rule, Found.Message);
  Into.Findings.emplace(std::move(Key), std::move(Found));
}

void RuleRunner::warn(size_t RuleIndex, const clang::SourceManager &SM, clang::SourceLocation Loc,
                      const std::string &Message) {
  record(findingAt(Rules[RuleIndex].Name, SM, Loc, Message, /*Rewrite=*/false), RuleIndex);
}

void RuleRunner::collect(size_t RuleIndex, const MatchFinder::MatchResult &Match) {
  const Rule &Rule = Built[RuleIndex];
  const clang::SourceManager &SM = *Match.SourceManager;
  AnalysisContext::Scope Installed(UnitAnalyses->Owner);
  size_t Case = clang::transformer::detail::findSelectedCase(Match, Rule);
  llvm::Expected<Finding> Note = Rule.Metadata[Case]->eval(Match);
  if (!Note) {
    warn(RuleIndex, SM, clang::transformer::detail::getRuleMatchLoc(Match),
         "internal error: " + llvm::toString(Note.takeError()));
    return;
  }
  if (Note->Kind == Finding::Decline) {
    // A training loop that cannot be made right: what goes with it stays as written.
    Declined = true;
    DeclinedRanges = AnalysisContext::of(*Match.Context).trainingPlans().DeclinedRanges;
  }
  if (Note->Kind != Finding::Rewrite) {
    warn(RuleIndex, SM, Note->Loc, Note->Message);
    if (const clang::SourceLocation At = SM.getExpansionLoc(Note->Loc);
        Note->OnlyWhereRewritten && At.isValid() && SM.isInMainFile(At)) {
      const RuleFinding Found =
          findingAt(Rules[RuleIndex].Name, SM, Note->Loc, Note->Message, /*Rewrite=*/false);
      OnlyWhereRewritten[std::make_tuple(Found.Line, Found.Column, Found.Rule, Found.Message)] =
          SM.getFileOffset(At);
    }
    return;
  }
  // No edits inside macro expansions: the macro's other uses would change too.
  if (clang::SourceLocation Spelled = macroExpansionOfRoot(Match); Spelled.isValid()) {
    llvm::StringRef Macro =
        clang::Lexer::getImmediateMacroName(Spelled, SM, Match.Context->getLangOpts());
    warn(RuleIndex, SM, Spelled,
         "not rewritten: this is inside the expansion of macro '" + Macro.str() +
             "'; make the edit by hand (" + Note->Message + ")");
    return;
  }
  if (MainFileCode.empty()) {
    MainFileCode = SM.getBufferData(SM.getMainFileID()).str(); // mergeEdits composes with it
  }
  llvm::Expected<llvm::SmallVector<clang::transformer::Edit, 1>> Edits =
      Rule.Cases[Case].Edits(Match);
  if (!Edits) {
    warn(RuleIndex, SM, Note->Loc, "internal error: " + llvm::toString(Edits.takeError()));
    return;
  }
  Collected &Into = Rules[RuleIndex].OnlyWithOtherEdits ? Companions : Primary;
  RuleFinding Found = findingAt(Rules[RuleIndex].Name, SM, Note->Loc, Note->Message, true);
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
    Into.Edits.insert({Begin, End - Begin, Edit.Replacement, RuleIndex});
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
    record(std::move(Found), RuleIndex);
  }
}

namespace {

/// Hands the main file's top-level declarations to the runner at the end of the unit.
class MainFileMatcher : public clang::ASTConsumer {
public:
  MainFileMatcher(RuleRunner &Runner, const clang::SourceManager &SM) : Runner(Runner), SM(SM) {}

  bool HandleTopLevelDecl(clang::DeclGroupRef Group) override {
    for (clang::Decl *D : Group) {
      if (SM.isWrittenInMainFile(SM.getExpansionLoc(D->getLocation()))) {
        TopLevel.push_back(D);
      }
    }
    return true;
  }

  void HandleTranslationUnit(clang::ASTContext &Ctx) override { Runner.match(Ctx, TopLevel); }

private:
  RuleRunner &Runner;
  const clang::SourceManager &SM;
  std::vector<clang::Decl *> TopLevel;
};

} // namespace

void RuleRunner::match(clang::ASTContext &Ctx, llvm::ArrayRef<clang::Decl *> MainFileDecls) {
  Ctx.setTraversalScope(std::vector<clang::Decl *>(MainFileDecls.begin(), MainFileDecls.end()));
  UnitAnalyses->Owner.reset();
  // The rules' matchers ask the analyses too, not only their edits and findings.
  AnalysisContext::Scope Installed(UnitAnalyses->Owner);
  Finder.matchAST(Ctx);
  Finder.match(*Ctx.getTranslationUnitDecl(), Ctx);
}

std::unique_ptr<clang::ASTConsumer> RuleRunner::makeConsumer(const clang::SourceManager &SM) {
  return std::make_unique<MainFileMatcher>(*this, SM);
}

namespace {
bool inAny(const std::vector<std::pair<unsigned, unsigned>> &Ranges, unsigned Offset) {
  return llvm::any_of(Ranges, [&](const std::pair<unsigned, unsigned> &Range) {
    return Range.first <= Offset && Offset < Range.second;
  });
}
} // namespace

FileFindings RuleRunner::finish(llvm::StringRef FileName) const {
  FileFindings Result;
  Result.Declined = Declined;
  // A declined training loop takes its transaction's edits with it (DeclinedRanges); the
  // findings that explained them go too, warnings stay.
  auto Applies = [&](const TextEdit &Edit) { return !inAny(DeclinedRanges, Edit.Offset); };
  auto Kept = [&](const RuleFinding &Found) {
    if (!Found.Rewrite) {
      const auto Offset = OnlyWhereRewritten.find(
          std::make_tuple(Found.Line, Found.Column, Found.Rule, Found.Message));
      return Offset == OnlyWhereRewritten.end() || !inAny(DeclinedRanges, Offset->second);
    }
    return llvm::all_of(Found.Fix,
                        [&](const FixEdit &Edit) { return !inAny(DeclinedRanges, Edit.Offset); });
  };
  std::set<TextEdit> Edits;
  llvm::copy_if(Primary.Edits, std::inserter(Edits, Edits.end()), Applies);
  // The companions (the include, the Accelerator) edit a file only next to another rule's
  // edit; their warnings always count.
  bool OthersEdit = !Edits.empty();
  if (OthersEdit) {
    llvm::copy_if(Companions.Edits, std::inserter(Edits, Edits.end()), Applies);
  }
  std::map<std::tuple<unsigned, unsigned, std::string, std::string>, RuleFinding> Findings;
  for (const auto &[Key, Found] : Primary.Findings) {
    if (Kept(Found)) {
      Findings.emplace(Key, Found);
    }
  }
  for (const auto &[Key, Found] : Companions.Findings) {
    if (!Found.Rewrite || (OthersEdit && Kept(Found))) {
      Findings.emplace(Key, Found);
    }
  }
  for (auto &[Key, Found] : Findings) {
    Result.Findings.push_back(std::move(Found));
  }
  if (std::optional<clang::tooling::Replacements> Merged =
          mergeEdits(Edits, FileName, MainFileCode, Result.ToolWarnings)) {
    Result.Edits = std::move(*Merged);
  } else {
    // Edits that do not combine: nothing applies, as for a declined loop (the warning says
    // where).
    Result.Declined = true;
    llvm::erase_if(Result.Findings, [](const RuleFinding &Found) { return Found.Rewrite; });
  }
  return Result;
}

void RuleRunner::reset() {
  Primary = Collected();
  Companions = Collected();
  UnitAnalyses->Owner.reset();
  Declined = false;
  DeclinedRanges.clear();
  OnlyWhereRewritten.clear();
  MainFileCode.clear();
}

} // namespace accel::rewrites
