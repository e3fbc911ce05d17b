//===- DivergentSteps.cpp - Steps some processes take and others not -----===//
#include "analysis/DivergentSteps.h"

#include "analysis/BatchValues.h"
#include "analysis/Statistics.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <string>

using namespace clang;

namespace accel::rewrites {

namespace {

/// The body of the function (or lambda) S is in; Fallback when there is none.
const Stmt *functionBodyAround(const Stmt *S, const Stmt *Fallback, ASTContext &Ctx) {
  for (DynTypedNodeList Parents = Ctx.getParents(*S); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (const auto *Function = Parents[0].get<FunctionDecl>()) {
      return Function->getBody();
    }
    if (const auto *Lambda = Parents[0].get<LambdaExpr>()) {
      return Lambda->getBody();
    }
  }
  return Fallback;
}

/// Calls Visit with each condition around S in its function (an if's, a loop's, `?:`'s,
/// `&&`'s), innermost first, with the statement it belongs to; not S itself when S is one.
/// Stops at the first for which Visit returns true, and returns whether one did.
bool anyConditionAround(const Stmt *S, ASTContext &Ctx,
                        llvm::function_ref<bool(const Stmt *Owner, const Expr *Condition)> Visit) {
  const Stmt *Child = S;
  for (DynTypedNodeList Parents = Ctx.getParents(*S); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>()) {
      return false;
    }
    const Stmt *Parent = Parents[0].get<Stmt>();
    if (!Parent) {
      continue;
    }
    const Expr *Condition = conditionOf(Parent);
    if (Condition && Condition != Child && Visit(Parent, Condition)) {
      return true;
    }
    Child = Parent;
  }
  return false;
}

/// Values that differ between the processes after the rewrite: what this process's shard
/// gave a local variable (inside a sharded loop, from tensors) and accel-reduce does not
/// combine where it is read.
struct ShardValues {
  ASTContext &Ctx;
  const Stmt *FunctionBody;
  llvm::SmallPtrSet<const VarDecl *, 8> Following;

  /// How many local variables deep a value is followed; deeper counts as the shard's.
  static constexpr int MaxDepth = 6;

