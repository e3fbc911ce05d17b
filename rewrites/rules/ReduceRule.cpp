//===- ReduceRule.cpp - accel-reduce --------------------------------------===//
//
// Where a running statistic of a training loop over the sharded loader is read (after the
// loop, in a progress print, in a return), `x` -> `accelerator.reduce(x, "sum")` (or "mean"
// for summed per-batch means); a batch's value printed in that loop (`loss.item<double>()`)
// is combined the same way: what the program prints and returns means what it meant on one
// process. The variable itself is left as this process's share. See utils/Statistics.h and
// docs/rules/accel-reduce.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/DivergentSteps.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"
#include "support/Templates.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/Lex/Lexer.h"

#include <optional>

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

AST_MATCHER(CXXMemberCallExpr, printsBatchValueNode) {
  std::string Op;
  return printsBatchValue(&Node, Finder->getASTContext(), Op);
}

AST_MATCHER(DeclRefExpr, printsBatchValueCopyNode) {
  std::string Op;
  return printsBatchValueCopy(&Node, Finder->getASTContext(), Op);
}

/// Inside a function template that is instantiated: what a value is shows in the
/// instantiations, where the types are known (the pattern's dependent calls classify as
/// nothing), so the pattern's node says nothing of its own.
bool inInstantiatedPattern(const Stmt *S, ASTContext &Ctx) {
  return isInstantiatedPattern(enclosingFunction(DynTypedNode::create(*S), Ctx));
}

AST_MATCHER(CXXMemberCallExpr, printsUnclearBatchValue) {
  std::string Op;
  bool Unclear = false;
  printsBatchValue(&Node, Finder->getASTContext(), Op, &Unclear);
  return Unclear && !inInstantiatedPattern(&Node, Finder->getASTContext());
}

AST_MATCHER(DeclRefExpr, readsUnclear) {
  return readsUnclearStatistic(&Node, Finder->getASTContext());
}

AST_MATCHER(Stmt, storesBatchValueNode) {
  std::string Holder;
  return storesBatchValue(&Node, Finder->getASTContext(), Holder);
}
AST_MATCHER(CXXMemberCallExpr, combinesStoredArgumentsNode) {
  llvm::SmallVector<std::pair<const Expr *, std::string>, 2> Combined;
  return combinesStoredArguments(&Node, Finder->getASTContext(), Combined);
}

AST_MATCHER(Stmt, onSomeProcesses) {
  return runsOnSomeProcesses(&Node, Finder->getASTContext()) ||
         underConditionThatDiffers(&Node, Finder->getASTContext());
}

AST_MATCHER(DeclRefExpr, printsChangedFromBatches) {
  ASTContext &Ctx = Finder->getASTContext();
  // In a training left as written nothing is shared: the print is the whole run's.
  const unsigned Offset = Ctx.getSourceManager().getFileOffset(
      Ctx.getSourceManager().getExpansionLoc(Node.getBeginLoc()));
  for (const auto &[Begin, End] : AnalysisContext::of(Ctx).trainingPlans().DeclinedRanges) {
    if (Begin <= Offset && Offset < End) {
      return false;
    }
  }
  const Stmt *Change = nullptr;
  const VarDecl *Source = nullptr;
  return printsValueChangedFromBatches(&Node, Ctx, Change, Source) &&
         !inInstantiatedPattern(&Node, Ctx);
}

AST_MATCHER(DeclRefExpr, readsStatistic) {
  std::string Op;
  return readsRunningStatistic(&Node, Finder->getASTContext(), Op);
}

AST_MATCHER(BinaryOperator, rescalesCombinedStatistic) {
  const auto *Rescale = dyn_cast<CompoundAssignOperator>(&Node);
  StatisticRead Read;
  return Rescale && rescalesStatistic(Rescale, Finder->getASTContext(), Read) && !Read.Op.empty();
}

AST_MATCHER(BinaryOperator, rescalesUnclearStatistic) {
  const auto *Rescale = dyn_cast<CompoundAssignOperator>(&Node);
  StatisticRead Read;
  return Rescale && rescalesStatistic(Rescale, Finder->getASTContext(), Read) && Read.Unclear;
}

/// The warning for an unclear read whose reason the analysis names, or none.
std::optional<std::string> knownReason(const DeclRefExpr *Ref, ASTContext &Ctx) {
  StatisticRead Read;
  isStatisticRead(Ref, Ctx, Read);
  if (Read.Why.empty()) {
    return std::nullopt;
  }
  return "'" + Ref->getDecl()->getNameAsString() + "' is kept over this process's batches, " +
         "but " + Read.Why + "; it is left as this process's share";
}

