//===- Statistics.cpp - Running statistics over a sharded loader ----------===//
#include "analysis/Statistics.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/BatchValues.h"
#include "analysis/CountedBatchLoops.h"
#include "analysis/DivergentSteps.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"

#include <optional>

using namespace clang;

namespace accel::rewrites {
namespace {

/// The nearest ancestors of Node up to its function, innermost first.
llvm::SmallVector<DynTypedNode, 8> ancestors(const DynTypedNode &Node, ASTContext &Ctx) {
  llvm::SmallVector<DynTypedNode, 8> Result;
  DynTypedNode Current = Node;
  for (int Depth = 0; Depth < 256; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty() || Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>()) {
      break;
    }
    Current = Parents[0];
    Result.push_back(Current);
  }
  return Result;
}

/// Whether S runs over this process's share of the batches: the nearest loop over batches
/// around it is a sharded one. A loop over a loader every process sees whole, nested in the
/// training loop (a validation pass every few steps), adds up the same data everywhere.
bool nearestBatchLoopIsSharded(const Stmt *S, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    const auto *Loop = Ancestor.get<Stmt>();
    if (Loop && iteratesShardedLoader(Loop, Ctx)) {
      return true;
    }
    if (const auto *Range = dyn_cast_or_null<CXXForRangeStmt>(Loop);
        Range && iteratedVar(Range) && makeDataLoaderInit(iteratedVar(Range))) {
      return false;
    }
    if (const VarDecl *Walked = Loop ? walkedLoader(Loop) : nullptr;
        Walked && makeDataLoaderInit(Walked)) {
      return false;
    }
  }
  return false;
}

/// Whether Read is inside a lambda that Var's function holds (Var is captured, not its own).
bool readInOtherLambda(const Stmt *Read, const VarDecl *Var, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Read);
  for (int Depth = 0; Depth < 256; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return false;
    }
    const CXXMethodDecl *Call = nullptr;
    if (const auto *Lambda = Parents[0].get<LambdaExpr>()) {
      Call = Lambda->getCallOperator();
    } else if (const auto *Function = Parents[0].get<FunctionDecl>()) {
      const auto *Method = dyn_cast<CXXMethodDecl>(Function);
      if (!Method || !Method->getParent()->isLambda()) {
        return false;
      }
      Call = Method;
    }
    if (Call) {
      return Call != Var->getDeclContext();
    }
    Current = Parents[0];
  }
  return false;
}

/// The for-loop whose header declares Var (`for (int64_t i = 0; ...)`), or null.
const ForStmt *forLoopDeclaring(const VarDecl *Var, ASTContext &Ctx) {
  for (const DynTypedNode &Declaration : Ctx.getParents(*Var)) {
    for (const DynTypedNode &Parent : Ctx.getParents(Declaration)) {
      if (const auto *Loop = Parent.get<ForStmt>();
          Loop && Loop->getInit() == Declaration.get<Stmt>()) {
        return Loop;
      }
    }
  }
  return nullptr;
}

/// Declared in the sharded loop's body: it lives for one batch (a loop counter, a per-batch
/// value), not across the loop.
bool declaredInsideShardedLoop(const VarDecl *Var, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Var), Ctx)) {
    if (const auto *Loop = Ancestor.get<Stmt>(); Loop && iteratesShardedLoader(Loop, Ctx)) {
      return true;
    }
  }
  return false;
}

/// Whether Ref is inside the value assigned to its own variable in the sharded loop (`ema` on
/// the right of `ema = 0.9 * ema + ...`): part of an update, not a read of the result. (After
/// the loop, `x = x / n` is where x is combined.)
bool insideOwnUpdate(const DeclRefExpr *Ref, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Ref), Ctx)) {
    // `x = x + v` on a number, or on a tensor (an operator call).
    const Expr *Left = nullptr;
    if (const auto *Assign = Ancestor.get<BinaryOperator>(); Assign && Assign->isAssignmentOp()) {
      Left = Assign->getLHS();
    } else if (const auto *Operator = Ancestor.get<CXXOperatorCallExpr>();
               Operator && Operator->isAssignmentOp() && Operator->getNumArgs() == 2) {
      Left = Operator->getArg(0);
    }
    const auto *Target =
        Left ? dyn_cast<DeclRefExpr>(Left->IgnoreImplicit()->IgnoreParens()) : nullptr;
    if (Target && Target->getDecl() == Ref->getDecl()) {
      return nearestBatchLoopIsSharded(Ancestor.get<Stmt>(), Ctx);
    }
  }
  return false;
}

/// The loops between S and the sharded loop around it, innermost first; false when no sharded
/// loop is around S.
bool loopsWithinShardedLoop(const Stmt *S, ASTContext &Ctx,
                            llvm::SmallVectorImpl<const Stmt *> &Between) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    const auto *Loop = Ancestor.get<Stmt>();
    if (!Loop || !(isa<ForStmt>(Loop) || isa<CXXForRangeStmt>(Loop) || isa<WhileStmt>(Loop) ||
                   isa<DoStmt>(Loop))) {
      continue;
    }
    if (iteratesShardedLoader(Loop, Ctx)) {
      return true;
    }
    Between.push_back(Loop);
  }
  return false;
}

/// Inside a loop that is itself inside the sharded loop (a loop over the batch's samples).
bool insideLoopWithinShardedLoop(const Stmt *S, ASTContext &Ctx) {
  llvm::SmallVector<const Stmt *, 2> Between;
  return loopsWithinShardedLoop(S, Ctx, Between) && !Between.empty();
}

bool mentionsTensor(const Expr *E); // below

/// Inside a loop within the sharded loop whose trip count may differ between processes: its
/// header computes with the batch (a loop over the batch's samples, `i < b.data.size(0)`) or
/// with anything the analysis cannot see. A loop over a list of the program's
/// (`for (auto &cb : callbacks_)`) runs as often on every process.
bool insideBatchDependentLoop(const Stmt *S, ASTContext &Ctx) {
  llvm::SmallVector<const Stmt *, 2> Between;
  if (!loopsWithinShardedLoop(S, Ctx, Between)) {
    return false;
  }
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*S), Ctx);
  return llvm::any_of(Between, [&](const Stmt *Loop) {
    const Expr *Header = conditionOf(Loop);
    if (const auto *Range = dyn_cast<CXXForRangeStmt>(Loop)) {
      Header = Range->getRangeInit();
    }
    return !Header || mentionsTensor(Header) ||
           (Function && computedFromTensors(Header, Function->getBody()));
  });
}

/// Inside a loop over a loader parameter that is sharded in one call and whole in another.
bool insideLoopOfMixedLoaders(const Stmt *S, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    if (const auto *Loop = Ancestor.get<CXXForRangeStmt>();
        Loop && receivesUnshardedLoaderToo(iteratedVar(Loop), Ctx)) {
      return true;
    }
  }
  return false;
}

/// A call of a tensor method, declared on at::Tensor or its base at::TensorBase.
bool isTensorMethodCall(const Stmt *S, llvm::StringRef Method) {
  return isMethodCall(S, "at::Tensor", Method) || isMethodCall(S, "at::TensorBase", Method);
}

const VarDecl *assignedVar(const Expr *Target) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Target ? Target->IgnoreParenImpCasts() : nullptr);
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

bool isConstant(const Expr *E, ASTContext &Ctx) {
  return !E->isValueDependent() && E->isEvaluatable(Ctx);
}

/// A torch::Tensor variable (a tensor that a loop adds batch values to:
/// `epoch_loss += loss.detach()`).
bool isTensorVar(const VarDecl *Var) {
  const auto *Record = Var->getType().getNonReferenceType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == "at::Tensor";
}

/// A fresh tensor of zeros or of a number written out (`torch::zeros({})`,
/// `torch::tensor(0.0)`): a tensor statistic's reset.
bool isConstantTensor(const Expr *E, ASTContext &Ctx) {
  const auto *Call = dyn_cast_or_null<CallExpr>(spelled(E));
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee) {
    return false;
  }
  std::string Name = Callee->getQualifiedNameAsString();
  if (Name == "torch::zeros" || Name == "at::zeros") {
    return true;
  }
  return (Name == "torch::tensor" || Name == "torch::scalar_tensor") && Call->getNumArgs() >= 1 &&
         isConstant(spelled(Call->getArg(0)), Ctx);
}

} // namespace

bool iteratesShardedLoader(const Stmt *Loop, ASTContext &Ctx) {
  if (const auto *Range = dyn_cast<CXXForRangeStmt>(Loop)) {
    return isShardedLoader(iteratedVar(Range), Ctx, 0) || isBatchListLoop(Range, Ctx);
  }
  if (const VarDecl *Walked = walkedLoader(Loop)) {
    return isShardedLoader(Walked, Ctx, 0);
  }
  const auto *Counted = dyn_cast<ForStmt>(Loop);
  return Counted && cutsSharedBatches(Counted, Ctx);
}

namespace {

unsigned offsetIn(const Stmt *S, const SourceManager &SM) {
  return SM.getFileOffset(SM.getExpansionLoc(S->getBeginLoc()));
}

/// One statement that writes a running statistic.
struct Write {
  /// Rescale: after the loop, the statistic scaled in place (`loss /= batches`,
  /// `loss = loss / batches`). It reads the sum (combined there) and leaves a value every
  /// later read takes as it is.
  /// Last: in the sharded loop, a value of the batch assigned (`last = loss.item<double>()`):
  /// read after the loop it is the last batch's, combined like that value.
  enum KindType { Reset, Add, Rescale, Last, Other } Kind;
  const Stmt *At;
  /// For Add: what is added (null for ++); for Last and an assignment of Other: what is
  /// assigned.
  const Expr *Increment;
  /// For Add: each element of Increment is added somewhere into the tensor
  /// (`t.index_put_(indices, values, true)`, `t.index_add_(0, index, source)`): per-sample
  /// values make a sum, whatever they are.
  bool ElementsAdded = false;
};

/// In `x = x + v` or `x = v + x` (Sum is the right-hand side, for a number or a tensor), the
/// `v` added to Var; null for anything else. The long form of `x += v`, as some courses write it.
const Expr *addedTo(const VarDecl *Var, const Expr *Sum) {
  const Expr *Left = nullptr;
  const Expr *Right = nullptr;
  Sum = spelled(Sum);
  if (const auto *Plus = dyn_cast<BinaryOperator>(Sum); Plus && Plus->getOpcode() == BO_Add) {
    Left = Plus->getLHS();
    Right = Plus->getRHS();
  } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Sum);
             Operator && Operator->getOperator() == OO_Plus && Operator->getNumArgs() == 2) {
    Left = Operator->getArg(0);
    Right = Operator->getArg(1);
  } else {
    return nullptr;
  }
  if (assignedVar(spelled(Left)) == Var && !refersTo(Right, Var)) {
    return Right;
  }
  if (assignedVar(spelled(Right)) == Var && !refersTo(Left, Var)) {
    return Left;
  }
  return nullptr;
}

