//===- PrepareRule.cpp - accel-prepare ------------------------------------===//
//
// accelerator.prepare(model..., optimizer, its schedulers, ...) after the last of their
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
      // The models, then each optimizer followed by its schedulers: the runtime binds a
      // scheduler to the optimizer prepared last before it.
      std::string Args;
      auto Add = [&](const VarDecl *Var) {
        Args += (Args.empty() ? "" : ", ") + Var->getNameAsString();
      };
      llvm::for_each(Group.Models, Add);
      for (const VarDecl *Optimizer : Group.Optimizers) {
        Add(Optimizer);
        for (size_t I = 0; I < Group.Schedulers.size(); ++I) {
          if (Group.ScheduledOptimizers[I] == Optimizer) {
            Add(Group.Schedulers[I]);
          }
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
