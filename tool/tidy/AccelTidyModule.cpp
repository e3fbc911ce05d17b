//===- AccelTidyModule.cpp - The rules as clang-tidy checks accel-* -------===//
//
// A clang-tidy plugin: `clang-tidy-22 --load=libAccelTidyModule.so --checks='-*,accel-*'`
// reports every rule's findings with their fixes (`--fix` applies them). clang-tidy owns the
// parse and the matching; the rule engine (accel/rewrites/Engine.h) turns each match into a
// finding, exactly as for accel-rewrite, and this file only maps findings to clang-tidy's
// diagnostics and fix-its (docs/editors.md). clang-tidy provides the clang-tidy symbols when
// it loads the plugin; clang and LLVM come from the same shared libraries.
//
//===----------------------------------------------------------------------===//
#include "accel/rewrites/Engine.h"

#include "clang-tidy/ClangTidyCheck.h"
#include "clang-tidy/ClangTidyModule.h"
#include "llvm/Config/llvm-config.h"
#if LLVM_VERSION_MAJOR < 22 // Since 22, ClangTidyModule.h has the registry too.
#include "clang-tidy/ClangTidyModuleRegistry.h"
#endif

#include <memory>

namespace accel::tidy {
namespace {

using accel::rewrites::FileFindings;
using accel::rewrites::RuleFinding;
using accel::rewrites::RuleRunner;

/// The engine one clang-tidy run's accel checks share: the gating (accel-include and
/// accel-accelerator edit a file only next to another rule's edit) needs every rule's
/// findings of the translation unit, so each check reports its own at the end of it.
struct SharedRunner {
  RuleRunner Runner{accel::rewrites::allRules()};
  bool Finished = false;
  FileFindings Result;

  const FileFindings &finish(const clang::SourceManager &SM) {
    if (!Finished) {
      Finished = true;
      Result = Runner.finish(SM.getFileEntryRefForID(SM.getMainFileID())->getName());
    }
    return Result;
  }
  void reset() {
    Runner.reset();
    // clang-tidy runs the rules' matchers itself: they need the unit's analyses installed.
    Runner.beginTranslationUnit();
    Finished = false;
    Result = FileFindings();
  }
};

class AccelRuleCheck : public clang::tidy::ClangTidyCheck {
public:
  AccelRuleCheck(llvm::StringRef Name, clang::tidy::ClangTidyContext *Context, size_t RuleIndex,
                 std::shared_ptr<SharedRunner> Shared)
      : ClangTidyCheck(Name, Context), RuleIndex(RuleIndex), Shared(std::move(Shared)) {}

  bool isLanguageVersionSupported(const clang::LangOptions &LangOpts) const override {
    return LangOpts.CPlusPlus17;
  }

  void registerMatchers(clang::ast_matchers::MatchFinder *Finder) override {
    Shared->Runner.registerMatchers(RuleIndex, *Finder, this);
  }

  void onStartOfTranslationUnit() override { Shared->reset(); }

  void check(const clang::ast_matchers::MatchFinder::MatchResult &Match) override {
    SM = Match.SourceManager;
    Shared->Runner.collect(RuleIndex, Match);
  }

  void onEndOfTranslationUnit() override {
    Shared->Runner.endTranslationUnit();
    if (!SM) {
      return; // Nothing of this rule matched.
    }
    llvm::StringRef Name = Shared->Runner.rules()[RuleIndex].Name;
    clang::FileID Main = SM->getMainFileID();
    llvm::StringRef Code = SM->getBufferData(Main);
    clang::SourceLocation FileStart = SM->getLocForStartOfFile(Main);
    for (const RuleFinding &Found : Shared->finish(*SM).Findings) {
      if (Found.Rule != Name) {
        continue;
      }
      auto Diagnostic = diag(Found.Loc, "%0") << Found.Message;
      for (const accel::rewrites::FixEdit &Edit : Found.Fix) {
        unsigned Length = Edit.Length;
        std::string Text = Edit.Text;
        // clang's fix-it machinery widens a pure removal over the white space after it
        // (EditedSource's adjustRemoval), which would eat the next line's indentation; the
        // same removal written as a replacement that keeps the next character applies as is.
        if (Text.empty() && Edit.Offset + Length < Code.size()) {
          Text = Code.substr(Edit.Offset + Length, 1).str();
          ++Length;
        }
        clang::SourceLocation Begin = FileStart.getLocWithOffset(Edit.Offset);
        Diagnostic << clang::FixItHint::CreateReplacement(
            clang::CharSourceRange::getCharRange(Begin, Begin.getLocWithOffset(Length)), Text);
      }
    }
    SM = nullptr;
  }

private:
  size_t RuleIndex;
  std::shared_ptr<SharedRunner> Shared;
  const clang::SourceManager *SM = nullptr;
};

class AccelModule : public clang::tidy::ClangTidyModule {
public:
  void addCheckFactories(clang::tidy::ClangTidyCheckFactories &Factories) override {
    auto Shared = std::make_shared<SharedRunner>();
    llvm::ArrayRef<accel::rewrites::RuleInfo> Rules = Shared->Runner.rules();
    for (size_t I = 0; I < Rules.size(); ++I) {
      Factories.registerCheckFactory(
          Rules[I].Name, [I, Shared](llvm::StringRef Name, clang::tidy::ClangTidyContext *Context) {
            return std::make_unique<AccelRuleCheck>(Name, Context, I, Shared);
          });
    }
  }
};

} // namespace
} // namespace accel::tidy

static clang::tidy::ClangTidyModuleRegistry::Add<accel::tidy::AccelModule>
    Registered("accel-module", "accel-rewrite's rules: make a LibTorch program data-parallel");