/// A write of a tensor statistic: its operators `+=`, `=`, `/=`, and its in-place methods.
std::optional<Write> tensorWrite(const VarDecl *Var, const Stmt *S, ASTContext &Ctx) {
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(S);
      Operator && Operator->isAssignmentOp() && Operator->getNumArgs() == 2 &&
      assignedVar(Operator->getArg(0)) == Var) {
    const Expr *Value = Operator->getArg(1);
    switch (Operator->getOperator()) {
    case OO_PlusEqual:
      return Write{Write::Add, S, Value};
    case OO_Equal:
      if (isConstantTensor(Value, Ctx)) {
        return Write{Write::Reset, S, nullptr};
      }
      if (const Expr *Added = addedTo(Var, Value)) {
        return Write{Write::Add, S, Added};
      }
      // `t = torch::cat({t, loss.view({1})})`: computed, from what it assigns.
      return Write{Write::Other, S, Value};
    default:
      // Scaled in place (`epoch_loss /= batches`): accel-reduce combines a tensor where it is
      // read, not there, so such a statistic is unclear.
      return Write{Write::Other, S, nullptr};
    }
  }
  const auto *Method = dyn_cast<CXXMemberCallExpr>(S);
  const auto *Callee = Method ? Method->getMethodDecl() : nullptr;
  if (!Callee || assignedVar(Method->getImplicitObjectArgument()) != Var ||
      !Callee->getDeclName().isIdentifier() || !Callee->getName().ends_with("_")) {
    return std::nullopt;
  }
  if (Callee->getName() == "add_" && Method->getNumArgs() >= 1) {
    // `t.add_(loss, n)` adds loss times n, which the value alone does not tell.
    const bool Scaled = Method->getNumArgs() >= 2 && !isa<CXXDefaultArgExpr>(Method->getArg(1));
    return Write{Scaled ? Write::Other : Write::Add, S, Scaled ? Method : Method->getArg(0)};
  }
  if (Callee->getName() == "zero_") {
    return Write{Write::Reset, S, nullptr};
  }
  // Counted in place (`confusion.index_put_({target, pred}, ones, true)`, `t.index_add_(0,
  // index, source)`, `t.scatter_add_(0, index, source)`): its values are added up.
  const llvm::StringRef Name = Callee->getName();
  bool Accumulates = false;
  if (Name == "index_put_" && Method->getNumArgs() == 3) {
    const auto *Flag = dyn_cast<CXXBoolLiteralExpr>(Method->getArg(2)->IgnoreParenImpCasts());
    Accumulates = Flag && Flag->getValue();
  }
  if (Accumulates ||
      ((Name == "index_add_" || Name == "scatter_add_") && Method->getNumArgs() == 3)) {
    Write Added{Write::Add, S, Method->getArg(Accumulates ? 1 : 2)};
    Added.ElementsAdded = true;
    return Added;
  }
  // Changed in place another way (`confusion.index_put_(..., true)`): computed, from the call.
  return Write{Write::Other, S, Method};
}

/// The condition of an `if` (or `?:`, or a nested `while`) around S inside the sharded loop
/// that holds it, or null.
const Expr *conditionInShardedLoop(const Stmt *S, ASTContext &Ctx) {
  const Stmt *Previous = S;
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    const auto *Current = Ancestor.get<Stmt>();
    if (!Current) {
      continue;
    }
    if (iteratesShardedLoader(Current, Ctx)) {
      return nullptr;
    }
    const Expr *Condition = nullptr;
    if (const auto *If = dyn_cast<IfStmt>(Current)) {
      Condition = If->getCond();
    } else if (const auto *Conditional = dyn_cast<ConditionalOperator>(Current)) {
      Condition = Conditional->getCond();
    } else if (const auto *While = dyn_cast<WhileStmt>(Current)) {
      Condition = While->getCond();
    }
    if (Condition && Condition != Previous) {
      return Condition;
    }
    Previous = Current;
  }
  return nullptr;
}

/// Every write of Var in Function's body, in source order.
std::vector<Write> writesOf(const VarDecl *Var, const FunctionDecl *Function, ASTContext &Ctx) {
  std::vector<Write> Writes;
  const bool Tensor = isTensorVar(Var);
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (Tensor) {
      if (std::optional<Write> W = tensorWrite(Var, S, Ctx)) {
        Writes.push_back(*W);
      }
      return;
    }
    if (const auto *Compound = dyn_cast<CompoundAssignOperator>(S);
        Compound && assignedVar(Compound->getLHS()) == Var) {
      Write::KindType Kind = Write::Other;
      if (Compound->getOpcode() == BO_AddAssign) {
        Kind = Write::Add;
      } else if ((Compound->getOpcode() == BO_DivAssign || Compound->getOpcode() == BO_MulAssign) &&
                 !nearestBatchLoopIsSharded(S, Ctx) && !refersTo(Compound->getRHS(), Var)) {
        Kind = Write::Rescale;
      }
      Writes.push_back({Kind, S, Compound->getRHS()});
    } else if (const auto *Unary = dyn_cast<UnaryOperator>(S);
               Unary && Unary->isIncrementDecrementOp() &&
               assignedVar(Unary->getSubExpr()) == Var) {
      Writes.push_back({Unary->isIncrementOp() ? Write::Add : Write::Other, S, nullptr});
    } else if (const auto *Assign = dyn_cast<BinaryOperator>(S);
               Assign && Assign->getOpcode() == BO_Assign && assignedVar(Assign->getLHS()) == Var) {
      // A reset (`running_loss = 0;`, also chained: `run_a = run_b = 0;`) starts the
      // statistic again; `x = x / n` after the loop rescales it; anything else is not one.
      const Expr *Assigned = Assign->getRHS()->IgnoreParenImpCasts();
      while (const auto *Chained = dyn_cast<BinaryOperator>(Assigned)) {
        if (Chained->getOpcode() != BO_Assign) {
          break;
        }
        Assigned = Chained->getRHS()->IgnoreParenImpCasts();
      }
      Write::KindType Kind = Write::Other;
      if (isConstant(Assigned, Ctx)) {
        Kind = Write::Reset;
      } else if (const Expr *Added = addedTo(Var, Assign->getRHS())) {
        Writes.push_back({Write::Add, S, Added});
        return;
      } else if (!nearestBatchLoopIsSharded(S, Ctx) && refersTo(Assign->getRHS(), Var)) {
        Kind = Write::Rescale;
      } else if (BatchValue Value = classifyBatchValue(Assign->getRHS(), Ctx);
                 nearestBatchLoopIsSharded(S, Ctx) && !refersTo(Assign->getRHS(), Var) &&
                 (Value == BatchValue::Mean || Value == BatchValue::Sum)) {
        Kind = Write::Last;
      }
      Writes.push_back(
          {Kind, S, Kind == Write::Last || Kind == Write::Other ? Assign->getRHS() : nullptr});
    }
  });
  // A count or a value kept only when this process's batch says so (`if (l < best) best =
  // l;`, `if (loss.item<float>() > 1) ++noisy;`): a selection, not a step count or the last
  // batch's value. What it is computed from is then its condition.
  for (Write &W : Writes) {
    if ((W.Kind == Write::Add || W.Kind == Write::Last) && nearestBatchLoopIsSharded(W.At, Ctx)) {
      const Expr *Condition = conditionInShardedLoop(W.At, Ctx);
      // `if (p.grad().defined())`: whether a tensor exists, not what it holds, which the
      // processes agree on (a parameter's gradient after the synchronising backward).
      const Expr *Asked = Condition ? Condition->IgnoreParenImpCasts() : nullptr;
      if (const auto *Not = dyn_cast_or_null<UnaryOperator>(Asked);
          Not && Not->getOpcode() == UO_LNot) {
        Asked = Not->getSubExpr()->IgnoreParenImpCasts();
      }
      if (Asked && isTensorMethodCall(Asked, "defined")) {
        continue;
      }
      if (Condition && computedFromTensors(Condition, Function->getBody())) {
        W.Kind = Write::Other;
        W.Increment = Condition;
      }
    }
  }
  return Writes;
}

/// The loops around S inside its function.
llvm::SmallVector<const Stmt *, 2> loopsAround(const Stmt *S, ASTContext &Ctx) {
  llvm::SmallVector<const Stmt *, 2> Loops;
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    const Stmt *Parent = Ancestor.get<Stmt>();
    if (Parent && (isa<ForStmt>(Parent) || isa<CXXForRangeStmt>(Parent) || isa<WhileStmt>(Parent) ||
                   isa<DoStmt>(Parent))) {
      Loops.push_back(Parent);
    }
  }
  return Loops;
}

/// `+= 1`: a step counter's increment.
bool addsOne(const Expr *Increment, ASTContext &Ctx) {
  Expr::EvalResult Value;
  return !Increment->isValueDependent() && Increment->EvaluateAsRValue(Value, Ctx) &&
         ((Value.Val.isInt() && Value.Val.getInt() == 1) ||
          (Value.Val.isFloat() && Value.Val.getFloat().isExactlyValue(1.0)));
}

/// Whether E computes with a tensor (of the batch, a loss): not only with plain numbers.
bool mentionsTensor(const Expr *E) {
  bool Found = false;
  forEachStmt(E, [&](const Stmt *S) {
    const auto *Value = dyn_cast<Expr>(S);
    if (Found || !Value) {
      return;
    }
    if (const auto *Record = Value->getType()->getAsCXXRecordDecl()) {
      std::string Name = Record->getQualifiedNameAsString();
      Found = Name == "at::Tensor" || Name == "at::TensorBase";
    }
  });
  return Found;
}

constexpr const char *DividedOtherwise =
    "it sums per-batch means and is divided by something other than a count of the steps, "
    "which means one thing under split_batches and another otherwise; divide it by a counter "
    "incremented once per batch";

