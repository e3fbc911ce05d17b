//===- BackwardRule.cpp - accel-backward ----------------------------------===//
//
// loss.backward(args) -> accelerator.backward(loss, args), and
// torch::autograd::backward({loss}) -> accelerator.backward(loss): the accelerator finishes
// the gradient all-reduce that started during backward. See docs/rules/accel-backward.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/BatchCoupling.h"
#include "analysis/BatchValues.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"
#include "support/Templates.h"

#include "clang/AST/ExprCXX.h"
#include "clang/Lex/Lexer.h"

#include <optional>

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

constexpr llvm::StringLiteral Explanation =
    "accelerator.backward runs backward and completes the gradient all-reduce across processes";

/// The element of a one-element braced list ({loss}), or null.
const Expr *singleElement(const Expr *List) {
  const Expr *E = spelled(List);
  if (const auto *Init = dyn_cast_or_null<InitListExpr>(E)) {
    return Init->getNumInits() == 1 ? Init->getInit(0) : nullptr;
  }
  if (const auto *Construct = dyn_cast_or_null<CXXStdInitializerListExpr>(E)) {
    return singleElement(Construct->getSubExpr());
  }
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E)) {
    // std::vector<Tensor>{loss}: the initializer_list argument.
    if (Construct->getNumArgs() >= 1) {
      return singleElement(Construct->getArg(0));
    }
  }
  return nullptr;
}

/// The tensor Backward differentiates: `loss` of `loss.backward()`, or the one tensor of
/// `torch::autograd::backward({loss})`; null when there is none.
const Expr *differentiatedLoss(const CallExpr *Backward) {
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Backward)) {
    return Member->getImplicitObjectArgument();
  }
  return Backward->getNumArgs() > 0 ? singleElement(Backward->getArg(0)) : nullptr;
}

/// Whether Backward is in a planned loop over a sharded loader: each process computes its
/// loss on its own part of the batches.
bool differentiatesShardedBatches(const CallExpr *Backward, ASTContext &Ctx) {
  const LoopPlan *Plan =
      AnalysisContext::of(Ctx).trainingPlans().planOf(Backward, Ctx.getSourceManager());
  return Plan && Plan->sound() && Plan->Loader;
}

/// The replacement for a backward call, or nullopt when accelerator.backward cannot take it.
/// The loss as written, times accelerator.num_processes() when it sums over the batch's
/// samples (BatchValues.h): the gradient all-reduce averages, so each process's gradient of
/// its part's sum would otherwise add up to 1/N of the global batch's sum, the gradient the
/// original computes (Adam barely notices; SGD trains N times slower).
/// Only where each process computes it on its own part of the batches (a planned loop over a
/// sharded loader): on data every process sees whole, the processes' gradients are the same.
std::string lossText(const CallExpr *Backward, const Expr *Loss, std::string Written,
                     ASTContext &Ctx) {
  if (!differentiatesShardedBatches(Backward, Ctx)) {
    return Written;
  }
  bool Sum = classifyBatchValue(Loss, Ctx) == BatchValue::Sum;
  // In an instantiated template's pattern a dependent loss classifies as nothing: the copies
  // of it in the instantiations say what it is, so that pattern and instantiations make one
  // edit.
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Backward), Ctx);
  if (!Sum && isInstantiatedPattern(Function)) {
    llvm::SmallVector<const Stmt *, 2> Copies = instantiatedCopies(Loss, Function);
    Sum = !Copies.empty() && llvm::all_of(Copies, [&](const Stmt *Copy) {
      return classifyBatchValue(cast<Expr>(Copy), Ctx) == BatchValue::Sum;
    });
  }
  if (!Sum) {
    return Written;
  }
  const Expr *E = Loss->IgnoreImplicit();
  bool Simple = isa<DeclRefExpr>(E) || isa<CallExpr>(E) || isa<MemberExpr>(E) ||
                isa<ParenExpr>(E) || isa<UnaryOperator>(E);
  return (Simple ? Written : "(" + Written + ")") + " * accelerator.num_processes()";
}

/// Whether Backward differentiates a class-weighted mean (BatchValues.h) of a batch that each
/// process computes on its own part of.
bool weighsClassesOfShardedBatches(const CallExpr *Backward, ASTContext &Ctx) {
  const Expr *Loss = differentiatedLoss(Backward);
  return Loss && differentiatesShardedBatches(Backward, Ctx) && averagesOverClassWeights(Loss, Ctx);
}

