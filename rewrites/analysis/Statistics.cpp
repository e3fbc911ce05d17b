//===- Statistics.cpp - Running statistics over a sharded loader ----------===//
#include "analysis/Statistics.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/BatchValues.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"

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

bool insideShardedLoop(const Stmt *S, ASTContext &Ctx) {
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*S), Ctx)) {
    if (const auto *Loop = Ancestor.get<CXXForRangeStmt>();
        Loop && iteratesShardedLoader(Loop, Ctx)) {
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

} // namespace

bool iteratesShardedLoader(const CXXForRangeStmt *Loop, ASTContext &Ctx) {
  return isShardedLoader(iteratedVar(Loop), Ctx, 0);
}

namespace {

unsigned offsetIn(const Stmt *S, const SourceManager &SM) {
  return SM.getFileOffset(SM.getExpansionLoc(S->getBeginLoc()));
}

/// One statement that writes a running statistic.
struct Write {
  enum KindType { Reset, Add, Other } Kind;
  const Stmt *At;
  const Expr *Increment; ///< for Add: what is added (null for ++)
};

/// Every write of Var in Function's body, in source order.
std::vector<Write> writesOf(const VarDecl *Var, const FunctionDecl *Function, ASTContext &Ctx) {
  std::vector<Write> Writes;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Compound = dyn_cast<CompoundAssignOperator>(S);
        Compound && assignedVar(Compound->getLHS()) == Var) {
      Writes.push_back({Compound->getOpcode() == BO_AddAssign ? Write::Add : Write::Other, S,
                        Compound->getRHS()});
    } else if (const auto *Unary = dyn_cast<UnaryOperator>(S);
               Unary && Unary->isIncrementDecrementOp() &&
               assignedVar(Unary->getSubExpr()) == Var) {
      Writes.push_back({Unary->isIncrementOp() ? Write::Add : Write::Other, S, nullptr});
    } else if (const auto *Assign = dyn_cast<BinaryOperator>(S);
               Assign && Assign->getOpcode() == BO_Assign && assignedVar(Assign->getLHS()) == Var) {
      // A reset (`running_loss = 0;`) starts the statistic again; anything else is not one.
      Writes.push_back(
          {isConstant(Assign->getRHS(), Ctx) ? Write::Reset : Write::Other, S, nullptr});
    }
  });
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

} // namespace