/// A step counter: only `++n` / `n += 1` in a sharded loop, and resets.
bool isStepCounter(const VarDecl *Var, ASTContext &Ctx) {
  const auto *Function = Var ? dyn_cast<FunctionDecl>(Var->getDeclContext()) : nullptr;
  if (!Function || !Function->getBody() || !Var->isLocalVarDecl()) {
    return false;
  }
  bool Counts = false;
  for (const Write &W : writesOf(Var, Function, Ctx)) {
    if (W.Kind == Write::Reset) {
      continue;
    }
    if (W.Kind != Write::Add || (W.Increment && !addsOne(W.Increment, Ctx)) ||
        !nearestBatchLoopIsSharded(W.At, Ctx)) {
      return false;
    }
    Counts = true;
  }
  return Counts;
}

/// A step count: a step counter, or a number written out (`/ 8`, `/ kLogInterval` of a named
/// constant, a print every 8 steps): the
/// same in both loader modes, as the steps are. Not an expression of other variables
/// (`512 / batch_size`: the configured batch size means the global batch under split_batches
/// and one process's batch otherwise).
bool countsSteps(const Expr *Divisor, ASTContext &Ctx) {
  // A named constant (`constexpr int kLogInterval = 8;`) is a number written out too.
  auto NamedConstant = [&](const VarDecl *Var) {
    return Var->isConstexpr() ||
           (Var->getType().isConstQualified() && Var->getInit() && isConstant(Var->getInit(), Ctx));
  };
  // `steps`, or `batch_idx + 1` in a running mean printed inside the loop: the counter's
  // offset is a number written out, the same in both loader modes.
  const Expr *Counted = Divisor->IgnoreParenCasts();
  if (const auto *Offset = dyn_cast<BinaryOperator>(Counted);
      Offset && (Offset->getOpcode() == BO_Add || Offset->getOpcode() == BO_Sub)) {
    if (isConstant(Offset->getRHS(), Ctx)) {
      Counted = Offset->getLHS()->IgnoreParenCasts();
    } else if (Offset->getOpcode() == BO_Add && isConstant(Offset->getLHS(), Ctx)) {
      Counted = Offset->getRHS()->IgnoreParenCasts();
    }
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(Counted)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    if (Var && !NamedConstant(Var)) {
      return isStepCounter(Var, Ctx);
    }
  }
  bool NamesVariable = false;
  forEachStmt(Divisor, [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    NamesVariable = NamesVariable || (Var && !NamedConstant(Var));
  });
  return !NamesVariable && isConstant(Divisor, Ctx);
}

/// Read is not divided, or divided by a step counter (`total / steps`,
/// `total / static_cast<double>(steps)`).
bool dividedByStepCounterOrNothing(const Stmt *Read, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Read);
  for (int Depth = 0; Depth < 16; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return true;
    }
    const auto *Parent = Parents[0].get<Expr>();
    if (!Parent) {
      return true;
    }
    if (isa<ImplicitCastExpr, ParenExpr, CXXStaticCastExpr, CStyleCastExpr, CXXFunctionalCastExpr>(
            Parent)) {
      Current = Parents[0];
      continue;
    }
    const auto *Division = dyn_cast<BinaryOperator>(Parent);
    if (!Division || Division->getOpcode() != BO_Div ||
        Division->getLHS()->IgnoreParenCasts() != Read) {
      return true;
    }
    return countsSteps(Division->getRHS(), Ctx);
  }
  return true;
}

/// The member of a local object that Read divides, when the loop over this process's batches
/// adds batch values to that member (`st.loss += loss.item<double>() * x.size(0);` then
/// `st.loss /= n;`): accel-reduce does not follow such a sum (it warns where it is added to),
/// so the count that divides it is left alone too, or the ratio would mix one process's sum
/// with the global count. "" when Read divides no such member.
std::string unfollowedDividend(const Stmt *Read, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Read);
  const Expr *Dividend = nullptr;
  for (int Depth = 0; Depth < 8 && !Dividend; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    const auto *Parent = Parents.empty() ? nullptr : Parents[0].get<Expr>();
    if (!Parent) {
      return "";
    }
    if (isa<ImplicitCastExpr, ParenExpr, CXXStaticCastExpr, CStyleCastExpr, CXXFunctionalCastExpr>(
            Parent)) {
      Current = Parents[0];
      continue;
    }
    const auto *Division = dyn_cast<BinaryOperator>(Parent);
    if (!Division || (Division->getOpcode() != BO_Div && Division->getOpcode() != BO_DivAssign) ||
        Division->getRHS()->IgnoreParenCasts() != Current.get<Expr>()->IgnoreParenCasts()) {
      return "";
    }
    Dividend = Division->getLHS()->IgnoreParenImpCasts();
  }
  const auto *Member = dyn_cast_or_null<MemberExpr>(Dividend);
  const auto *Base =
      Member ? dyn_cast<DeclRefExpr>(Member->getBase()->IgnoreParenImpCasts()) : nullptr;
  const auto *Holder = Base ? dyn_cast<VarDecl>(Base->getDecl()) : nullptr;
  const auto *Function = Holder ? dyn_cast<FunctionDecl>(Holder->getDeclContext()) : nullptr;
  if (!Function || !Function->getBody()) {
    return "";
  }
  bool Added = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Add = dyn_cast<CompoundAssignOperator>(S);
    const auto *Target = Add && Add->getOpcode() == BO_AddAssign
                             ? dyn_cast<MemberExpr>(Add->getLHS()->IgnoreParenImpCasts())
                             : nullptr;
    const auto *TargetBase =
        Target ? dyn_cast<DeclRefExpr>(Target->getBase()->IgnoreParenImpCasts()) : nullptr;
    Added = Added || (TargetBase && TargetBase->getDecl() == Holder &&
                      Target->getMemberDecl() == Member->getMemberDecl() &&
                      nearestBatchLoopIsSharded(Add, Ctx));
  });
  return Added ? Holder->getNameAsString() + "." + Member->getMemberDecl()->getNameAsString() : "";
}

} // namespace

bool readsLastBatchTensor(const CXXMemberCallExpr *Item, ASTContext &Ctx); // below