/// Whether E adds up a term that sums over the batch's samples (BatchValues.h), through +, -,
/// a scaling by a constant and the local variables it is computed from.
bool hasSumTerm(const Expr *E, ASTContext &Ctx, int Depth = 0) {
  E = E ? spelled(E) : nullptr;
  if (!E || Depth > 6) {
    return false;
  }
  if (classifyBatchValue(E, Ctx) == BatchValue::Sum) {
    return true;
  }
  const Expr *Left = nullptr, *Right = nullptr;
  bool Additive = false, Product = false;
  if (const auto *Binary = dyn_cast<BinaryOperator>(E)) {
    Left = Binary->getLHS();
    Right = Binary->getRHS();
    Additive = Binary->isAdditiveOp();
    Product = Binary->getOpcode() == BO_Mul;
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
             Operator && Operator->getNumArgs() == 2) {
    Left = Operator->getArg(0);
    Right = Operator->getArg(1);
    Additive = Operator->getOperator() == OO_Plus || Operator->getOperator() == OO_Minus;
    Product = Operator->getOperator() == OO_Star;
  }
  if (Additive) {
    return hasSumTerm(Left, Ctx, Depth + 1) || hasSumTerm(Right, Ctx, Depth + 1);
  }
  if (Product) {
    return (classifyBatchValue(Left, Ctx) == BatchValue::Constant &&
            hasSumTerm(Right, Ctx, Depth + 1)) ||
           (classifyBatchValue(Right, Ctx) == BatchValue::Constant &&
            hasSumTerm(Left, Ctx, Depth + 1));
  }
  const auto *Ref = dyn_cast<DeclRefExpr>(E);
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  if (Var && Var->isLocalVarDecl()) {
    if (Var->getInit() && !declaredEmpty(Var) && hasSumTerm(Var->getInit(), Ctx, Depth + 1)) {
      return true;
    }
    return llvm::any_of(assignedValues(Var),
                        [&](const Expr *Value) { return hasSumTerm(Value, Ctx, Depth + 1); });
  }
  return false;
}

/// Whether Backward, in a loop over a sharded loader, differentiates a loss that is neither a
/// mean nor a sum over the batch's samples by what BatchValues can tell, and adds up a term
/// that sums over them (a mean plus a sum, a sum plus a penalty on the parameters):
/// accelerator.backward would average the processes' gradients, right for a mean only, and
/// scaling it all would scale the penalty too.
bool differentiatesUnclearReduction(const CallExpr *Backward, ASTContext &Ctx) {
  // In a template's pattern a dependent loss classifies as nothing; its instantiations say.
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Backward), Ctx);
  const Expr *Loss = differentiatedLoss(Backward);
  if (!Loss || !differentiatesShardedBatches(Backward, Ctx) || isInstantiatedPattern(Function) ||
      averagesOverClassWeights(Loss, Ctx)) {
    return false;
  }
  const BatchValue Kind = classifyBatchValue(Loss, Ctx);
  return Kind != BatchValue::Mean && Kind != BatchValue::Sum && hasSumTerm(Loss, Ctx);
}

/// The backward call whose object Loss is (`loss` of `loss.backward()`), or null.
const CXXMemberCallExpr *backwardCallOn(const Expr &Loss, ASTContext &Ctx) {
  auto Parents = Ctx.getParents(Loss);
  const auto *Member = Parents.empty() ? nullptr : Parents[0].get<MemberExpr>();
  auto Up = Member ? Ctx.getParents(*Member) : DynTypedNodeList(DynTypedNode());
  const auto *Call = Member && !Up.empty() ? Up[0].get<CXXMemberCallExpr>() : nullptr;
  return Call && isBackwardCall(Call) ? Call : nullptr;
}

/// The tensor a backward call (`loss.backward()`) differentiates, when it is a class-weighted
/// mean of batches each process computes on its own part of.
AST_MATCHER(Expr, differentiatedClassWeighted) {
  const CXXMemberCallExpr *Call = backwardCallOn(Node, Finder->getASTContext());
  return Call && weighsClassesOfShardedBatches(Call, Finder->getASTContext());
}