  bool fromShard(const Expr *E, int Depth) {
    if (!E) {
      return false;
    }
    if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E);
        Call && isAcceleratorType(Call->getObjectType())) {
      return false; // a collective's result is the same everywhere
    }
    if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
      std::string Op;
      const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
      return Var && !readsRunningStatistic(Ref, Ctx, Op) && variableFromShard(Var, Depth);
    }
    for (const Stmt *Child : E->children()) {
      if (fromShard(dyn_cast_or_null<Expr>(Child), Depth)) {
        return true;
      }
    }
    return false;
  }

  /// Whether Where runs under a condition of its function (an if, a loop, `?:`) computed from
  /// the shard's values.
  bool underShardCondition(const Stmt *Where, int Depth) {
    return anyConditionAround(Where, Ctx, [&](const Stmt *, const Expr *Condition) {
      return fromShard(Condition, Depth + 1);
    });
  }

  /// Whether a statement of a sharded loop stores a value of this process's batch into Var
  /// (storesBatchValue) without combining it first (combinesStoredArguments).
  bool storesUncombinedBatchValues(const VarDecl *Var) {
    // combinesStoredArguments asks whether its call runs under a condition that differs, which
    // may read Var again: asked again while deciding, the answer is no.
    static thread_local llvm::SmallPtrSet<const VarDecl *, 4> Deciding;
    if (!Deciding.insert(Var).second) {
      return false;
    }
    auto Done = llvm::make_scope_exit([Var] { Deciding.erase(Var); });
    bool Stores = false;
    forEachStmt(FunctionBody, [&](const Stmt *S) {
      std::string Holder;
      if (Stores || !isa<CXXMemberCallExpr, BinaryOperator, CXXOperatorCallExpr>(S) ||
          !insideShardedLoop(S, Ctx) || !storesBatchValue(S, Ctx, Holder)) {
        return;
      }
      const Expr *Object = nullptr;
      if (const auto *Call = dyn_cast<CXXMemberCallExpr>(S)) {
        llvm::SmallVector<std::pair<const Expr *, std::string>, 2> Combined;
        if (combinesStoredArguments(Call, Ctx, Combined)) {
          return;
        }
        Object = Call->getImplicitObjectArgument();
      } else if (const Expr *Target = assignmentTarget(S)) {
        Object = Target;
      }
      // The variable at the root of the object: `losses`, `stats` of `stats.loss`, `*meter`.
      while (Object) {
        Object = Object->IgnoreParenImpCasts();
        if (const auto *Member = dyn_cast<MemberExpr>(Object)) {
          Object = Member->getBase();
        } else if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Object);
                   Operator && Operator->getNumArgs() >= 1 &&
                   (Operator->getOperator() == OO_Arrow || Operator->getOperator() == OO_Star ||
                    Operator->getOperator() == OO_Subscript)) {
          Object = Operator->getArg(0);
        } else {
          break;
        }
      }
      const auto *Root = dyn_cast_or_null<DeclRefExpr>(Object);
      Stores = Root && Root->getDecl() == Var;
    });
    return Stores;
  }

  /// A value given to Var (its initializer, or one stored into it) inside a sharded loop and
  /// computed from tensors there, or, elsewhere, from such a value.
  bool variableFromShard(const VarDecl *Var, int Depth) {
    if (!Var->hasLocalStorage() || isa<ParmVarDecl>(Var) || Following.contains(Var)) {
      return false;
    }
    if (Depth >= MaxDepth) {
      return true;
    }
    Following.insert(Var);
    // Outside the sharded loops only numbers carry a shard's value on (`best = running`,
    // `mean = sum / n`); a tensor or a batch made there comes from data every process sees.
    // A number set under a condition that differs holds what the condition says (`if
    // (mean < target) reached = true;`).
    const bool Number = Var->getType().getNonReferenceType()->isArithmeticType();
    auto Given = [&](const Stmt *Where, const Expr *Value) {
      if (insideShardedLoop(Where, Ctx)) {
        return differsInShardedLoop(Value, FunctionBody, Ctx);
      }
      return Number && (fromShard(Value, Depth + 1) || underShardCondition(Where, Depth));
    };
    // A container or an object the sharded loop hands this process's batch values to
    // (`losses.push_back(loss.item<double>())`, a meter's update with arguments it does not
    // combine): what is read from it later is this process's.
    if (!Number && storesUncombinedBatchValues(Var)) {
      Following.erase(Var);
      return true;
    }
    bool Found = false;
    if (Var->getInit()) {
      auto Parents = Ctx.getParents(*Var);
      const Stmt *Declaration = Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
      Found = Declaration && Given(Declaration, Var->getInit());
    }
    // Stores by the built-in operators and by a class's (a tensor's `loss = ...` in the
    // loop, read after it).
    forEachStmt(FunctionBody, [&](const Stmt *S) {
      const Expr *Value = nullptr;
      const Expr *Target = assignmentTarget(S, &Value);
      if (Found || !Target) {
        return;
      }
      const auto *Ref = dyn_cast<DeclRefExpr>(Target->IgnoreParenImpCasts());
      Found = Ref && Ref->getDecl() == Var && Given(S, Value);
    });
    Following.erase(Var);
    return Found;
  }
};

} // namespace

bool differsInShardedLoop(const Expr *E, const Stmt *FunctionBody, ASTContext &Ctx) {
  TensorOriginOverride SameEverywhere = [&](const Expr *Part) -> std::optional<bool> {
    const auto *Shape = dyn_cast<CXXMemberCallExpr>(Part);
    const CXXMethodDecl *Method = Shape ? Shape->getMethodDecl() : nullptr;
    if (!Method || !Method->getDeclName().isIdentifier() ||
        !llvm::is_contained({"size", "sizes", "numel", "dim"}, Method->getName())) {
      return std::nullopt;
    }
    const VarDecl *Var = namedVar(Shape->getImplicitObjectArgument());
    if (!Var || !heldWholeByEveryProcess(Var, Ctx)) {
      return std::nullopt;
    }
    for (const Expr *Argument : Shape->arguments()) {
      if (computedFromTensors(Argument, FunctionBody)) {
        return std::nullopt;
      }
    }
    return false;
  };
  return computedFromTensors(E, FunctionBody, SameEverywhere);
}