StatisticRead classifyStatisticRead(const VarDecl *Var, const Stmt *Read, ASTContext &Ctx) {
  StatisticRead Result;
  if (!Var || !Var->isLocalVarDecl() || Var->isStaticLocal() || isa<ParmVarDecl>(Var)) {
    return Result;
  }
  QualType Type = Var->getType();
  const bool Tensor = isTensorVar(Var);
  if (Type->isReferenceType() || Type->isBooleanType() ||
      !(Type->isIntegerType() || Type->isRealFloatingType() || Tensor) || Type.isConstQualified()) {
    return Result;
  }
  if (Tensor && (!Var->hasInit() || !isConstantTensor(Var->getInit(), Ctx))) {
    return Result; // `torch::Tensor loss;` assigned each batch: the last batch's (BatchValues.h)
  }
  if (const ForStmt *Loop = forLoopDeclaring(Var, Ctx); Loop && iteratesShardedLoader(Loop, Ctx)) {
    return Result; // the counter of a loop that cuts its batches: it steps, it adds up nothing
  }
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function || !Function->getBody() || Function->isDependentContext()) {
    return Result; // a template's instantiations tell what its values are
  }
  const SourceManager &SM = Ctx.getSourceManager();
  std::vector<Write> Writes = writesOf(Var, Function, Ctx);
  // Read in a lambda (a progress logger): it runs where it is called, which the positions
  // below do not see.
  if (readInOtherLambda(Read, Var, Ctx) && llvm::any_of(Writes, [&](const Write &W) {
        return W.Kind != Write::Reset && nearestBatchLoopIsSharded(W.At, Ctx);
      })) {
    Result.Unclear = true;
    Result.Why = "it is read in a lambda, which runs where it is called, and accel-reduce does "
                 "not follow it there; read accelerator.reduce(" +
                 Var->getNameAsString() +
                 ", \"sum\") (per-sample sums and counts) or \"mean\" "
                 "(sums of per-batch means) in the lambda by hand";
    return Result;
  }
  if (llvm::any_of(Writes, [](const Write &W) { return W.Kind == Write::Other; })) {
    // Multiplied, subtracted or assigned a computed value: not a running sum. But one computed
    // in the sharded loop from this process's batches (`ema = 0.9 * ema + 0.1 *
    // loss.item<float>()`, a minimum) holds this process's share as much as a sum does; so
    // does a tensor that also adds up batch values there.
    const bool FromBatches = llvm::any_of(Writes, [&](const Write &W) {
      if (W.Kind != Write::Other || !W.Increment || !nearestBatchLoopIsSharded(W.At, Ctx)) {
        return false;
      }
      BatchValue Value = classifyBatchValue(W.Increment, Ctx);
      return mentionsTensor(W.Increment) ||
             differsInShardedLoop(W.Increment, Function->getBody(), Ctx) ||
             Value == BatchValue::Sum || Value == BatchValue::Mean;
    });
    // After the loop, the last batch's loss as this process saw it (`if (loss.item<float>() <
    // best) best = loss.item<float>();` on a tensor the loop assigned).
    const bool FromLastBatch = llvm::any_of(Writes, [&](const Write &W) {
      bool Last = false;
      forEachStmt(W.Kind == Write::Other ? W.Increment : nullptr, [&](const Stmt *S) {
        const auto *Item = dyn_cast<CXXMemberCallExpr>(S);
        Last =
            Last || (Item && isTensorMethodCall(Item, "item") && readsLastBatchTensor(Item, Ctx));
      });
      return Last;
    });
    Result.Unclear = FromBatches || FromLastBatch ||
                     (Tensor && llvm::any_of(Writes, [&](const Write &W) {
                        return W.Kind == Write::Add && nearestBatchLoopIsSharded(W.At, Ctx);
                      }));
    if (FromBatches || FromLastBatch) {
      Result.Why = "it is computed from this process's batches in a way accel-reduce does not "
                   "follow (an average updated in place, a minimum, a value kept or counted "
                   "when a batch's value says so); combine the values it is computed from "
                   "with accelerator.reduce, or keep a plain sum";
    }
    return Result;
  }
  // The writes this read sees: those since the last reset before it (a variable reused by an
  // evaluation loop after training is two statistics), and those later in a loop around the
  // read (a progress print before this iteration's update).
  unsigned ReadAt = offsetIn(Read, SM);
  auto EndOf = [&](const Stmt *S) {
    return SM.getFileOffset(SM.getExpansionRange(S->getEndLoc()).getEnd());
  };
  // A rescale is where the statistic is combined, as the read of its own right-hand side;
  // a read after it sees a combined value.
  auto Contains = [&](const Write &W) {
    return offsetIn(W.At, SM) <= ReadAt && ReadAt <= EndOf(W.At);
  };
  unsigned Since = 0;
  for (const Write &W : Writes) {
    if ((W.Kind == Write::Reset || W.Kind == Write::Rescale) && !Contains(W) &&
        offsetIn(W.At, SM) < ReadAt) {
      Since = std::max(Since, offsetIn(W.At, SM));
    }
  }
  if (llvm::any_of(Writes, [&](const Write &W) {
        return W.Kind == Write::Rescale && !Contains(W) && offsetIn(W.At, SM) == Since;
      })) {
    return Result;
  }
  auto Loops = loopsAround(Read, Ctx);
  auto Sees = [&](const Write &W) {
    unsigned At = offsetIn(W.At, SM);
    if (At > Since && At < ReadAt) {
      return true;
    }
    return At > ReadAt && llvm::any_of(Loops, [&](const Stmt *Loop) {
             return offsetIn(Loop, SM) <= At &&
                    At <= SM.getFileOffset(SM.getExpansionLoc(Loop->getEndLoc()));
           });
  };
  bool Outside = false, Sums = false, Means = false, Unclear = false, Updated = false;
  std::string Why;
  const std::string ByConfiguredSize =
      "it counts by a number that is not the batch's own size, and the configured batch size "
      "is the global batch under split_batches but one process's batch otherwise; count "
      "batch.data.size(0) instead";
  // The last batch's value (`last = loss.item<double>()` in the loop) seen after it.
  bool LastMeans = false, LastSums = false;
  for (const Write &W : Writes) {
    if (W.Kind == Write::Last && Sees(W)) {
      (classifyBatchValue(W.Increment, Ctx) == BatchValue::Sum ? LastSums : LastMeans) = true;
    }
  }
  for (const Write &W : Writes) {
    if (W.Kind != Write::Add || !Sees(W)) {
      continue;
    }
    if (!nearestBatchLoopIsSharded(W.At, Ctx)) {
      Outside = true; // added up over a loader every process sees whole
      continue;
    }
    Updated = true;
    BatchValue Value = W.Increment ? classifyBatchValue(W.Increment, Ctx) : BatchValue::Constant;
    if (W.ElementsAdded) {
      // Values per sample, each added into the tensor: together, a sum over the batch.
      Value = Value == BatchValue::PerSample ? BatchValue::Sum : BatchValue::Unknown;
    }
    if (Value != BatchValue::Sum && insideLoopWithinShardedLoop(W.At, Ctx) &&
        !declaredInsideShardedLoop(Var, Ctx)) {
      // `++seen` or a per-sample loss's mean in a loop over the batch's samples counts or sums
      // per sample, not per step.
      Unclear = true;
      Why = "it is added up in a loop inside the loop over batches (once per sample?), which "
            "accel-reduce cannot tell from a count of steps; add batch.data.size(0) or a sum "
            "over the batch once per batch instead";
      continue;
    }
    switch (Value) {
    case BatchValue::Constant:
      // A step counter (`++step`, `x += 0.5`): every process takes as many steps as the
      // original at the same global batch, so it is equal on each and to the original's.
      break;
    case BatchValue::Sum:
      Sums = true;
      break;
    case BatchValue::Mean:
      Means = true;
      break;
    case BatchValue::Max:
    case BatchValue::Min:
      Unclear = true; // a sum of per-batch extremes combines by no rule
      break;
    default:
      if (Type->isIntegerType() && mentionsTensor(W.Increment)) {
        Sums = true; // an integer added up per batch counts something in it
      } else {
        Unclear = true; // `seen += batch_size`: a configured size, not the batch's own
        Why = Type->isIntegerType() ? ByConfiguredSize : "";
      }
    }
  }
  if (LastMeans || LastSums) {
    if (Updated || Outside || (LastMeans && LastSums)) {
      Result.Unclear = true; // both added up and assigned, or values of both kinds
    } else {
      Result.Op = LastSums ? "sum" : "mean";
    }
    return Result;
  }
  if (!Updated) {
    return Result;
  }
  if (llvm::any_of(Writes, [&](const Write &W) {
        return W.Kind == Write::Add && Sees(W) && insideLoopOfMixedLoaders(W.At, Ctx);
      })) {
    Result.Unclear = true;
    Result.Why = "the function is called with a sharded loader and with one every process "
                 "sees whole, so this sums a share in one call and the whole in the other; "
                 "combine it in the caller that passes the sharded loader";
    return Result;
  }
  if (Outside || Unclear || (Sums && Means)) {
    Result.Unclear = true;
    Result.Why = Outside || (Sums && Means) ? "" : Why;
    return Result;
  }
  if (std::string Dividend = unfollowedDividend(Read, Ctx); !Dividend.empty()) {
    Result.Unclear = true;
    Result.Why = "it divides '" + Dividend +
                 "', a sum of this process's batch values that accel-reduce does not follow, "
                 "so combining this alone would divide one process's sum by the global count; "
                 "add the values up in a local number, or read accelerator.reduce(" +
                 Dividend + ", \"sum\") / accelerator.reduce(" + Var->getNameAsString() +
                 ", \"sum\") by hand";
    return Result;
  }
  Result.Op = Sums ? "sum" : Means ? "mean" : "";
  // A sum of per-batch means, averaged across processes, is the sum over the steps every
  // process takes alike; divided by anything but a step count (`/ (512 / batch_size)`) it
  // means one thing in each loader mode.
  if (Result.Op == "mean" && !dividedByStepCounterOrNothing(Read, Ctx)) {
    Result.Op.clear();
    Result.Unclear = true;
    Result.Why = DividedOtherwise;
  }
  return Result;
}

bool readsRunningStatistic(const DeclRefExpr *Ref, ASTContext &Ctx, std::string &Op) {
  StatisticRead Read;
  if (!isStatisticRead(Ref, Ctx, Read)) {
    return false;
  }
  Op = Read.Op;
  return !Op.empty();
}

bool readsUnclearStatistic(const DeclRefExpr *Ref, ASTContext &Ctx) {
  StatisticRead Read;
  return isStatisticRead(Ref, Ctx, Read) && Read.Unclear;
}

/// A tensor statistic's value taken: `epoch_loss.item<float>()`, `epoch_loss / n` (not its
/// own updates, nor a reference bound to it).
bool readsTensorValue(const DeclRefExpr *Ref, ASTContext &Ctx) {
  // Taken as const (`item` is a const method; `a / b` takes const references).
  DynTypedNode User = DynTypedNode::create(*Ref);
  auto Parents = Ctx.getParents(User);
  if (!Parents.empty()) {
    if (const auto *Cast = Parents[0].get<ImplicitCastExpr>();
        Cast && Cast->getCastKind() == CK_NoOp) {
      Parents = Ctx.getParents(*Cast);
    }
  }
  if (Parents.empty()) {
    return false;
  }
  if (const auto *Member = Parents[0].get<MemberExpr>()) {
    auto Calls = Ctx.getParents(*Member);
    const auto *Call = Calls.empty() ? nullptr : Calls[0].get<CXXMemberCallExpr>();
    const auto *Method = Call ? Call->getMethodDecl() : nullptr;
    return Method && Method->getDeclName().isIdentifier() && Method->isConst() &&
           !Method->getName().ends_with("_");
  }
  // An operand of an operator (not the target of an assignment): bound to a reference or
  // copied, it is followed no further.
  const auto *Operator = Parents[0].get<CXXOperatorCallExpr>();
  return Operator && !Operator->isAssignmentOp();
}

namespace {
/// A number passed to a function's const reference parameter (`history.push_back(last)`,
/// `std::max(best, last)`): read there, as a copy would be.
bool passedByConstReference(const DeclRefExpr *Ref, ASTContext &Ctx) {
  const Expr *Argument = Ref;
  auto Parents = Ctx.getParents(*Ref);
  if (const auto *Cast = Parents.empty() ? nullptr : Parents[0].get<ImplicitCastExpr>();
      Cast && Cast->getCastKind() == CK_NoOp) {
    Argument = Cast;
    Parents = Ctx.getParents(*Cast);
  }
  const auto *Call = Parents.empty() ? nullptr : Parents[0].get<CallExpr>();
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || isa<CXXOperatorCallExpr>(Call)) {
    return false;
  }
  // std::make_pair and std::make_tuple take forwarding references, and copy.
  if (const std::string Name = Callee->getQualifiedNameAsString();
      Name == "std::make_pair" || Name == "std::make_tuple") {
    return true;
  }
  for (unsigned I = 0; I < Call->getNumArgs() && I < Callee->getNumParams(); ++I) {
    if (Call->getArg(I) == Argument) {
      const QualType Type = Callee->getParamDecl(I)->getType();
      return Type->isLValueReferenceType() && Type.getNonReferenceType().isConstQualified();
    }
  }
  return false;
}

/// A tensor handed, outside the loops over batches, to a function of the program that takes
/// it by const reference or by value (`report("train", confusion)` after the epoch): read
/// there. In the loop it is an input (a recurrent state given to the model's forward).
bool tensorPassedToProgramFunction(const DeclRefExpr *Ref, ASTContext &Ctx) {
  if (nearestBatchLoopIsSharded(Ref, Ctx)) {
    return false;
  }
  const Expr *Argument = Ref;
  auto Parents = Ctx.getParents(*Ref);
  while (!Parents.empty() &&
         (Parents[0].get<ImplicitCastExpr>() || Parents[0].get<CXXConstructExpr>() ||
          Parents[0].get<MaterializeTemporaryExpr>() || Parents[0].get<CXXBindTemporaryExpr>())) {
    const auto *Wrapper = Parents[0].get<Expr>();
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(Wrapper);
        Construct && !Construct->getConstructor()->isCopyOrMoveConstructor()) {
      return false;
    }
    Argument = Wrapper;
    Parents = Ctx.getParents(*Wrapper);
  }
  const auto *Call = Parents.empty() ? nullptr : Parents[0].get<CallExpr>();
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  const FunctionDecl *Definition = nullptr;
  if (!Callee || isa<CXXOperatorCallExpr>(Call) || !Callee->hasBody(Definition) ||
      !Ctx.getSourceManager().isWrittenInMainFile(Definition->getLocation())) {
    return false;
  }
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call);
      Member && isModelType(Member->getObjectType())) {
    return false; // a model's forward, or another of its methods: an input
  }
  for (unsigned I = 0; I < Call->getNumArgs() && I < Definition->getNumParams(); ++I) {
    if (Call->getArg(I) == Argument) {
      const QualType Type = Definition->getParamDecl(I)->getType();
      return !Type->isReferenceType() || Type.getNonReferenceType().isConstQualified();
    }
  }
  return false;
}