/// The same for a loss whose reduction cannot be told (differentiatesUnclearReduction).
AST_MATCHER(Expr, differentiatedUnclearReduction) {
  const CXXMemberCallExpr *Call = backwardCallOn(Node, Finder->getASTContext());
  return Call && differentiatesUnclearReduction(Call, Finder->getASTContext());
}

std::optional<std::string> replacement(const MatchResult &Match) {
  const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
  ASTContext &Ctx = *Match.Context;
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
  std::string Loss;
  llvm::SmallVector<std::string, 3> Rest;
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call)) {
    // backward(gradient, retain_graph, create_graph, inputs): accelerator.backward has all
    // but inputs.
    if (Args.size() > 3) {
      return std::nullopt;
    }
    const std::string Object = calledObject(Member, Ctx);
    if (!Object.empty()) {
      Loss = lossText(Call, Member->getImplicitObjectArgument(), Object, Ctx);
    }
    // `(loss / accum).backward()`: the argument needs no parentheses of its own.
    const auto *Parens =
        dyn_cast_or_null<ParenExpr>(Member->getImplicitObjectArgument()->IgnoreImplicit());
    if (Parens && Loss == Object) {
      if (std::string Inner = sourceText(Parens->getSubExpr(), Ctx); !Inner.empty()) {
        Loss = Inner;
      }
    }
    if (!Args.empty()) {
      // The arguments as written, comments included.
      llvm::Expected<CharSourceRange> Written = callArgs("call")(Match);
      if (!Written) {
        llvm::consumeError(Written.takeError());
        return std::nullopt;
      }
      Rest.push_back(
          Lexer::getSourceText(*Written, *Match.SourceManager, Ctx.getLangOpts()).trim().str());
    }
  } else {
    // torch::autograd::backward(tensors, grad_tensors, retain_graph, create_graph, inputs)
    if (Args.empty() || Args.size() > 4) {
      return std::nullopt;
    }
    const Expr *Tensor = singleElement(Args[0]);
    if (!Tensor) {
      return std::nullopt;
    }
    Loss = lossText(Call, Tensor, sourceText(Tensor, Ctx), Ctx);
    if (Args.size() >= 2) {
      const Expr *Gradient = singleElement(Args[1]);
      if (!Gradient) {
        const auto *Empty = dyn_cast_or_null<InitListExpr>(spelled(Args[1]));
        if (!Empty || Empty->getNumInits() != 0) {
          return std::nullopt;
        }
        Rest.push_back("{}");
      } else {
        Rest.push_back(sourceText(Gradient, Ctx));
      }
    }
    for (size_t I = 2; I < Args.size(); ++I) {
      Rest.push_back(sourceText(Args[I], Ctx));
    }
  }
  if (Loss.empty()) {
    return std::nullopt;
  }
  std::string Text = "accelerator.backward(" + Loss;
  for (const std::string &Arg : Rest) {
    if (Arg.empty()) {
      return std::nullopt;
    }
    Text += ", " + Arg;
  }
  return Text + ")";
}

/// Where the loss Backward differentiates couples the rows of batches each process has its
/// own part of (BatchCoupling.h), or null.
const Expr *couplingOfShardedBatches(const CallExpr *Backward, ASTContext &Ctx) {
  const LoopPlan *Plan =
      AnalysisContext::of(Ctx).trainingPlans().planOf(Backward, Ctx.getSourceManager());
  const Expr *Loss = differentiatedLoss(Backward);
  return Loss && Plan && Plan->sound() && Plan->Loader ? rowCoupling(Loss, Plan->Unit, Ctx)
                                                       : nullptr;
}

/// The same for a loss that couples the rows of its batch.
AST_MATCHER(Expr, differentiatedCoupled) {
  const CXXMemberCallExpr *Call = backwardCallOn(Node, Finder->getASTContext());
  return Call && couplingOfShardedBatches(Call, Finder->getASTContext());
}

/// A warning at the loss a backward differentiates, where Loss matches it: the call itself is
/// rewritten, and a warning finding of the call's would drop its edit.
Rule lossWarning(ast_matchers::internal::Matcher<Expr> Loss, Generator<Finding> Warning) {
  return makeRule(expr(inUserCode(), std::move(Loss)).bind("loss"), noEdits(), std::move(Warning));
}