bool heldWholeByEveryProcess(const VarDecl *Var, ASTContext &Ctx) {
  // Which loops are sharded is itself decided from what values are (a counted loop's cuts
  // are classified); asked again while it is being decided, the answer is the cautious one.
  static thread_local bool Deciding = false;
  if (Deciding) {
    return false;
  }
  Deciding = true;
  auto Done = llvm::make_scope_exit([] { Deciding = false; });
  const auto *Function = dyn_cast_or_null<FunctionDecl>(Var->getDeclContext());
  const Stmt *Body = Function ? Function->getBody() : nullptr;
  if (!Body || !Var->hasLocalStorage() || !isTensorType(Var->getType())) {
    return false;
  }
  bool HasShardedLoop = false;
  forEachStmt(Body, [&](const Stmt *S) {
    HasShardedLoop = HasShardedLoop || (isa<CXXForRangeStmt, ForStmt, WhileStmt, DoStmt>(S) &&
                                        iteratesShardedLoader(S, Ctx));
  });
  if (!HasShardedLoop) {
    return false; // a step helper's tensors are its batch's
  }
  if (!isa<ParmVarDecl>(Var)) {
    auto Parents = Ctx.getParents(*Var);
    const Stmt *Declaration = Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
    if (!Declaration || insideShardedLoop(Declaration, Ctx)) {
      return false;
    }
  }
  // Never changed in a sharded loop: assigned, or changed in place (`t.add_(...)`).
  bool ChangedInside = false;
  forEachStmt(Body, [&](const Stmt *S) {
    const auto *Use = dyn_cast<DeclRefExpr>(S);
    ChangedInside = ChangedInside || (Use && Use->getDecl() == Var && changesTensor(Use, Ctx) &&
                                      insideShardedLoop(Use, Ctx));
  });
  return !ChangedInside;
}

bool insideShardedLoop(const Stmt *S, ASTContext &Ctx) {
  for (DynTypedNodeList Parents = Ctx.getParents(*S); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>()) {
      return false;
    }
    if (const auto *Loop = Parents[0].get<Stmt>();
        Loop && isa<CXXForRangeStmt, ForStmt, WhileStmt, DoStmt>(Loop) &&
        iteratesShardedLoader(Loop, Ctx)) {
      return true;
    }
  }
  return false;
}

std::optional<DivergentStep> divergentLeaveAround(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *FunctionBody = functionBodyAround(Loop, Loop, Ctx);
  std::optional<DivergentStep> Result;
  ShardValues Values{Ctx, FunctionBody, {}};
  auto FromShard = [&](const Expr *Condition) {
    return Condition && Values.fromShard(Condition, 0);
  };
  llvm::SmallVector<const Expr *, 4> Conditions;
  // Nested: inside a loop or switch of Outer's body, where break and continue are its own.
  std::function<void(const Stmt *, bool)> Walk = [&](const Stmt *S, bool Nested) {
    if (!S || Result || S == Loop || isa<LambdaExpr>(S)) {
      return;
    }
    if (isa<ReturnStmt, GotoStmt, CXXThrowExpr>(S) ||
        (!Nested && isa<BreakStmt, ContinueStmt>(S))) {
      for (const Expr *Condition : Conditions) {
        if (FromShard(Condition)) {
          Result = DivergentStep{S, Condition, true};
          return;
        }
      }
    }
    auto Under = [&](const Expr *Condition, const Stmt *Child, bool ChildNested) {
      Conditions.push_back(Condition);
      Walk(Child, ChildNested);
      Conditions.pop_back();
    };
    if (const auto *If = dyn_cast<IfStmt>(S)) {
      Under(If->getCond(), If->getThen(), Nested);
      Under(If->getCond(), If->getElse(), Nested);
      return;
    }
    const bool Inner = Nested || isa<CXXForRangeStmt, ForStmt, WhileStmt, DoStmt, SwitchStmt>(S);
    for (const Stmt *Child : S->children()) {
      Walk(Child, Inner);
    }
  };
  for (DynTypedNodeList Parents = Ctx.getParents(*Loop); !Parents.empty() && !Result;
       Parents = Ctx.getParents(Parents[0])) {
    if (Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>()) {
      break;
    }
    const auto *Outer = Parents[0].get<Stmt>();
    if (!Outer || !isa<CXXForRangeStmt, ForStmt, WhileStmt, DoStmt>(Outer)) {
      continue;
    }
    const Expr *Own = conditionOf(Outer); // null for a range-for
    if (FromShard(Own)) {
      Result = DivergentStep{Outer, Own, true};
      break;
    }
    Walk(loopBody(Outer), false);
  }
  return Result;
}