/// Whether Ref's value goes into a tensor that a backward call of its function differentiates
/// (`l2` in `auto loss = mse + 0.1 * l2.sqrt(); loss.backward();`), directly or through a few
/// local variables.
bool feedsBackward(const DeclRefExpr *Ref, ASTContext &Ctx) {
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Ref), Ctx);
  if (!Function || !Function->getBody()) {
    return false;
  }
  llvm::SmallVector<const Expr *, 4> Reaching;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S)) {
      if (isBackwardCall(Member) || isMethodCall(Member, "accelerate::Accelerator", "backward")) {
        Reaching.push_back(isBackwardCall(Member) ? Member->getImplicitObjectArgument()
                                                  : Member->getArg(0));
      }
    } else if (const auto *Call = dyn_cast<CallExpr>(S); Call && isBackwardCall(Call)) {
      llvm::append_range(Reaching, Call->arguments());
    }
  });
  llvm::SmallPtrSet<const VarDecl *, 8> Followed;
  for (size_t I = 0; I < Reaching.size() && I < 32; ++I) {
    bool Found = false;
    forEachStmt(Reaching[I], [&](const Stmt *S) {
      Found = Found || S == Ref;
      const auto *Named = dyn_cast<DeclRefExpr>(S);
      const auto *Var = Named ? dyn_cast<VarDecl>(Named->getDecl()) : nullptr;
      if (!Var || !Var->hasLocalStorage() || !Followed.insert(Var).second) {
        return;
      }
      if (Var->getInit()) {
        Reaching.push_back(Var->getInit());
      }
      llvm::append_range(Reaching, assignedValues(Var));
    });
    if (Found) {
      return true;
    }
  }
  return false;
}
} // namespace

bool isStatisticRead(const DeclRefExpr *Ref, ASTContext &Ctx, StatisticRead &Read) {
  const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
  // In a braced list (`return Stats{loss_sum, seen};`) the name has two parents, the list's
  // written form and the conversion of its semantic form.
  const ImplicitCastExpr *Value = nullptr;
  for (const DynTypedNode &Parent : Ctx.getParents(*Ref)) {
    Value = Value ? Value : Parent.get<ImplicitCastExpr>();
  }
  // A value read is an lvalue-to-rvalue conversion (for a tensor, a use of its value), or a
  // number bound to a const reference; updates, resets and other references are not.
  const bool Reads =
      Var &&
      (isTensorVar(Var) ? readsTensorValue(Ref, Ctx) || tensorPassedToProgramFunction(Ref, Ctx)
                        : (Value && Value->getCastKind() == CK_LValueToRValue) ||
                              passedByConstReference(Ref, Ctx));
  if (!Reads || insideOwnUpdate(Ref, Ctx)) {
    return false;
  }
  // A tensor the loss is computed from (a penalty summed over the parameters) is no printed
  // statistic, and accelerator.reduce would cut the gradient's path through it.
  if (isTensorVar(Var) && feedsBackward(Ref, Ctx)) {
    return false;
  }
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Ref), Ctx)) {
    if (isMethodCall(Ancestor.get<Stmt>(), "accelerate::Accelerator", "reduce")) {
      return false; // combined already
    }
  }
  Read = classifyStatisticRead(Var, Ref, Ctx);
  return !Read.Op.empty() || Read.Unclear;
}

bool rescalesStatistic(const CompoundAssignOperator *Rescale, ASTContext &Ctx,
                       StatisticRead &Read) {
  const VarDecl *Var = assignedVar(Rescale->getLHS());
  if (!Var || (Rescale->getOpcode() != BO_DivAssign && Rescale->getOpcode() != BO_MulAssign) ||
      nearestBatchLoopIsSharded(Rescale, Ctx) || refersTo(Rescale->getRHS(), Var)) {
    return false;
  }
  Read = classifyStatisticRead(Var, Rescale, Ctx);
  if (Read.Op == "mean") {
    // As for a read divided in place (classifyStatisticRead): by the step count only.
    if (Rescale->getOpcode() != BO_DivAssign || !countsSteps(Rescale->getRHS(), Ctx)) {
      Read.Op.clear();
      Read.Unclear = true;
      Read.Why = DividedOtherwise;
    }
  }
  return !Read.Op.empty() || Read.Unclear;
}

bool storesBatchValue(const Stmt *S, ASTContext &Ctx, std::string &Holder) {
  auto IsBatchValue = [&](const Expr *Value) {
    BatchValue Kind = classifyBatchValue(Value, Ctx);
    return Kind == BatchValue::Sum || Kind == BatchValue::Mean;
  };
  if (const auto *Compound = dyn_cast<CompoundAssignOperator>(S)) {
    // Added to something other than a local variable (which accel-reduce follows): a field
    // (`stats.loss += ...`), a map's or an array's element (`metrics["loss"] += ...`).
    const Expr *Target = Compound->getLHS()->IgnoreParenImpCasts();
    if (isa<DeclRefExpr>(Target) || !IsBatchValue(Compound->getRHS()) ||
        !nearestBatchLoopIsSharded(S, Ctx)) {
      return false;
    }
    const auto *Field = dyn_cast<MemberExpr>(Target);
    Holder = Field && isa<FieldDecl>(Field->getMemberDecl())
                 ? Field->getMemberDecl()->getNameAsString()
                 : sourceText(Target, Ctx);
    return !Holder.empty();
  }
  const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
  const CXXRecordDecl *Class = Call ? Call->getRecordDecl() : nullptr;
  if (!Class || isa<CXXOperatorCallExpr>(S)) {
    return false;
  }
  // LibTorch's objects (a tensor's add_ is a tensor statistic; a module's forward takes the
  // batch), the accelerator, and streams (printing is accel-print's) are not holders.
  std::string ClassName = Class->getQualifiedNameAsString();
  for (llvm::StringRef Namespace : {"at::", "c10::", "torch::", "accelerate::", "std::basic_o"}) {
    if (llvm::StringRef(ClassName).starts_with(Namespace)) {
      return false;
    }
  }
  bool Stores = llvm::any_of(Call->arguments(), [&](const Expr *Argument) {
    return Argument->getType()->isArithmeticType() && IsBatchValue(Argument);
  });
  if (!Stores || !nearestBatchLoopIsSharded(S, Ctx)) {
    return false;
  }
  // Named as written: `cb` for `cb->on_batch_end(...)` on a smart pointer.
  const Expr *Object = Call->getImplicitObjectArgument()->IgnoreParenImpCasts();
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object);
      Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
    Object = Arrow->getArg(0);
  }
  Holder = sourceText(Object, Ctx);
  return !Holder.empty();
}

bool combinesStoredArguments(
    const CXXMemberCallExpr *Call, ASTContext &Ctx,
    llvm::SmallVectorImpl<std::pair<const Expr *, std::string>> &Combined) {
  Combined.clear();
  std::string Holder;
  const CXXRecordDecl *Class = Call->getRecordDecl();
  if (!Class || !storesBatchValue(Call, Ctx, Holder) ||
      llvm::StringRef(Class->getQualifiedNameAsString()).starts_with("std::")) {
    return false;
  }
  // Every process must reach the combine as often as the others: not under a branch on which
  // process this is or on its batch's values, nor in a loop over the batch's samples (as many
  // iterations as this process has rows).
  if (runsOnSomeProcesses(Call, Ctx) || underConditionThatDiffers(Call, Ctx) ||
      insideBatchDependentLoop(Call, Ctx)) {
    return false;
  }
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Call), Ctx);
  for (const Expr *Argument : Call->arguments()) {
    if (isa<CXXDefaultArgExpr>(Argument)) {
      continue;
    }
    if (!Argument->getType()->isArithmeticType()) {
      if (mentionsTensor(Argument)) {
        return false; // a tensor of the batch handed over whole
      }
      continue;
    }
    const BatchValue Value = classifyBatchValue(Argument, Ctx);
    if ((Value == BatchValue::Sum || Value == BatchValue::Mean) &&
        (Argument->getBeginLoc().isMacroID() || Argument->getEndLoc().isMacroID())) {
      return false; // written through a macro, which the rewrite does not edit
    }
    switch (Value) {
    case BatchValue::Sum:
      Combined.emplace_back(Argument, "sum");
      break;
    case BatchValue::Mean:
      Combined.emplace_back(Argument, "mean");
      break;
    case BatchValue::Constant:
      break;
    default:
      // Computed from the batch in a way no rule combines (an accuracy from a helper): the
      // object would mix global and local values.
      if (mentionsTensor(Argument) ||
          (Function && computedFromTensors(Argument, Function->getBody()))) {
        return false;
      }
    }
  }
  return !Combined.empty();
}

bool runsOnSomeProcesses(const Stmt *S, ASTContext &Ctx) {
  auto AsksRank = [](const Stmt *Condition) {
    bool Found = false;
    forEachStmt(Condition, [&](const Stmt *Child) {
      for (llvm::StringRef Method :
           {"is_main_process", "is_local_main_process", "process_index", "local_process_index"}) {
        Found = Found || isMethodCall(Child, "accelerate::Accelerator", Method);
      }
    });
    return Found;
  };
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    const Stmt *Condition = conditionOf(Ancestor.get<Stmt>());
    if (Condition && AsksRank(Condition)) {
      return true;
    }
  }
  return false;
}

/// `loss.item<float>()` after the loop on a tensor declared empty before it and assigned only
/// in the sharded loop: the last batch's value, as this process saw it.
bool readsLastBatchTensor(const CXXMemberCallExpr *Item, ASTContext &Ctx) {
  const Expr *Object = Item->getImplicitObjectArgument();
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Object ? Object->IgnoreParenImpCasts() : nullptr);
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  if (!Var || !Var->isLocalVarDecl() || !declaredEmpty(Var)) {
    return false;
  }
  auto Values = assignedValues(Var);
  return !Values.empty() && llvm::all_of(Values, [&](const Expr *Value) {
    return nearestBatchLoopIsSharded(Value, Ctx);
  });
}

