//===- PrepareRule.cpp - accel-prepare ------------------------------------===//
//
// accelerator.prepare(model..., optimizer..., scheduler...) after the last of their
// definitions and before the training loop: moves the models to the device, starts every
// process from the same parameters and installs gradient synchronisation. See
// docs/rules/accel-prepare.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/AST/Stmt.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

Rule makePrepareRule() {
  auto Setup = functionDecl(isExpansionInMainFile(), unless(isInstantiated()), setupFunction(),
                            acceleratorFunction())
                   .bind("function");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const SetupInfo &Info =
        AnalysisContext::of(*Match.Context).setup(Match.Nodes.getNodeAs<FunctionDecl>("function"));
    llvm::SmallVector<Edit, 1> Result;
    if (Info.AlreadyPrepared) {
      return Result;
    }
    for (const PrepareGroup &Group : Info.Groups) {
      if (Group.LastDefinition->getEndLoc().isMacroID()) {
        continue;
      }
      std::string Args;
      for (const auto *List : {&Group.Models, &Group.Optimizers, &Group.Schedulers}) {
        for (const VarDecl *Var : *List) {
          Args += (Args.empty() ? "" : ", ") + Var->getNameAsString();
        }
      }
      bool AtLineStart = false;
      SourceLocation At = lineStartAfter(Group.LastDefinition->getEndLoc(), *Match.SourceManager,
                                         Match.Context->getLangOpts(), AtLineStart);
      std::string Text = "accelerator.prepare(" + Args + ");";
      Result.push_back(insertionAt(At, AtLineStart ? Text + "\n" : "\n" + Text));
    }
    return Result;
  };
  auto Note = dynamicFinding("function", [](const MatchResult &Match) {
    const SetupInfo &Info =
        AnalysisContext::of(*Match.Context).setup(Match.Nodes.getNodeAs<FunctionDecl>("function"));
    Finding Result;
    if (!Info.AlreadyPrepared && !Info.Problem.empty()) {
      Result.Kind = Finding::Warning;
      Result.Loc = Info.ProblemLoc;
      Result.Message = Info.Problem;
    } else {
      Result.Loc =
          Info.Groups.empty() ? SourceLocation() : Info.Groups.front().LastDefinition->getEndLoc();
      Result.Message = "prepare moves the model to the accelerator's device, starts every "
                       "process from the same parameters and synchronises gradients";
    }
    return Result;
  });
  return makeRule(Setup, Edits, Note);
}

} // namespace accel::rewrites