std::string operation(const MatchResult &Match) {
  std::string Op;
  readsRunningStatistic(Match.Nodes.getNodeAs<DeclRefExpr>("read"), *Match.Context, Op);
  return Op;
}

/// `accelerator.reduce(Value, "Op")`, the text every combination writes.
std::string reduceCall(llvm::StringRef Value, llvm::StringRef Op) {
  return ("accelerator.reduce(" + Value + ", \"" + Op + "\")").str();
}

} // namespace

Rule makeReduceRule() {
  auto Read =
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), readsStatistic()).bind("read");
  auto Text = [](const MatchResult &Match) -> std::string {
    const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("read");
    return reduceCall(Ref->getDecl()->getName(), operation(Match));
  };
  auto Printed =
      cxxMemberCallExpr(inUserCode(), forFunction(acceleratorFunction()), printsBatchValueNode())
          .bind("item");
  auto PrintedText = [](const MatchResult &Match) -> std::string {
    const auto *Item = Match.Nodes.getNodeAs<CXXMemberCallExpr>("item");
    std::string Op;
    printsBatchValue(Item, *Match.Context, Op);
    return reduceCall(sourceText(Item, *Match.Context), Op);
  };
  auto PrintedRule =
      makeRule(Printed, changeTo(node("item"), run(PrintedText)),
               explain("item", "this process's batch is 1/N of the global batch; "
                               "accelerator.reduce prints the global batch's value"));
  // A copy of the batch's value made earlier in the iteration, printed: combined at the print.
  auto PrintedCopy =
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), printsBatchValueCopyNode())
          .bind("copy");
  auto PrintedCopyText = [](const MatchResult &Match) -> std::string {
    const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("copy");
    std::string Op;
    printsBatchValueCopy(Ref, *Match.Context, Op);
    // A tensor (`std::cout << loss`) is combined as a copy cut from the graph: it prints the
    // same.
    const bool Tensor = isTensorType(cast<VarDecl>(Ref->getDecl())->getType());
    return reduceCall(Ref->getDecl()->getName().str() + (Tensor ? ".detach()" : ""), Op);
  };
  auto PrintedCopyRule =
      makeRule(PrintedCopy, changeTo(node("copy"), run(PrintedCopyText)),
               explain("copy", "this copy holds this process's batch, 1/N of the global batch; "
                               "accelerator.reduce prints the global batch's value"));
  auto ReadRule = makeRule(
      Read, changeTo(node("read"), run(Text)),
      finding(Finding::Rewrite, "read", [](const MatchResult &Match) {
        const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("read");
        std::string Name = Ref->getDecl()->getNameAsString();
        return operation(Match) == "sum"
                   ? "'" + Name +
                         "' sums this process's share of each batch; accelerator.reduce adds "
                         "up every process's share"
                   : "'" + Name +
                         "' sums per-batch means over this process's part of each batch; "
                         "accelerator.reduce averages them across processes";
      }));
  // `loss /= batches` after the loop reads the statistic in place: combined there, as
  // `loss = accelerator.reduce(loss, "mean") / batches`.
  auto Rescale =
      binaryOperator(inUserCode(), forFunction(acceleratorFunction()), rescalesCombinedStatistic())
          .bind("rescale");
  // Edits around the right-hand side, not over it: reads of statistics in it (`s /= n` with a
  // counter n) get their own reduce from the read rule.
  EditGenerator RescaleEdits =
      [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Op = Match.Nodes.getNodeAs<CompoundAssignOperator>("rescale");
    StatisticRead Read;
    rescalesStatistic(Op, *Match.Context, Read);
    std::string Name = sourceText(Op->getLHS(), *Match.Context);
    const Expr *By = Op->getRHS()->IgnoreImpCasts();
    bool Parenthesize =
        !isa<DeclRefExpr, IntegerLiteral, FloatingLiteral, CallExpr, ParenExpr, MemberExpr>(By);
    llvm::SmallVector<Edit, 1> Result;
    if (Op->getBeginLoc().isMacroID() || Op->getEndLoc().isMacroID()) {
      return Result;
    }
    Edit Head;
    Head.Range =
        CharSourceRange::getCharRange(Op->getLHS()->getBeginLoc(), Op->getRHS()->getBeginLoc());
    Head.Replacement = Name + " = accelerator.reduce(" + Name + ", \"" + Read.Op + "\") " +
                       (Op->getOpcode() == BO_DivAssign ? "/ " : "* ") + (Parenthesize ? "(" : "");
    Result.push_back(Head);
    if (Parenthesize) {
      Result.push_back(
          insertionAt(Lexer::getLocForEndOfToken(Op->getRHS()->getEndLoc(), 0, *Match.SourceManager,
                                                 Match.Context->getLangOpts()),
                      ")"));
    }
    return Result;
  };
  auto RescaleRule =
      makeRule(Rescale, RescaleEdits,
               explain("rescale", "the statistic is scaled in place after the loop: "
                                  "accelerator.reduce combines every process's share there"));
  auto UnclearRescale = makeRule(
      binaryOperator(inUserCode(), forFunction(acceleratorFunction()), rescalesUnclearStatistic())
          .bind("rescale"),
      noEdits(),
      warn("rescale", "this scales a value added up over this process's batches, but "
                      "accel-reduce cannot tell whether it sums values per sample or per-batch "
                      "means, so it is left as this process's share; combine it first with "
                      "accelerator.reduce(value, \"sum\") or accelerator.reduce(value, \"mean\") "
                      "by hand"));
  // Where only some processes would run the collective: left alone, with a warning.
  auto OnSomeProcesses = [](std::string Id) {
    return makeRule(
        stmt(anyOf(declRefExpr(readsStatistic()), cxxMemberCallExpr(printsBatchValueNode()),
                   declRefExpr(printsBatchValueCopyNode()),
                   binaryOperator(rescalesCombinedStatistic())),
             inUserCode(), forFunction(acceleratorFunction()), onSomeProcesses())
            .bind(Id),
        noEdits(),
        warn(Id, "this value is one process's share, but accelerator.reduce here would run on "
                 "some processes only (the branch asks which process this is, or depends on "
                 "this process's batches) and wait for the others forever; combine it with "
                 "accelerator.reduce before the branch, and branch on the combined value"));
  };
  // What cannot be told is left as this process's value, with a warning, never guessed.
  auto UnclearRead = makeRule(
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), readsUnclear()).bind("read"),
      noEdits(), finding(Finding::Warning, "read", [](const MatchResult &Match) {
        const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("read");
        std::string Name = Ref->getDecl()->getNameAsString();
        if (std::optional<std::string> Said = knownReason(Ref, *Match.Context)) {
          return *Said;
        }
        return "'" + Name +
               "' is added up over this process's batches, but accel-reduce cannot tell whether "
               "it sums values per sample or per-batch means (or it also adds up over data "
               "every process sees), so it is left as this process's share; read it as "
               "accelerator.reduce(" +
               Name + ", \"sum\") or accelerator.reduce(" + Name + ", \"mean\") by hand";
      }));
  auto UnclearPrint = makeRule(
      cxxMemberCallExpr(inUserCode(), forFunction(acceleratorFunction()), printsUnclearBatchValue())
          .bind("item"),
      noEdits(),
      warn("item", "this prints a value of this process's batch that accel-reduce cannot "
                   "classify (a sum or a mean over the batch), so the main process prints its "
                   "own; wrap it in accelerator.reduce(..., \"sum\") or \"mean\" by hand"));
  // Handed to an object of the program: each process's object gets the global batch's values,
  // `meter.update(accelerator.reduce(loss.item<double>(), "mean"),
  // accelerator.reduce(b.data.size(0), "sum"))`.
  auto StoredCombined = makeRule(
      cxxMemberCallExpr(inUserCode(), forFunction(acceleratorFunction()),
                        combinesStoredArgumentsNode())
          .bind("stored"),
      [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
        const auto *Call = Match.Nodes.getNodeAs<CXXMemberCallExpr>("stored");
        llvm::SmallVector<std::pair<const Expr *, std::string>, 2> Combined;
        combinesStoredArguments(Call, *Match.Context, Combined);
        llvm::SmallVector<Edit, 1> Edits;
        for (const auto &[Argument, Op] : Combined) {
          Edits.push_back(insertionAt(Argument->getBeginLoc(), "accelerator.reduce("));
          Edits.push_back(
              insertionAt(Lexer::getLocForEndOfToken(Argument->getEndLoc(), 0, *Match.SourceManager,
                                                     Match.Context->getLangOpts()),
                          ", \"" + Op + "\")"));
        }
        return Edits;
      },
      explain("stored", "the object gets the global batch's values each step, combined across "
                        "processes, so what it computes from them is the original's"));
  // Kept where accel-reduce cannot follow it: said, since a read later is one process's.
  auto Stored =
      makeRule(stmt(anyOf(cxxMemberCallExpr(), binaryOperator(isAssignmentOperator())),
                    inUserCode(), storesBatchValueNode(),
                    unless(cxxMemberCallExpr(forFunction(acceleratorFunction()),
                                             combinesStoredArgumentsNode())))
                   .bind("stored"),
               noEdits(), finding(Finding::Warning, "stored", [](const MatchResult &Match) {
                 std::string Holder;
                 storesBatchValue(Match.Nodes.getNodeAs<Stmt>("stored"), *Match.Context, Holder);
                 return "a value of this process's batch goes into '" + Holder +
                        "', which accel-reduce does not follow: read after the loop, it holds this "
                        "process's share of each batch only; add the value up in a local number "
                        "(accel-reduce combines those), or combine what you read from it with "
                        "accelerator.reduce(value, \"sum\") or accelerator.reduce(value, \"mean\")";
               }));
  // In a function without the accelerator (an evaluation helper given the sharded training
  // loader): nothing to combine with, so said.
  auto WithoutAccelerator = makeRule(
      declRefExpr(inUserCode(), forFunction(functionDecl(unless(acceleratorFunction()))),
                  anyOf(readsStatistic(), readsUnclear()))
          .bind("read"),
      noEdits(), dynamicFinding("read", [](const MatchResult &Match) {
        const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("read");
        std::string Name = Ref->getDecl()->getNameAsString();
        Finding Result;
        Result.Kind = Finding::Warning;
        // In training a declined loop leaves as written, nothing is shared: dropped there.
        Result.OnlyWhereRewritten = true;
        if (std::optional<std::string> Said = knownReason(Ref, *Match.Context)) {
          Result.Message = *Said;
          return Result;
        }
        Result.Message =
            "'" + Name +
            "' is added up over a sharded loader's batches, so it holds this process's "
            "share only, and this function has no accelerator to combine it with; pass "
            "'accelerate::Accelerator &accelerator' in and read it as accelerator.reduce(" +
            Name + ", \"sum\") (or \"mean\" for a sum of per-batch means)";
        return Result;
      }));
  // The safety net: a printed value that the loop changes from this process's batches in a
  // way none of the rules above follows is said to be this process's share.
  auto ChangedFromBatches = makeRule(
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), printsChangedFromBatches())
          .bind("read"),
      noEdits(), finding(Finding::Warning, "read", [](const MatchResult &Match) {
        const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("read");
        const Stmt *Change = nullptr;
        const VarDecl *Source = nullptr;
        printsValueChangedFromBatches(Ref, *Match.Context, Change, Source);
        const std::string Name = Ref->getDecl()->getNameAsString();
        std::string Subject = Source == Ref->getDecl()
                                  ? "'" + Name + "' is changed"
                                  : "'" + Name + "' is made from '" + Source->getNameAsString() +
                                        "', which is changed";
        // Changed by a helper it is passed to by reference.
        if (const auto *Param = dyn_cast<ParmVarDecl>(cast<DeclRefExpr>(Change)->getDecl())) {
          Subject += " by '" + cast<FunctionDecl>(Param->getDeclContext())->getNameAsString() +
                     "' (its parameter '" + Param->getNameAsString() + "')";
        }
        return Subject + " from this process's batches (line " +
               std::to_string(Match.SourceManager->getExpansionLineNumber(Change->getBeginLoc())) +
               ") in a way accel-reduce does not follow, so what is printed here is this "
               "process's share only; combine it with accelerator.reduce(value, \"sum\") (counts "
               "and per-sample sums) or \"mean\" (sums of per-batch means) by hand, or keep it "
               "as a plain local running sum (`total += loss.item<double>() * n;`), which "
               "accel-reduce combines";
      }));
  return applyFirst<Finding>({OnSomeProcesses("read"), PrintedRule, PrintedCopyRule, ReadRule,
                              RescaleRule, UnclearRead, UnclearPrint, UnclearRescale,
                              StoredCombined, Stored, WithoutAccelerator, ChangedFromBatches});
}

} // namespace accel::rewrites