namespace {

/// The accelerator.reduce operation that combines a printed value of this kind across the
/// processes into the global batch's, or "" for none.
std::string combinationOf(BatchValue Kind) {
  switch (Kind) {
  case BatchValue::Sum:
    return "sum";
  case BatchValue::Mean:
    return "mean";
  case BatchValue::Max:
    return "max";
  case BatchValue::Min:
    return "min";
  default:
    return "";
  }
}

/// How far printedUncombined follows a value into text buffers and helpers' parameters.
constexpr int MaxPrintHops = 3;

bool printedUncombined(const Stmt *Value, ASTContext &Ctx, bool PartOfValue, int Hops = 0);

/// A local text buffer that its function prints to standard output: a char array that
/// snprintf or sprintf fills, a std::ostringstream written with <<, printed later
/// (`puts(buf)`, `std::cout << line.str()`).
bool bufferPrinted(const VarDecl *Buffer, ASTContext &Ctx, int Hops) {
  const auto *Function = Buffer && Buffer->isLocalVarDecl()
                             ? dyn_cast<FunctionDecl>(Buffer->getDeclContext())
                             : nullptr;
  bool Printed = false;
  forEachStmt(Function ? Function->getBody() : nullptr, [&](const Stmt *S) {
    const auto *Use = dyn_cast<DeclRefExpr>(S);
    Printed = Printed ||
              (Use && Use->getDecl() == Buffer && printedUncombined(Use, Ctx, false, Hops + 1));
  });
  return Printed;
}

/// The local variable E names, or null.
const VarDecl *localNamed(const Expr *E) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E ? E->IgnoreParenImpCasts() : nullptr);
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  return Var && Var->isLocalVarDecl() ? Var : nullptr;
}

/// The buffer a formatting call writes Arg into: snprintf(buf, n, format, Arg) or
/// sprintf(buf, format, Arg) into a local array.
const VarDecl *formattedInto(const Stmt *S, const Stmt *Arg) {
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->isExternC() || !Callee->getDeclName().isIdentifier() ||
      !(Callee->getName() == "snprintf" || Callee->getName() == "sprintf") ||
      Call->getNumArgs() < 2 || Call->getArg(0) == Arg) {
    return nullptr;
  }
  return localNamed(Call->getArg(0));
}

/// The local string stream a `<<` writes into (`line << loss.item<double>()`), or null.
const VarDecl *streamedInto(const Stmt *S) {
  const auto *Shift = dyn_cast_or_null<CXXOperatorCallExpr>(S);
  if (!Shift || Shift->getOperator() != OO_LessLess) {
    return nullptr;
  }
  const Expr *Left = Shift->getArg(0)->IgnoreParenImpCasts();
  while (const auto *Inner = dyn_cast<CXXOperatorCallExpr>(Left)) {
    if (Inner->getOperator() != OO_LessLess) {
      return nullptr;
    }
    Left = Inner->getArg(0)->IgnoreParenImpCasts();
  }
  const VarDecl *Stream = localNamed(Left);
  return Stream && isClassOrDerived(Stream->getType(), "std::basic_ostream") &&
                 !isClassOrDerived(Stream->getType(), "std::basic_fstream") &&
                 !isClassOrDerived(Stream->getType(), "std::basic_ofstream")
             ? Stream
             : nullptr;
}

/// The call operator of a lambda expression, or of the lambda a local variable is initialised
/// with, as it is (`auto report = [&](...) {...};`) or in a std::function
/// (`std::function<void(int, double)> report = [&](...) {...};`); null for anything else.
const FunctionDecl *lambdaOf(const Expr *E) {
  if (const VarDecl *Var = namedVar(E)) {
    E = Var->hasLocalStorage() && !isa<ParmVarDecl>(Var) ? Var->getInit() : nullptr;
  }
  for (int Depth = 0; E && Depth < 6; ++Depth) {
    E = E->IgnoreImplicit();
    if (const auto *Lambda = dyn_cast<LambdaExpr>(E)) {
      return Lambda->getCallOperator();
    }
    const auto *Construct = dyn_cast<CXXConstructExpr>(E);
    E = Construct && Construct->getNumArgs() == 1 ? Construct->getArg(0) : nullptr;
  }
  return nullptr;
}

/// The local list a range-for's variable walks (`for (auto &cb : callbacks)`), or null.
const VarDecl *listIterated(const VarDecl *Var, ASTContext &Ctx) {
  const CXXForRangeStmt *Loop = rangeForDeclaring(Var, Ctx);
  const VarDecl *List = Loop ? namedVar(Loop->getRangeInit()) : nullptr;
  return List && List->hasLocalStorage() && !isa<ParmVarDecl>(List) ? List : nullptr;
}

/// The lambdas a local list of callables holds: those in its braced initializer and those
/// push_back or emplace_back add in its function. Empty when any element cannot be told.
llvm::SmallVector<const FunctionDecl *, 2> lambdasIn(const VarDecl *List) {
  llvm::SmallVector<const FunctionDecl *, 2> Lambdas;
  bool Unknown = false;
  auto Add = [&](const Expr *Element) {
    const FunctionDecl *Lambda = lambdaOf(Element);
    Unknown = Unknown || !Lambda;
    if (Lambda) {
      Lambdas.push_back(Lambda);
    }
  };
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(
          List->getInit() ? List->getInit()->IgnoreImplicit() : nullptr);
      Construct && Construct->getNumArgs() > 0) {
    const auto *Elements =
        dyn_cast<CXXStdInitializerListExpr>(Construct->getArg(0)->IgnoreImplicit());
    const auto *Braced =
        Elements ? dyn_cast<InitListExpr>(Elements->getSubExpr()->IgnoreImplicit()) : nullptr;
    if (!Braced) {
      return {};
    }
    for (const Expr *Element : Braced->inits()) {
      Add(Element);
    }
  }
  const auto *Function = dyn_cast<FunctionDecl>(List->getDeclContext());
  forEachStmt(Function ? Function->getBody() : nullptr, [&](const Stmt *S) {
    const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
    const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
    if (!Method || !Method->getDeclName().isIdentifier() ||
        namedVar(Call->getImplicitObjectArgument()) != List) {
      return;
    }
    if (Method->getName() == "push_back" || Method->getName() == "emplace_back") {
      if (Call->getNumArgs() == 1) {
        Add(Call->getArg(0));
      } else {
        Unknown = true;
      }
    } else if (Method->getName() == "insert" || Method->getName() == "emplace" ||
               Method->getName() == "assign" || Method->getName() == "resize") {
      Unknown = true; // added some other way: not followed
    }
  });
  if (Unknown) {
    return {};
  }
  return Lambdas;
}

/// The call operators of the lambdas a call `report(step, value)` may call: the lambda the
/// variable holds, or for a parameter (`const std::function<void(int, double)> &report`) the
/// lambdas every call of its function passes. Empty when any of them cannot be told.
llvm::SmallVector<const FunctionDecl *, 2> calledLambdas(const CXXOperatorCallExpr *Call,
                                                         ASTContext &Ctx) {
  llvm::SmallVector<const FunctionDecl *, 2> Lambdas;
  if (Call->getOperator() != OO_Call || Call->getNumArgs() == 0) {
    return Lambdas;
  }
  const VarDecl *Var = namedVar(Call->getArg(0));
  if (const VarDecl *List = Var ? listIterated(Var, Ctx) : nullptr) {
    return lambdasIn(List);
  }
  const auto *Param = dyn_cast_or_null<ParmVarDecl>(Var);
  if (!Param) {
    if (const FunctionDecl *Lambda = lambdaOf(Call->getArg(0))) {
      Lambdas.push_back(Lambda);
    }
    return Lambdas;
  }
  const auto *Function = dyn_cast<FunctionDecl>(Param->getDeclContext());
  const unsigned Index = Param->getFunctionScopeIndex();
  for (const CallExpr *Passing :
       Function ? callsInMainFile(Function, Ctx) : llvm::ArrayRef<const CallExpr *>()) {
    const FunctionDecl *Lambda =
        Index < Passing->getNumArgs() ? lambdaOf(Passing->getArg(Index)) : nullptr;
    if (!Lambda) {
      return {};
    }
    Lambdas.push_back(Lambda);
  }
  return Lambdas;
}

/// Whether Param of Definition (a function of the main file) is printed there and never
/// changed.
/// The local variable of Definition whose initializer holds Use (`auto cmf = cm.to(...)`),
/// or null.
const VarDecl *initializedWith(const DeclRefExpr *Use, const FunctionDecl *Definition,
                               ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Use), Ctx)) {
    if (const auto *Var = Ancestor.get<VarDecl>()) {
      return Var->isLocalVarDecl() && Var->getDeclContext() == Definition ? Var : nullptr;
    }
    if (!Ancestor.get<Expr>()) {
      return nullptr;
    }
  }
  return nullptr;
}

/// Whether Use, a read in Definition, reaches a print: printed itself (printedUncombined), or
/// through locals made from it (`auto cmf = cm.to(torch::kDouble); auto tp = cmf.diag();
/// ... printf(..., acc)`).
bool reachesPrint(const DeclRefExpr *Use, const FunctionDecl *Definition, ASTContext &Ctx,
                  int Hops) {
  if (printedUncombined(Use, Ctx, false, Hops + 1)) {
    return true;
  }
  const VarDecl *Local = Hops < MaxPrintHops ? initializedWith(Use, Definition, Ctx) : nullptr;
  bool Printed = false;
  forEachStmt(Local ? Definition->getBody() : nullptr, [&](const Stmt *Child) {
    const auto *Next = dyn_cast<DeclRefExpr>(Child);
    Printed = Printed ||
              (Next && Next->getDecl() == Local && reachesPrint(Next, Definition, Ctx, Hops + 1));
  });
  return Printed;
}

bool printsParameter(const FunctionDecl *Definition, const ParmVarDecl *Param, ASTContext &Ctx,
                     int Hops) {
  const QualType Type = Param->getType();
  if (Type->isReferenceType() && !Type.getNonReferenceType().isConstQualified()) {
    return false;
  }
  bool Printed = false, Changed = false;
  forEachStmt(Definition->getBody(), [&](const Stmt *Child) {
    const auto *Use = dyn_cast<DeclRefExpr>(Child);
    if (Use && Use->getDecl() == Param) {
      Changed = Changed || changesWhatItNames(Use, Ctx);
      Printed = Printed || reachesPrint(Use, Definition, Ctx, Hops);
    }
  });
  return Printed && !Changed;
}

