//===- AccelTidyModule.cpp - The rules as clang-tidy checks accel-* -------===//
//
// A clang-tidy plugin: `clang-tidy-22 --load=libAccelTidyModule.so --checks='-*,accel-*'`
// reports every rule's findings with their fixes (`--fix` applies them). It runs the same
// rule library as accel-rewrite (docs/editors.md). clang-tidy provides the clang-tidy
// symbols when it loads the plugin; clang and LLVM come from the same shared libraries.
//
//===----------------------------------------------------------------------===//
#include "accel/rewrites/Rules.h"

#include "clang-tidy/ClangTidyCheck.h"
#include "clang-tidy/ClangTidyModule.h"
#include "clang/Lex/Lexer.h"
#include "llvm/Config/llvm-config.h"
#if LLVM_VERSION_MAJOR < 22 // Since 22, ClangTidyModule.h has the registry too.
#include "clang-tidy/ClangTidyModuleRegistry.h"
#endif

#include <memory>
#include <vector>

namespace accel::tidy {
namespace {

using accel::rewrites::Finding;
using accel::rewrites::RuleInfo;
using clang::ast_matchers::MatchFinder;

/// What the checks of one clang-tidy run share: accel-include and accel-accelerator edit a
/// file only when another accel rule does (as in accel-rewrite), so their findings wait here
/// until the end of the translation unit.
struct Shared {
  bool OtherEdits = false;
};

class AccelRuleCheck : public clang::tidy::ClangTidyCheck {
public:
  AccelRuleCheck(llvm::StringRef Name, clang::tidy::ClangTidyContext *Context, const RuleInfo &Info,
                 std::shared_ptr<Shared> State)
      : ClangTidyCheck(Name, Context), Info(Info), Rule(Info.Build()), State(std::move(State)) {}

  bool isLanguageVersionSupported(const clang::LangOptions &LangOpts) const override {
    return LangOpts.CPlusPlus17;
  }

  void registerMatchers(MatchFinder *Finder) override {
    for (const auto &Matcher : clang::transformer::detail::buildMatchers(Rule)) {
      Finder->addDynamicMatcher(Matcher, this);
    }
  }

  void onStartOfTranslationUnit() override {
    State->OtherEdits = false;
    Waiting.clear();
  }

  void check(const MatchFinder::MatchResult &Match) override {
    size_t Case = clang::transformer::detail::findSelectedCase(Match, Rule);
    llvm::Expected<Finding> Note = Rule.Metadata[Case]->eval(Match);
    if (!Note) {
      llvm::consumeError(Note.takeError());
      return;
    }
    if (Note->Kind == Finding::Warning) {
      diag(Note->Loc, "%0") << Note->Message;
      return;
    }
    auto Root = Match.Nodes.getMap().find(clang::transformer::RootID);
    if (Root != Match.Nodes.getMap().end() &&
        (Root->second.getSourceRange().getBegin().isMacroID() ||
         Root->second.getSourceRange().getEnd().isMacroID())) {
      clang::SourceLocation Spelled = Root->second.getSourceRange().getBegin();
      diag(Spelled, "not rewritten: this is inside the expansion of macro '%0'; make the edit "
                    "by hand (%1)")
          << clang::Lexer::getImmediateMacroName(Spelled, *Match.SourceManager,
                                                 Match.Context->getLangOpts())
          << Note->Message;
      return;
    }
    llvm::Expected<llvm::SmallVector<clang::transformer::Edit, 1>> Edits =
        Rule.Cases[Case].Edits(Match);
    if (!Edits) {
      llvm::consumeError(Edits.takeError());
      return;
    }
    std::vector<clang::FixItHint> Fixes;
    for (const clang::transformer::Edit &Edit : *Edits) {
      if (Edit.Kind == clang::transformer::EditKind::Range && Edit.Range.isValid() &&
          !Edit.Range.getBegin().isMacroID() &&
          Match.SourceManager->isWrittenInMainFile(Edit.Range.getBegin())) {
        Fixes.push_back(clang::FixItHint::CreateReplacement(Edit.Range, Edit.Replacement));
      }
    }
    if (Fixes.empty()) {
      return;
    }
    if (Info.OnlyWithOtherEdits) {
      Waiting.push_back({Note->Loc, Note->Message, std::move(Fixes)});
      return;
    }
    State->OtherEdits = true;
    diag(Note->Loc, "%0") << Note->Message << Fixes;
  }

  void onEndOfTranslationUnit() override {
    if (State->OtherEdits) {
      for (const Pending &Found : Waiting) {
        diag(Found.Loc, "%0") << Found.Message << Found.Fixes;
      }
    }
    Waiting.clear();
  }

private:
  struct Pending {
    clang::SourceLocation Loc;
    std::string Message;
    std::vector<clang::FixItHint> Fixes;
  };
  const RuleInfo &Info;
  accel::rewrites::Rule Rule;
  std::shared_ptr<Shared> State;
  std::vector<Pending> Waiting;
};

class AccelModule : public clang::tidy::ClangTidyModule {
public:
  void addCheckFactories(clang::tidy::ClangTidyCheckFactories &Factories) override {
    auto State = std::make_shared<Shared>();
    for (const RuleInfo &Info : accel::rewrites::allRules()) {
      Factories.registerCheckFactory(
          Info.Name, [&Info, State](llvm::StringRef Name, clang::tidy::ClangTidyContext *Context) {
            return std::make_unique<AccelRuleCheck>(Name, Context, Info, State);
          });
    }
  }
};

} // namespace
} // namespace accel::tidy

static clang::tidy::ClangTidyModuleRegistry::Add<accel::tidy::AccelModule>
    Registered("accel-module", "accel-rewrite's rules: make a LibTorch program data-parallel");