AST_MATCHER(CallExpr, beforePrepare) { return runsBeforePrepare(&Node, Finder->getASTContext()); }

} // namespace

Rule makeBackwardRule() {
  auto Backward = callExpr(inUserCode(), backwardCall()).bind("call");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    std::optional<std::string> Text = replacement(Match);
    if (!Text) {
      return llvm::SmallVector<Edit, 1>();
    }
    return edit(changeTo(node("call"), cat(*Text)))(Match);
  };
  auto Rewrite = dynamicFinding("call", [](const MatchResult &Match) {
    Finding Result;
    // Inside a macro expansion the engine leaves the call alone and says so; that its text
    // cannot be read there says nothing about its arguments.
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    bool InMacro = Call->getBeginLoc().isMacroID() || Call->getEndLoc().isMacroID();
    if (InMacro || replacement(Match)) {
      Result.Message = Explanation.str();
    } else {
      Result.Kind = Finding::Warning;
      Result.Message =
          "this backward call has arguments accelerator.backward does not take (it takes the "
          "loss, a gradient, retain_graph and create_graph); call accelerator.backward(loss, "
          "...) by hand";
    }
    return Result;
  });
  auto WeightedLoss = lossWarning(
      differentiatedClassWeighted(),
      warn("loss", "this loss is averaged with class weights (or an ignore_index), so it "
                   "divides by the weights of this process's targets, not of the global "
                   "batch's: the averaged gradient, and the loss accel-reduce would print, "
                   "differ a little from the original's (as under PyTorch's DDP). For the "
                   "original's exactly, make the loss's reduction kSum and divide it by "
                   "accelerator.reduce(weight.index_select(0, target).sum(), \"sum\"), times "
                   "accelerator.num_processes()"));
  auto UnclearLoss = lossWarning(
      differentiatedUnclearReduction(),
      warn("loss", "accel-rewrite cannot tell whether this loss is a mean or a sum over the "
                   "batch's samples (it adds a mean and a sum, or a sum and a term that does "
                   "not depend on the batch, such as a penalty on the weights): "
                   "accelerator.backward averages the processes' gradients, which is right for "
                   "a mean only, so the gradient of a sum over this process's part would be 1/N "
                   "of the original's. Multiply each term summed over the batch by "
                   "accelerator.num_processes() by hand (`accelerator.backward(recon + kl * "
                   "accelerator.num_processes())`), leaving means and penalties as they are"));
  auto CoupledLoss = lossWarning(
      differentiatedCoupled(), finding(Finding::Warning, "loss", [](const MatchResult &Match) {
        ASTContext &Ctx = *Match.Context;
        const auto *Loss = Match.Nodes.getNodeAs<Expr>("loss");
        const Expr *Coupling = couplingOfShardedBatches(backwardCallOn(*Loss, Ctx), Ctx);
        const SourceManager &SM = Ctx.getSourceManager();
        return "this loss relates the batch's rows to each other (`" + sourceText(Coupling, Ctx) +
               "`, line " + std::to_string(SM.getExpansionLineNumber(Coupling->getBeginLoc())) +
               ": a value reduced over the batch combined with each row, or rows compared "
               "with rows): each process computes it over its own rows only, so the loss and "
               "the averaged gradients are not the original's at the global batch (they are "
               "what PyTorch's DDP computes: fewer in-batch negatives or batch statistics of "
               "fewer rows), and accel verify cannot match the original exactly. Keep it if "
               "per-process batches are what you want; otherwise compute the batch-wide values "
               "from data every process holds, or train this loop on one process";
      }));
  return applyFirst<Finding>(
      {WeightedLoss, UnclearLoss, CoupledLoss,
       makeRule(callExpr(Backward, beforePrepare()), noEdits(),
                explain("call", "this backward runs before prepare (a demonstration such as a "
                                "gradient check): left as written, no setting applies yet")),
       makeRule(callExpr(Backward, forFunction(acceleratorFunction())), Edits, Rewrite),
       noAcceleratorRule(callExpr(Backward, forFunction(functionDecl().bind("function"))), "call",
                         "backward",
                         "add a parameter 'accelerate::Accelerator& accelerator' to it, pass the "
                         "accelerator in, and call accelerator.backward(loss)")});
}

} // namespace accel::rewrites