/// Whether Arg, an argument of S, a call of a function of the main file or of a lambda, is
/// the value of a parameter the function prints and never changes (`log_step(step,
/// loss.item<double>())`, `report(step, loss.item<double>())`).
bool passedToPrintedParameter(const Stmt *S, const Stmt *Arg, ASTContext &Ctx, int Hops) {
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  if (!Call) {
    return false;
  }
  // A lambda's call (argument 0 is the lambda, or the std::function holding it): printed when
  // every lambda it may call prints the value.
  const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call);
  llvm::SmallVector<const FunctionDecl *, 2> Callees;
  if (Operator) {
    Callees = calledLambdas(Operator, Ctx);
  } else if (Call->getDirectCallee()) {
    Callees.push_back(Call->getDirectCallee());
  }
  const unsigned First = Operator ? 1 : 0;
  unsigned Index = First;
  while (Index < Call->getNumArgs() && Call->getArg(Index) != Arg) {
    ++Index;
  }
  if (Callees.empty() || Index == Call->getNumArgs()) {
    return false;
  }
  return llvm::all_of(Callees, [&](const FunctionDecl *Callee) {
    const FunctionDecl *Definition = nullptr;
    return Callee->hasBody(Definition) &&
           Ctx.getSourceManager().isWrittenInMainFile(Definition->getLocation()) &&
           Index - First < Definition->getNumParams() &&
           printsParameter(Definition, Definition->getParamDecl(Index - First), Ctx, Hops);
  });
}

/// Whether Value is printed to stdout (printf, puts, std::cout <<, the accelerator's print,
/// also through a text buffer printed later or a helper's parameter it prints) and not
/// inside accelerator.reduce already; with PartOfValue, not inside an item() or size() call
/// either (a batch size that is part of a value combined as a whole).
bool printedUncombined(const Stmt *Value, ASTContext &Ctx, bool PartOfValue, int Hops) {
  bool InPrint = false;
  const Stmt *Below = Value;
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Value), Ctx)) {
    const Stmt *S = Ancestor.get<Stmt>();
    if (isMethodCall(S, "accelerate::Accelerator", "reduce")) {
      return false; // combined already
    }
    if (PartOfValue && !InPrint &&
        (isTensorMethodCall(S, "item") || isTensorMethodCall(S, "size"))) {
      return false;
    }
    if (const auto *Shift = dyn_cast_or_null<CXXOperatorCallExpr>(S);
        Shift && Shift->getOperator() == OO_LessLess) {
      forEachStmt(Shift->getArg(0), [&](const Stmt *Left) {
        InPrint = InPrint || isStdoutPrint(Left) ||
                  isMethodCall(Left, "accelerate::Accelerator", "print");
      });
    }
    InPrint = InPrint || isStdoutPrint(S) || isMethodCall(S, "accelerate::Accelerator", "printf");
    if (!InPrint && Hops < MaxPrintHops) {
      const VarDecl *Buffer = formattedInto(S, Below);
      if (!Buffer) {
        Buffer = streamedInto(S);
      }
      InPrint = (Buffer && bufferPrinted(Buffer, Ctx, Hops)) ||
                passedToPrintedParameter(S, Below, Ctx, Hops);
    }
    if (S) {
      Below = S;
    }
  }
  return InPrint;
}

} // namespace

bool printsBatchValueCopy(const DeclRefExpr *Ref, ASTContext &Ctx, std::string &Op) {
  const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
  if (!Var || !Var->isLocalVarDecl() || !(Var->getType()->isArithmeticType() || isTensorVar(Var)) ||
      !Var->getInit() || !nearestBatchLoopIsSharded(Ref, Ctx)) {
    return false;
  }
  auto Parents = Ctx.getParents(*Var);
  const auto *Declaration = Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
  const Stmt *Scope =
      Declaration ? innermostLoop(DynTypedNode::create(*Declaration), Ctx) : nullptr;
  // The copy is this iteration's: declared in the sharded loop, never changed after.
  // A tensor is printed itself, or through tensor operations (`torch::sqrt(loss)`), not as
  // the object of an item() that printsBatchValue combines.
  if (!Declaration || !nearestBatchLoopIsSharded(Declaration, Ctx) || !Scope ||
      changedInside(Var, Scope, Ctx) || !printedUncombined(Ref, Ctx, isTensorVar(Var))) {
    return false;
  }
  Op = combinationOf(classifyBatchValue(Var->getInit(), Ctx));
  return !Op.empty();
}

bool printsBatchValue(const CXXMemberCallExpr *Item, ASTContext &Ctx, std::string &Op,
                      bool *Unclear) {
  bool Size =
      isTensorMethodCall(Item, "numel") ||
      (isTensorMethodCall(Item, "size") && classifyBatchValue(Item, Ctx) == BatchValue::Sum);
  // `loss.item().toFloat()`: the number is the conversion of the c10::Scalar that item()
  // returns (item() itself is no number to combine).
  const auto *Converted = dyn_cast<CXXMemberCallExpr>(
      Item->getImplicitObjectArgument() ? Item->getImplicitObjectArgument()->IgnoreImplicit()
                                        : nullptr);
  const CXXMethodDecl *Conversion = Item->getMethodDecl();
  const bool ScalarConversion = Converted && isTensorMethodCall(Converted, "item") && Conversion &&
                                Conversion->getDeclName().isIdentifier() &&
                                Conversion->getName().starts_with("to");
  const CXXMemberCallExpr *Taken = ScalarConversion ? Converted : Item;
  if (!(isTensorMethodCall(Item, "item") || Size || ScalarConversion) ||
      !Item->getType()->isArithmeticType() ||
      !(nearestBatchLoopIsSharded(Item, Ctx) || readsLastBatchTensor(Taken, Ctx))) {
    return false;
  }
  if (!printedUncombined(Item, Ctx, Size)) {
    return false;
  }
  // A progress count `batch_idx * data.size(0)` counts the global batch too (a sum). One
  // sample's value (`x[0].item()`) is nothing to combine: the main process prints its own.
  const BatchValue Kind = classifyBatchValue(Item, Ctx);
  Op = combinationOf(Kind);
  // A number taken from a tensor whose values the classification lost track of
  // (`torch::sqrt(loss).item<float>()`) is as unclear as one it cannot tell.
  if ((Kind == BatchValue::Unknown || Kind == BatchValue::PerSample) && Unclear) {
    *Unclear = true;
  }
  return !Op.empty();
}

bool changesTensor(const DeclRefExpr *Use, ASTContext &Ctx) {
  const Expr *Current = Use;
  for (int Depth = 0; Depth < 16; ++Depth) {
    auto Parents = Ctx.getParents(*Current);
    const auto *Parent = Parents.empty() ? nullptr : Parents[0].get<Expr>();
    if (!Parent) {
      return false;
    }
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Parent)) {
      if (Operator->getNumArgs() == 0 ||
          Operator->getArg(0)->IgnoreImplicit() != Current->IgnoreImplicit()) {
        return false;
      }
      if (Operator->isAssignmentOp()) {
        return true;
      }
      if (Operator->getOperator() != OO_Subscript) {
        return false;
      }
    } else if (const auto *Member = dyn_cast<MemberExpr>(Parent)) {
      const auto *Method = dyn_cast<CXXMethodDecl>(Member->getMemberDecl());
      if (!Method || !Method->getDeclName().isIdentifier()) {
        return false;
      }
      llvm::StringRef Name = Method->getName();
      if (Name.ends_with("_")) {
        return true;
      }
      // A view keeps writing into the tensor; anything else reads it.
      if (Name != "select" && Name != "narrow" && Name != "slice" && Name != "index" &&
          Name != "view" && Name != "squeeze" && Name != "unsqueeze" && Name != "flatten") {
        return false;
      }
    } else if (!isa<ImplicitCastExpr, ParenExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr,
                    CXXMemberCallExpr>(Parent)) {
      return false;
    }
    Current = Parent;
  }
  return false;
}

namespace {

/// The statement Use is part of: the outermost expression around it (an expression
/// statement, a declaration's initializer).
const Stmt *statementAround(const Stmt *Use, ASTContext &Ctx) {
  const Stmt *Current = Use;
  while (true) {
    auto Parents = Ctx.getParents(*Current);
    const auto *Parent = Parents.empty() ? nullptr : Parents[0].get<Expr>();
    if (!Parent) {
      return Current;
    }
    Current = Parent;
  }
}

/// The lambda whose body holds S (inside its function), or null.
const LambdaExpr *lambdaAround(const Stmt *S, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*S);
  for (int Depth = 0; Depth < 256; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return nullptr;
    }
    if (const auto *Lambda = Parents[0].get<LambdaExpr>()) {
      return Lambda;
    }
    // A lambda's body hangs under its call operator, which hangs under its class: go on
    // through those to the lambda; stop at any other function.
    const auto *Method = Parents[0].get<CXXMethodDecl>();
    const auto *Class = Parents[0].get<CXXRecordDecl>();
    if ((Parents[0].get<FunctionDecl>() && !(Method && Method->getParent()->isLambda())) ||
        (Parents[0].get<Decl>() && !Method && !(Class && Class->isLambda()))) {
      return nullptr;
    }
    Current = Parents[0];
  }
  return nullptr;
}

/// The lambda whose body holds S, if that lambda is a local variable's value called inside a
/// sharded loop (`auto record = [&](...) { ... };` then `record(...)` per batch): the call.
const Stmt *shardedCallOfLambdaAround(const Stmt *S, const Stmt *FunctionBody, ASTContext &Ctx) {
  const LambdaExpr *Lambda = lambdaAround(S, Ctx);
  auto Parents = Lambda ? Ctx.getParents(*Lambda) : DynTypedNodeList(DynTypedNode());
  const VarDecl *Holder = nullptr;
  for (int Depth = 0; Lambda && Depth < 4 && !Parents.empty(); ++Depth) {
    if ((Holder = Parents[0].get<VarDecl>())) {
      break;
    }
    Parents = Ctx.getParents(Parents[0]);
  }
  const Stmt *Call = nullptr;
  if (Holder) {
    forEachStmt(FunctionBody, [&](const Stmt *Node) {
      const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Node);
      if (!Call && Operator && Operator->getOperator() == OO_Call && Operator->getNumArgs() > 0 &&
          namedVar(Operator->getArg(0)) == Holder && nearestBatchLoopIsSharded(Operator, Ctx)) {
        Call = Operator;
      }
    });
  }
  return Call;
}

