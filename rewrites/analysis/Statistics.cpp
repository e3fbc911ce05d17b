//===- Statistics.cpp - Running statistics over a sharded loader ----------===//
#include "analysis/Statistics.h"

#include "analysis/AcceleratorParameter.h"
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

/// The increment counts samples: it involves a batch size (size, numel) or a sum over the
/// batch (Tensor::sum, torch::sum, Reduction::Sum).
bool countsSamples(const Expr *Increment) {
  bool Found = false;
  forEachStmt(Increment, [&](const Stmt *S) {
    for (llvm::StringRef Method : {"size", "sizes", "numel", "sum"}) {
      Found = Found || isTensorMethodCall(S, Method);
    }
    if (const auto *Call = dyn_cast<CallExpr>(S)) {
      std::string Name = qualifiedName(Call->getDirectCallee());
      Found = Found || Name == "at::sum" || Name == "torch::sum";
    }
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
      Found =
          Found || (isa<EnumConstantDecl>(Ref->getDecl()) && Ref->getDecl()->getName() == "Sum");
    }
  });
  return Found;
}

bool readsItem(const Expr *Increment) {
  bool Found = false;
  forEachStmt(Increment, [&](const Stmt *S) { Found = Found || isTensorMethodCall(S, "item"); });
  return Found;
}

bool isLiteralOne(const Expr *E) {
  const auto *Literal = dyn_cast<IntegerLiteral>(E->IgnoreParenImpCasts());
  return Literal && Literal->getValue() == 1;
}

bool isConstant(const Expr *E, ASTContext &Ctx) {
  return !E->isValueDependent() && E->isEvaluatable(Ctx);
}

} // namespace

bool iteratesShardedLoader(const CXXForRangeStmt *Loop, ASTContext &Ctx) {
  return isShardedLoader(iteratedVar(Loop), Ctx, 0);
}

std::string combinationOf(const VarDecl *Var, ASTContext &Ctx) {
  if (!Var || !Var->isLocalVarDecl() || Var->isStaticLocal() || isa<ParmVarDecl>(Var)) {
    return "";
  }
  QualType Type = Var->getType();
  if (Type->isReferenceType() || Type->isBooleanType() ||
      !(Type->isIntegerType() || Type->isRealFloatingType()) || Type.isConstQualified()) {
    return "";
  }
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function || !Function->getBody()) {
    return "";
  }
  bool Updated = false, Samples = false, Means = false, Unknown = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const Expr *Increment = nullptr;
    bool Step = false;
    if (const auto *Compound = dyn_cast<CompoundAssignOperator>(S);
        Compound && assignedVar(Compound->getLHS()) == Var) {
      if (Compound->getOpcode() != BO_AddAssign) {
        Unknown = true;
        return;
      }
      Increment = Compound->getRHS();
      Step = isLiteralOne(Increment);
    } else if (const auto *Unary = dyn_cast<UnaryOperator>(S);
               Unary && Unary->isIncrementDecrementOp() &&
               assignedVar(Unary->getSubExpr()) == Var) {
      Step = true;
    } else if (const auto *Assign = dyn_cast<BinaryOperator>(S);
               Assign && Assign->getOpcode() == BO_Assign && assignedVar(Assign->getLHS()) == Var) {
      // A reset (`running_loss = 0;`) keeps it a running statistic; anything else does not.
      Unknown = Unknown || !isConstant(Assign->getRHS(), Ctx);
      return;
    } else {
      return;
    }
    if (!insideShardedLoop(S, Ctx)) {
      Unknown = true; // also updated outside the training loop: not ours to combine
      return;
    }
    Updated = true;
    if (Step) {
      return;
    }
    if (countsSamples(Increment) || Type->isIntegerType()) {
      Samples = true;
    } else if (readsItem(Increment)) {
      Means = true;
    } else {
      Unknown = true;
    }
  });
  if (!Updated || Unknown || (Samples && Means)) {
    return "";
  }
  return Samples ? "sum" : Means ? "mean" : "";
}

bool readsRunningStatistic(const DeclRefExpr *Ref, ASTContext &Ctx, std::string &Op) {
  const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
  auto Parents = Ctx.getParents(*Ref);
  const auto *Read = Parents.empty() ? nullptr : Parents[0].get<ImplicitCastExpr>();
  // A value read is an lvalue-to-rvalue conversion; updates, resets and references are not.
  if (!Var || !Read || Read->getCastKind() != CK_LValueToRValue) {
    return false;
  }
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Ref), Ctx)) {
    if (isMethodCall(Ancestor.get<Stmt>(), "accelerate::Accelerator", "reduce")) {
      return false; // combined already
    }
  }
  Op = combinationOf(Var, Ctx);
  return !Op.empty();
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

bool printsBatchValue(const CXXMemberCallExpr *Item, ASTContext &Ctx, std::string &Op) {
  if (!isTensorMethodCall(Item, "item") || !Item->getType()->isArithmeticType() ||
      !insideShardedLoop(Item, Ctx)) {
    return false;
  }
  bool InPrint = false;
  for (const DynTypedNode &Ancestor : ancestors(DynTypedNode::create(*Item), Ctx)) {
    const Stmt *S = Ancestor.get<Stmt>();
    if (isMethodCall(S, "accelerate::Accelerator", "reduce")) {
      return false; // combined already
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
  const VarDecl *Tensor = namedVar(Item->getImplicitObjectArgument());
  Op = Tensor && Tensor->getInit() && countsSamples(Tensor->getInit()) ? "sum" : "mean";
  return true;
}

} // namespace accel::rewrites