StatisticRead classifyStatisticRead(const VarDecl *Var, const Stmt *Read, ASTContext &Ctx) {
  StatisticRead Result;
  if (!Var || !Var->isLocalVarDecl() || Var->isStaticLocal() || isa<ParmVarDecl>(Var)) {
    return Result;
  }
  QualType Type = Var->getType();
  if (Type->isReferenceType() || Type->isBooleanType() ||
      !(Type->isIntegerType() || Type->isRealFloatingType()) || Type.isConstQualified()) {
    return Result;
  }
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function || !Function->getBody() || Function->isDependentContext()) {
    return Result; // a template's instantiations tell what its values are
  }
  const SourceManager &SM = Ctx.getSourceManager();
  std::vector<Write> Writes = writesOf(Var, Function, Ctx);
  if (llvm::any_of(Writes, [](const Write &W) { return W.Kind == Write::Other; })) {
    return Result; // multiplied, subtracted or assigned a computed value: not a running sum
  }
  // The writes this read sees: those since the last reset before it (a variable reused by an
  // evaluation loop after training is two statistics), and those later in a loop around the
  // read (a progress print before this iteration's update).
  unsigned ReadAt = offsetIn(Read, SM);
  unsigned Since = 0;
  for (const Write &W : Writes) {
    if (W.Kind == Write::Reset && offsetIn(W.At, SM) < ReadAt) {
      Since = std::max(Since, offsetIn(W.At, SM));
    }
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
  for (const Write &W : Writes) {
    if (W.Kind != Write::Add || !Sees(W)) {
      continue;
    }
    if (!insideShardedLoop(W.At, Ctx)) {
      Outside = true; // added up over a loader every process sees whole
      continue;
    }
    Updated = true;
    BatchValue Value = W.Increment ? classifyBatchValue(W.Increment, Ctx) : BatchValue::Constant;
    switch (Value) {
    case BatchValue::Constant:
      break; // a step counter: equal on every process
    case BatchValue::Sum:
      Sums = true;
      break;
    case BatchValue::Mean:
      Means = true;
      break;
    default:
      if (Type->isIntegerType()) {
        Sums = true; // an integer added up per batch counts something in it
      } else {
        Unclear = true;
      }
    }
  }
  if (!Updated) {
    return Result;
  }
  if (Outside || Unclear || (Sums && Means)) {
    Result.Unclear = true;
    return Result;
  }
  Result.Op = Sums ? "sum" : Means ? "mean" : "";
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

bool isStatisticRead(const DeclRefExpr *Ref, ASTContext &Ctx, StatisticRead &Read) {
  const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
  auto Parents = Ctx.getParents(*Ref);
  const auto *Value = Parents.empty() ? nullptr : Parents[0].get<ImplicitCastExpr>();
  // A value read is an lvalue-to-rvalue conversion; updates, resets and references are not.
  if (!Var || !Value || Value->getCastKind() != CK_LValueToRValue) {
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
    const Stmt *Parent = Ancestor.get<Stmt>();
    const Stmt *Condition = nullptr;
    if (const auto *If = dyn_cast_or_null<IfStmt>(Parent)) {
      Condition = If->getCond();
    } else if (const auto *While = dyn_cast_or_null<WhileStmt>(Parent)) {
      Condition = While->getCond();
    } else if (const auto *For = dyn_cast_or_null<ForStmt>(Parent)) {
      Condition = For->getCond();
    } else if (const auto *Choice = dyn_cast_or_null<ConditionalOperator>(Parent)) {
      Condition = Choice->getCond();
    } else if (const auto *Logical = dyn_cast_or_null<BinaryOperator>(Parent);
               Logical && Logical->isLogicalOp()) {
      Condition = Logical->getLHS();
    }
    if (Condition && AsksRank(Condition)) {
      return true;
    }
  }
  return false;
}

bool printsBatchValue(const CXXMemberCallExpr *Item, ASTContext &Ctx, std::string &Op,
                      bool *Unclear) {
  bool Size =
      isTensorMethodCall(Item, "numel") ||
      (isTensorMethodCall(Item, "size") && classifyBatchValue(Item, Ctx) == BatchValue::Sum);
  if (!(isTensorMethodCall(Item, "item") || Size) || !Item->getType()->isArithmeticType() ||
      !insideShardedLoop(Item, Ctx)) {
    return false;
  }
  bool InPrint = false;
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Item), Ctx)) {
    const Stmt *S = Ancestor.get<Stmt>();
    if (isMethodCall(S, "accelerate::Accelerator", "reduce")) {
      return false; // combined already
    }
    if (Size && !InPrint && (isTensorMethodCall(S, "item") || isTensorMethodCall(S, "size"))) {
      return false; // part of a value combined as a whole
    }
    if (const auto *Shift = dyn_cast_or_null<CXXOperatorCallExpr>(S);
        Shift && Shift->getOperator() == OO_LessLess) {
      forEachStmt(Shift->getArg(0), [&](const Stmt *Left) {
        InPrint = InPrint || isStdoutPrint(Left) ||
                  isMethodCall(Left, "accelerate::Accelerator", "print");
      });
    }
    InPrint = InPrint || isStdoutPrint(S) || isMethodCall(S, "accelerate::Accelerator", "printf");
  }
  if (!InPrint) {
    return false;
  }
  switch (classifyBatchValue(Item, Ctx)) {
  case BatchValue::Sum:
    Op = "sum"; // a progress count `batch_idx * data.size(0)` counts the global batch too
    return true;
  case BatchValue::Mean:
    Op = "mean";
    return true;
  case BatchValue::Unknown:
    if (Unclear) {
      *Unclear = true;
    }
    return false;
  default:
    return false; // one sample's value (`x[0].item()`): the main process prints its own
  }
}

} // namespace accel::rewrites