/// Whether Var is a running statistic classifyStatisticRead judges: a local number, or a
/// local tensor that starts as a constant.
bool judgedAsStatistic(const VarDecl *Var, ASTContext &Ctx) {
  QualType Type = Var->getType();
  if (!Var->isLocalVarDecl() || Var->isStaticLocal() || Type->isReferenceType() ||
      Type->isBooleanType() || Type.isConstQualified()) {
    return false;
  }
  if (isTensorVar(Var)) {
    return Var->hasInit() && isConstantTensor(Var->getInit(), Ctx);
  }
  return Type->isIntegerType() || Type->isRealFloatingType();
}

/// Whether Use is the target of one of Writes (which classifyStatisticRead judges), outside a
/// lambda.
bool isJudgedWrite(const DeclRefExpr *Use, llvm::ArrayRef<Write> Writes, ASTContext &Ctx) {
  if (lambdaAround(Use, Ctx)) {
    return false;
  }
  auto Named = [&](const Expr *Target) { return Target && Target->IgnoreImplicit() == Use; };
  return llvm::any_of(Writes, [&](const Write &W) {
    if (const auto *Compound = dyn_cast<BinaryOperator>(W.At)) {
      return Named(Compound->getLHS()->IgnoreParens());
    }
    if (const auto *Unary = dyn_cast<UnaryOperator>(W.At)) {
      return Named(Unary->getSubExpr()->IgnoreParens());
    }
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(W.At)) {
      return Operator->getNumArgs() > 0 && Named(Operator->getArg(0));
    }
    const auto *Method = dyn_cast<CXXMemberCallExpr>(W.At);
    return Method && Named(Method->getImplicitObjectArgument());
  });
}

} // namespace

namespace {

/// Whether Var can hold a statistic: not a stream (std::cout changes with every print) nor
/// the standard library's; not a model, an optimizer or another LibTorch object, which
/// change every step alike on every process (the gradients are synchronised).
bool mayHoldStatistic(const VarDecl *Var) {
  QualType Type = Var->getType();
  if (isa<ParmVarDecl>(Var) || Var->isInStdNamespace() ||
      isClassOrDerived(Type, "std::basic_ios") || isModelType(Type) ||
      isOptimizerOrPointerTo(Type) || isSchedulerType(Type) || isAcceleratorType(Type) ||
      !smartPointee(Type).isNull()) {
    return false;
  }
  const CXXRecordDecl *Record = recordOf(Type);
  if (!Record || isTensorVar(Var)) {
    return true;
  }
  llvm::StringRef Name = Record->getQualifiedNameAsString();
  return !Name.starts_with("torch::") && !Name.starts_with("at::") && !Name.starts_with("c10::");
}

/// Whether Use names a text buffer that is written (`snprintf(buf, ...)`, `line << loss`):
/// what goes in is judged as printed where it is written (printedUncombined follows it).
bool writesTextBuffer(const DeclRefExpr *Use, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Use), Ctx)) {
    const Stmt *S = Ancestor.get<Stmt>();
    if (const auto *Call = dyn_cast_or_null<CallExpr>(S);
        Call && Call->getNumArgs() >= 2 && Call->getArg(0)->IgnoreParenImpCasts() == Use &&
        formattedInto(Call, Call->getArg(1)) == Use->getDecl()) {
      return true;
    }
    if (S && streamedInto(S) == Use->getDecl()) {
      return true;
    }
    if (S && !isa<Expr>(S)) {
      return false;
    }
  }
  return false;
}

/// A use of Var (other than Except) that changes it from this process's batches where
/// accel-reduce does not follow (printsValueChangedFromBatches), or null.
const DeclRefExpr *changeFromBatches(const VarDecl *Var, const DeclRefExpr *Except, ASTContext &Ctx,
                                     int Depth = 0);

/// The helper's parameter a use passes by reference to (`train(net, loader, samples)` with
/// `int64_t &samples`), where the helper is a function of the main file; or null.
const ParmVarDecl *referenceParameterOf(const DeclRefExpr *Use, ASTContext &Ctx) {
  auto Parents = Ctx.getParents(*Use);
  const auto *Call = Parents.empty() ? nullptr : Parents[0].get<CallExpr>();
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  const FunctionDecl *Definition = nullptr;
  if (!Callee || isa<CXXOperatorCallExpr>(Call) || !Callee->hasBody(Definition) ||
      !Ctx.getSourceManager().isWrittenInMainFile(Definition->getLocation())) {
    return nullptr;
  }
  for (unsigned I = 0; I < Call->getNumArgs() && I < Definition->getNumParams(); ++I) {
    const QualType Type = Definition->getParamDecl(I)->getType();
    if (Call->getArg(I) == Use && Type->isReferenceType() &&
        !Type.getNonReferenceType().isConstQualified()) {
      return Definition->getParamDecl(I);
    }
  }
  return nullptr;
}

const DeclRefExpr *changeFromBatches(const VarDecl *Var, const DeclRefExpr *Except, ASTContext &Ctx,
                                     int Depth) {
  // Where it can change: its function for a local or a parameter, every function of the main
  // file for a global or a static.
  llvm::SmallVector<const FunctionDecl *, 8> Scopes;
  if ((Var->isLocalVarDecl() && !Var->isStaticLocal()) || isa<ParmVarDecl>(Var)) {
    if (const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext())) {
      Scopes.push_back(Function);
    }
  } else {
    const SourceManager &SM = Ctx.getSourceManager();
    for (const Decl *D : Ctx.getTranslationUnitDecl()->decls()) {
      const auto *Function = D->getAsFunction();
      if (Function && Function->hasBody() && SM.isWrittenInMainFile(Function->getLocation())) {
        Scopes.push_back(Function);
      }
    }
  }
  const bool Tensor = isTensorVar(Var);
  // The writes classifyStatisticRead judges (and combines, or warns about) are its own.
  std::vector<Write> Judged;
  if (judgedAsStatistic(Var, Ctx)) {
    Judged = writesOf(Var, cast<FunctionDecl>(Var->getDeclContext()), Ctx);
  }
  const DeclRefExpr *Change = nullptr;
  for (const FunctionDecl *Function : Scopes) {
    const Stmt *Body = Function->getBody();
    forEachStmt(Body, [&](const Stmt *S) {
      const auto *Use = dyn_cast<DeclRefExpr>(S);
      if (Change || !Use || Use->getDecl() != Var || Use == Except ||
          !(changesWhatItNames(Use, Ctx) || (Tensor && changesTensor(Use, Ctx))) ||
          isJudgedWrite(Use, Judged, Ctx)) {
        return;
      }
      // Passed by reference to a helper that changes it from its own sharded loop.
      if (const ParmVarDecl *Param = referenceParameterOf(Use, Ctx); Param && Depth < 3) {
        if (const DeclRefExpr *Inside = changeFromBatches(Param, nullptr, Ctx, Depth + 1)) {
          Change = Inside;
          return;
        }
      }
      const Stmt *Call =
          nearestBatchLoopIsSharded(Use, Ctx) ? Use : shardedCallOfLambdaAround(Use, Body, Ctx);
      if (!Call || writesTextBuffer(Use, Ctx)) {
        return;
      }
      const Stmt *Around = statementAround(Use, Ctx);
      // A loop's range (`for (auto &[x, y] : pairs)`) is iterated, not changed from batches.
      auto Holders = Ctx.getParents(*Around);
      if (const auto *Holder = Holders.empty() ? nullptr : Holders[0].get<VarDecl>();
          Holder && Holder->isImplicit()) {
        return;
      }
      // Already said where the value is stored (`meter.update(loss.item<double>(), n)`).
      for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Use), Ctx)) {
        const Stmt *Store = Ancestor.get<Stmt>();
        std::string Holder;
        if (Store && (isa<CXXMemberCallExpr>(Store) || isa<BinaryOperator>(Store)) &&
            storesBatchValue(Store, Ctx, Holder)) {
          return;
        }
        if (Store == Around) {
          break;
        }
      }
      const auto *Statement = dyn_cast<Expr>(Around);
      const Expr *Condition = conditionInShardedLoop(Call, Ctx);
      if ((Statement && (mentionsTensor(Statement) || computedFromTensors(Statement, Body))) ||
          (Condition && computedFromTensors(Condition, Body))) {
        Change = Use;
      }
    });
  }
  return Change;
}

} // namespace

bool printsValueChangedFromBatches(const DeclRefExpr *Ref, ASTContext &Ctx, const Stmt *&Change,
                                   const VarDecl *&Source) {
  Change = nullptr;
  Source = nullptr;
  const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
  if (!Var || !mayHoldStatistic(Var) || insideOwnUpdate(Ref, Ctx) ||
      !printedUncombined(Ref, Ctx, false)) {
    return false;
  }
  // Inside a printed value of the batch that accel-reduce combines or warns about already
  // (`loss.item<double>()` of the last batch's loss).
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Ref), Ctx)) {
    const auto *Item = Ancestor.get<CXXMemberCallExpr>();
    std::string Op;
    bool Unclear = false;
    if (Item && printsBatchValue(Item, Ctx, Op, &Unclear) && (!Op.empty() || Unclear)) {
      return false;
    }
  }
  Change = changeFromBatches(Var, Ref, Ctx);
  Source = Var;
  // Or a local made after the loop from such a value (`auto all = torch::cat(per_sample);`);
  // not from a variable it passes a helper by reference (`train(..., samples)`): the helper
  // changes that one, and what it returns is judged in the helper.
  if (!Change && Var->isLocalVarDecl() && !Var->isCXXForRangeDecl() && Var->getInit()) {
    forEachStmt(Var->getInit(), [&](const Stmt *S) {
      const auto *Use = dyn_cast<DeclRefExpr>(S);
      const auto *From = Use ? dyn_cast<VarDecl>(Use->getDecl()) : nullptr;
      if (!Change && From && From != Var && !From->isImplicit() && mayHoldStatistic(From) &&
          !referenceParameterOf(Use, Ctx)) {
        Change = changeFromBatches(From, nullptr, Ctx);
        Source = From;
      }
    });
  }
  return Change != nullptr;
}

} // namespace accel::rewrites