bool underConditionThatDiffers(const Stmt *S, ASTContext &Ctx) {
  const Stmt *FunctionBody = functionBodyAround(S, S, Ctx);
  ShardValues Values{Ctx, FunctionBody, {}};
  // Not the condition S is in: S is evaluated by every process that reaches the statement.
  // Nor the sharded loop's own: every process runs it as often (the rewrite evens them).
  return anyConditionAround(S, Ctx, [&](const Stmt *Owner, const Expr *Condition) {
    return !iteratesShardedLoader(Owner, Ctx) &&
           ((insideShardedLoop(Condition, Ctx) &&
             differsInShardedLoop(Condition, FunctionBody, Ctx)) ||
            Values.fromShard(Condition, 0));
  });
}

std::optional<DivergentStep> divergentStep(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *Body = loopBody(Loop);
  const Stmt *FunctionBody = functionBodyAround(Loop, Body, Ctx);
  std::optional<DivergentStep> Result;
  llvm::SmallVector<const Expr *, 4> Conditions;
  // Nested: inside a loop or switch of the body, where break and continue are its own.
  std::function<void(const Stmt *, bool)> Walk = [&](const Stmt *S, bool Nested) {
    if (!S || Result || isa<LambdaExpr>(S)) {
      return;
    }
    const CXXMemberCallExpr *Step = nullptr;
    const bool Leaves =
        isa<ReturnStmt, GotoStmt, CXXThrowExpr>(S) || (!Nested && isa<BreakStmt, ContinueStmt>(S));
    if (Leaves || isBackwardCall(S) || isOptimizerStep(S, Step)) {
      for (const Expr *Condition : Conditions) {
        if (differsInShardedLoop(Condition, FunctionBody, Ctx)) {
          Result = DivergentStep{S, Condition, Leaves};
          return;
        }
      }
    }
    auto Under = [&](const Expr *Condition, const Stmt *Child, bool ChildNested) {
      if (Condition) {
        Conditions.push_back(Condition);
      }
      Walk(Child, ChildNested);
      if (Condition) {
        Conditions.pop_back();
      }
    };
    if (const auto *If = dyn_cast<IfStmt>(S)) {
      Walk(If->getCond(), Nested);
      Under(If->getCond(), If->getThen(), Nested);
      Under(If->getCond(), If->getElse(), Nested);
      return;
    }
    if (const auto *While = dyn_cast<WhileStmt>(S)) {
      Under(While->getCond(), While->getBody(), true);
      return;
    }
    if (const auto *For = dyn_cast<ForStmt>(S)) {
      Walk(For->getInit(), Nested);
      Under(For->getCond(), For->getBody(), true);
      return;
    }
    if (const auto *Do = dyn_cast<DoStmt>(S)) {
      Under(Do->getCond(), Do->getBody(), true);
      return;
    }
    if (const auto *Switch = dyn_cast<SwitchStmt>(S)) {
      Under(Switch->getCond(), Switch->getBody(), true);
      return;
    }
    if (const auto *Conditional = dyn_cast<ConditionalOperator>(S)) {
      Walk(Conditional->getCond(), Nested);
      Under(Conditional->getCond(), Conditional->getTrueExpr(), Nested);
      Under(Conditional->getCond(), Conditional->getFalseExpr(), Nested);
      return;
    }
    const bool Inner = Nested || isa<CXXForRangeStmt>(S);
    for (const Stmt *Child : S->children()) {
      Walk(Child, Inner);
    }
  };
  Walk(Body, false);
  return Result;
}

