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
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/AST/Stmt.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

/// A trainer class's method that steps member optimizers accel-rewrite can prepare.
AST_MATCHER(FunctionDecl, trainsMembers) {
  return AnalysisContext::of(Finder->getASTContext()).memberTraining(&Node).sound();
}

/// `accelerator.prepare(model_, optimizer_);` first in a trainer method's body: each call
/// prepares again, which the runtime makes harmless (analysis/MemberTraining.h).
llvm::Expected<llvm::SmallVector<Edit, 1>> prepareMembers(const MemberTraining &Members,
                                                          const MatchResult &Match) {
  llvm::SmallVector<Edit, 1> Result;
  const auto *Body = dyn_cast_or_null<CompoundStmt>(Members.Method->getBody());
  if (!Members.needsPrepare() || !Body || Body->getLBracLoc().isMacroID()) {
    return Result;
  }
  bool AtLineStart = false;
  SourceLocation At = lineStartAfter(Body->getLBracLoc(), *Match.SourceManager,
                                     Match.Context->getLangOpts(), AtLineStart);
  std::string Text = "accelerator.prepare(" + Members.prepareArguments() + ");";
  Result.push_back(insertionAt(At, AtLineStart ? Text + "\n" : "\n" + Text));
  return Result;
}

} // namespace

Rule makePrepareRule() {
  auto Setup = functionDecl(isExpansionInMainFile(), unless(isInstantiated()),
                            anyOf(setupFunction(), trainsMembers()), acceleratorFunction())
                   .bind("function");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
    AnalysisContext &Analyses = AnalysisContext::of(*Match.Context);
    if (const MemberTraining &Members = Analyses.memberTraining(Function); Members.sound()) {
      return prepareMembers(Members, Match);
    }
    const SetupInfo &Info = Analyses.setup(Function);
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
        // One held by a smart pointer (`auto optimizer = make_optimizer(...)`) as `*optimizer`.
        Args += std::string(Args.empty() ? "" : ", ") +
                (isOptimizerType(Optimizer->getType()) ? "" : "*") + Optimizer->getNameAsString();
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
    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
    AnalysisContext &Analyses = AnalysisContext::of(*Match.Context);
    Finding Result;
    if (const MemberTraining &Members = Analyses.memberTraining(Function); Members.sound()) {
      Result.Loc = Members.Method->getBody()->getBeginLoc();
      Result.Message = "prepare, first in the method, moves the member model to the "
                       "accelerator's device, starts every process from the same parameters "
                       "and synchronises gradients; a prepare again on the next call is harmless";
      return Result;
    }
    const SetupInfo &Info = Analyses.setup(Function);
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
