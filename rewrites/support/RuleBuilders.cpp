//===- RuleBuilders.cpp - Pieces the rules are built from -----------------===//
#include "support/RuleBuilders.h"

#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/SourceRanges.h"

#include "clang/AST/DeclCXX.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {

namespace {
class FindingGenerator : public transformer::MatchComputation<Finding> {
public:
  FindingGenerator(std::string Id, std::function<Finding(const MatchResult &)> Compute)
      : Id(std::move(Id)), Compute(std::move(Compute)) {}

  llvm::Error eval(const MatchResult &Match, Finding *Result) const override {
    *Result = Compute(Match);
    if (Result->Loc.isInvalid()) {
      auto Found = Match.Nodes.getMap().find(Id);
      if (Found != Match.Nodes.getMap().end()) {
        Result->Loc = Found->second.getSourceRange().getBegin();
      }
    }
    return llvm::Error::success();
  }
  std::string toString() const override { return "finding(" + Id + ")"; }

private:
  std::string Id;
  std::function<Finding(const MatchResult &)> Compute;
};
} // namespace

transformer::Generator<Finding> finding(Finding::KindType Kind, std::string Id,
                                        std::function<std::string(const MatchResult &)> Message) {
  return dynamicFinding(std::move(Id), [Kind, Message](const MatchResult &Match) {
    Finding Result;
    Result.Kind = Kind;
    Result.Message = Message(Match);
    return Result;
  });
}

transformer::Generator<Finding>
dynamicFinding(std::string Id, std::function<Finding(const MatchResult &)> Compute) {
  return std::make_shared<FindingGenerator>(std::move(Id), std::move(Compute));
}

Rule loopGuardRule(std::string Method, std::string Statement, std::string Explanation) {
  transformer::EditGenerator Edits =
      [Method, Statement](
          const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<transformer::Edit, 1>> {
    const auto *Body = Match.Nodes.getNodeAs<CompoundStmt>("body");
    llvm::SmallVector<transformer::Edit, 1> Result;
    bool Present = false;
    forEachStmt(Body, [&](const Stmt *S) {
      Present = Present || isMethodCall(S, "accelerate::Accelerator", Method);
    });
    if (Present || Body->getLBracLoc().isMacroID()) {
      return Result;
    }
    bool AtLineStart = false;
    SourceLocation At = lineStartAfter(Body->getLBracLoc(), *Match.SourceManager,
                                       Match.Context->getLangOpts(), AtLineStart);
    std::string Text = Statement;
    const auto *Function = enclosingFunction(DynTypedNode::create(*Body), *Match.Context);
    // A [&] lambda's models are those of the function it is defined in.
    while (Function && isa<CXXMethodDecl>(Function) &&
           cast<CXXMethodDecl>(Function)->getParent()->isLambda()) {
      Function =
          dyn_cast<FunctionDecl>(cast<CXXMethodDecl>(Function)->getParent()->getDeclContext());
    }
    if (Text.find("$models") != std::string::npos) {
      // The models this loop trains (another loop of the function may train a model declared
      // only after this one); the function's when the loop has no plan.
      auto Trained = modelsTrainedIn(Body, *Match.Context);
      if (!Trained && Function) {
        Trained = AnalysisContext::of(*Match.Context).setup(Function).models();
      }
      std::string Models;
      for (const VarDecl *Model : Trained.value_or(llvm::SmallVector<const VarDecl *, 2>())) {
        Models += (Models.empty() ? "" : ", ") + Model->getNameAsString();
      }
      Text.replace(Text.find("$models"), 7, Models);
    }
    // `auto NAME = ...`: NAME renamed where the function already uses it.
    if (llvm::StringRef(Text).starts_with("auto ")) {
      size_t End = Text.find(' ', 5);
      std::string Name = Text.substr(5, End - 5);
      SourceRange Scope = Function ? Function->getSourceRange() : Body->getSourceRange();
      Text.replace(5, End - 5,
                   unusedName(Name, Scope, *Match.SourceManager, Match.Context->getLangOpts()));
    }
    Result.push_back(insertionAt(At, AtLineStart ? Text + "\n" : "\n" + Text));
    return Result;
  };
  return transformer::makeRule(trainingStepBody(), Edits, explain("body", std::move(Explanation)));
}

Rule noAcceleratorRule(clang::ast_matchers::internal::DynTypedMatcher Matcher, std::string Id,
                       std::string What, std::string Consequence) {
  return transformer::makeRule(
      std::move(Matcher), transformer::noEdits(),
      dynamicFinding(std::move(Id), [What, Consequence](const MatchResult &Match) {
        Finding Result;
        Result.Kind = Finding::Warning;
        Result.OnlyWhereRewritten = true;
        Result.Message = What + " in " +
                         functionLabel(Match.Nodes.getNodeAs<FunctionDecl>("function")) +
                         ", which has no accelerator: " + Consequence;
        return Result;
      }));
}

} // namespace accel::rewrites