namespace {

/// `options.lr(value)` (or set_lr, momentum, weight_decay) on an optimizer's options: the
/// value, or null.
const Expr *optimizerSettingValue(const Stmt *S) {
  const auto *Set = dyn_cast<CXXMemberCallExpr>(S);
  const CXXMethodDecl *Method = Set ? Set->getMethodDecl() : nullptr;
  if (!Method || Set->getNumArgs() != 1 || !Method->getDeclName().isIdentifier()) {
    return nullptr;
  }
  const llvm::StringRef Name = Method->getName();
  // ReduceLROnPlateauScheduler::step(metric) sets the learning rate from the metric.
  if (Name == "step" &&
      isClassOrDerived(Set->getObjectType(), "torch::optim::ReduceLROnPlateauScheduler")) {
    return Set->getArg(0);
  }
  if (!isClassOrDerived(Set->getObjectType(), "torch::optim::OptimizerOptions")) {
    return nullptr;
  }
  return Name == "lr" || Name == "set_lr" || Name == "momentum" || Name == "weight_decay"
             ? Set->getArg(0)
             : nullptr;
}

/// A call of a helper of the program's own that sets the optimizer (`set_lr(optimizer, lr)`):
/// its arguments together, as the value set; null for any other statement.
const CallExpr *settingHelperCall(const Stmt *S) {
  const auto *Call = dyn_cast<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->hasBody() || isa<CXXOperatorCallExpr>(Call)) {
    return nullptr;
  }
  bool Sets = false;
  forEachStmt(Callee->getBody(),
              [&](const Stmt *Inner) { Sets = Sets || optimizerSettingValue(Inner) != nullptr; });
  return Sets ? Call : nullptr;
}

} // namespace

std::optional<DivergentStep> divergentSetting(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *FunctionBody = functionBodyAround(Loop, Loop, Ctx);
  ShardValues Values{Ctx, FunctionBody, {}};
  std::optional<DivergentStep> Result;
  forEachStmt(FunctionBody, [&](const Stmt *S) {
    if (Result) {
      return;
    }
    const Expr *Value = optimizerSettingValue(S);
    const auto *Set = dyn_cast<Expr>(S);
    if (!Value) {
      // Through a helper: any of its arguments may be the value.
      const CallExpr *Helper = settingHelperCall(S);
      if (!Helper) {
        return;
      }
      for (const Expr *Argument : Helper->arguments()) {
        if ((insideShardedLoop(Helper, Ctx) && differsInShardedLoop(Argument, FunctionBody, Ctx)) ||
            Values.fromShard(Argument, 0)) {
          Value = Argument;
        }
      }
      if (!Value && !underConditionThatDiffers(Helper, Ctx)) {
        return;
      }
      Value = Value ? Value : Helper;
    }
    if (Value != Set &&
        ((insideShardedLoop(Set, Ctx) && differsInShardedLoop(Value, FunctionBody, Ctx)) ||
         Values.fromShard(Value, 0))) {
      Result = DivergentStep{Set, Value, false};
    } else if (underConditionThatDiffers(Set, Ctx)) {
      // The nearest condition around it (the one that differs, or inside it).
      const Expr *Condition = nullptr;
      for (DynTypedNodeList Parents = Ctx.getParents(*Set); !Parents.empty() && !Condition;
           Parents = Ctx.getParents(Parents[0])) {
        Condition = conditionOf(Parents[0].get<Stmt>());
      }
      Result = DivergentStep{Set, Condition ? Condition : Value, false};
    }
  });
  return Result;
}

} // namespace accel::rewrites
