//===- CountedBatchLoops.cpp - Loops that cut their batches by a counter --===//
#include "analysis/CountedBatchLoops.h"

#include "analysis/AnalysisContext.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/ParentMapContext.h"
#include "llvm/ADT/STLExtras.h"

using namespace clang;

namespace accel::rewrites {
namespace {

bool namesVar(const Expr *E, const VarDecl *Var) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E ? E->IgnoreParenImpCasts() : nullptr);
  return Ref && Ref->getDecl() == Var;
}

/// `for (INT i = begin; ...)`: the counter, or null.
const VarDecl *counterOf(const ForStmt *Loop) {
  const auto *Init = dyn_cast_or_null<DeclStmt>(Loop->getInit());
  const auto *Var =
      Init && Init->isSingleDecl() ? dyn_cast<VarDecl>(Init->getSingleDecl()) : nullptr;
  return Var && Var->getType()->isIntegerType() && Var->getInit() ? Var : nullptr;
}

/// The condition `i < end`, `i <= end`, `i + ahead < end` or `i + ahead <= end` (a loop that
/// drops a last partial batch; the ahead may be a sum, `i + window + 1 <= n`): end, or null;
/// Aheads (the addends, in order) and Inclusive say which.
const Expr *boundOf(const ForStmt *Loop, const VarDecl *Counter,
                    llvm::SmallVectorImpl<const Expr *> &Aheads, bool &Inclusive) {
  Aheads.clear();
  const auto *Condition = dyn_cast_or_null<BinaryOperator>(
      Loop->getCond() ? Loop->getCond()->IgnoreParenImpCasts() : nullptr);
  if (!Condition || (Condition->getOpcode() != BO_LT && Condition->getOpcode() != BO_LE)) {
    return nullptr;
  }
  Inclusive = Condition->getOpcode() == BO_LE;
  // `((i + a) + b) < end`: down the left operands to the counter.
  const Expr *Left = Condition->getLHS()->IgnoreParenImpCasts();
  while (const auto *Sum = dyn_cast<BinaryOperator>(Left)) {
    if (Sum->getOpcode() != BO_Add) {
      return nullptr;
    }
    Aheads.insert(Aheads.begin(), Sum->getRHS());
    Left = Sum->getLHS()->IgnoreParenImpCasts();
  }
  if (!namesVar(Left, Counter)) {
    Aheads.clear();
    return nullptr;
  }
  return Condition->getRHS();
}

/// `i += step` or `i = i + step` (Step set), `++i` or `i++` (Step null): true; false for any
/// other increment.
bool stepOf(const ForStmt *Loop, const VarDecl *Counter, const Expr *&Step) {
  Step = nullptr;
  const Expr *Increment = Loop->getInc() ? Loop->getInc()->IgnoreParenImpCasts() : nullptr;
  if (const auto *Unary = dyn_cast_or_null<UnaryOperator>(Increment)) {
    return Unary->isIncrementOp() && namesVar(Unary->getSubExpr(), Counter);
  }
  if (const auto *Compound = dyn_cast_or_null<CompoundAssignOperator>(Increment)) {
    Step = Compound->getRHS();
    return Compound->getOpcode() == BO_AddAssign && namesVar(Compound->getLHS(), Counter);
  }
  const auto *Assign = dyn_cast_or_null<BinaryOperator>(Increment);
  const auto *Sum = Assign && Assign->getOpcode() == BO_Assign
                        ? dyn_cast<BinaryOperator>(Assign->getRHS()->IgnoreParenImpCasts())
                        : nullptr;
  if (Sum && Sum->getOpcode() == BO_Add && namesVar(Assign->getLHS(), Counter) &&
      namesVar(Sum->getLHS(), Counter)) {
    Step = Sum->getRHS();
    return true;
  }
  return false;
}

bool isTensorMethod(const Stmt *S, llvm::StringRef Method) {
  return isMethodCall(S, "at::Tensor", Method) || isMethodCall(S, "at::TensorBase", Method);
}

bool isZero(const Expr *E, const ASTContext &Ctx) {
  Expr::EvalResult Value;
  return !E->isValueDependent() && E->IgnoreImpCasts()->EvaluateAsInt(Value, Ctx) &&
         Value.Val.getInt() == 0;
}

/// The expression that cuts a batch's rows with the counter Ref names: Ref is inside the start
/// or end of `t.slice(0, start, end)` or `t.narrow(0, start, length)`, or of the first index
/// of `t.index({Slice(start, end), ...})`, or is the index of `batches[b]` that gives a batch
/// (isBatchType: a vector of batches made beforehand), through arithmetic, std::min and std::max
/// and casts only. Null when Ref is used another way; then, where Ref is inside the initializer of
/// an integer variable the same way (`int64_t start = i * batch_size;`), that variable is Offset.
const Expr *cutOf(const DeclRefExpr *Ref, ASTContext &Ctx, const VarDecl **Offset = nullptr) {
  const Expr *Current = Ref;
  bool InSlice = false, FirstIndex = true;
  for (int Depth = 0; Depth < 32; ++Depth) {
    auto Parents = Ctx.getParents(*Current);
    const auto *Parent = Parents.empty() ? nullptr : Parents[0].get<Expr>();
    if (!Parent) {
      const auto *Declared = Parents.empty() ? nullptr : Parents[0].get<VarDecl>();
      if (Offset && !InSlice && Declared && Declared->getInit() == Current &&
          Declared->getType()->isIntegerType() && Declared->isLocalVarDecl()) {
        *Offset = Declared;
      }
      return nullptr;
    }
    if (const auto *Call = dyn_cast<CXXMemberCallExpr>(Parent)) {
      if ((isTensorMethod(Call, "slice") || isTensorMethod(Call, "narrow")) && !InSlice &&
          Call->getNumArgs() >= 3 && isZero(Call->getArg(0), Ctx) &&
          (Call->getArg(1) == Current || Call->getArg(2) == Current)) {
        return Call;
      }
      if (isTensorMethod(Call, "index") && InSlice && FirstIndex && Call->getNumArgs() == 1 &&
          Call->getArg(0) == Current) {
        return Call;
      }
      return nullptr;
    }
    if (const auto *Subscript = dyn_cast<CXXOperatorCallExpr>(Parent);
        Subscript && Subscript->getOperator() == OO_Subscript) {
      // A tensor's own operator[] picks one sample, not a batch. A list's element is a batch
      // of one tensor or of several (a pair, a tuple, an Example: batch_rows cuts each).
      const Expr *Object = Subscript->getArg(0)->IgnoreParenImpCasts();
      return !InSlice && Subscript->getNumArgs() == 2 && Subscript->getArg(1) == Current &&
                     isBatchType(Subscript->getType()) && !isTensorType(Object->getType())
                 ? Subscript
                 : nullptr;
    }
    if (const auto *Binary = dyn_cast<BinaryOperator>(Parent)) {
      if (!Binary->isAdditiveOp() && !Binary->isMultiplicativeOp()) {
        return nullptr;
      }
    } else if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
      const std::string Name = qualifiedName(Call->getDirectCallee());
      if (Name != "std::min" && Name != "std::max") {
        return nullptr;
      }
    } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Parent)) {
      // std::optional<int64_t>, SymInt, Slice and TensorIndex on the way to index(...).
      // (Slice is at::indexing's, which torch::indexing also names.)
      InSlice = InSlice || llvm::StringRef(qualifiedName(Construct->getConstructor()->getParent()))
                               .ends_with("indexing::Slice");
    } else if (const auto *List = dyn_cast<InitListExpr>(Parent)) {
      // By place: the list's syntactic and semantic forms hold different nodes.
      FirstIndex = FirstIndex && List->getNumInits() > 0 &&
                   List->getInit(0)->getBeginLoc() == Current->getBeginLoc();
    } else if (!isa<ImplicitCastExpr, ParenExpr, CXXFunctionalCastExpr, CStyleCastExpr,
                    CXXStaticCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr,
                    ExprWithCleanups, CXXStdInitializerListExpr>(Parent)) {
      return nullptr;
    }
    Current = Parent;
  }
  return nullptr;
}

/// The integer variables a cut (or an offset's initializer) sizes its batch with: added to or
/// multiplied with an expression of the counter or of an offset computed from it (`b * size`,
/// `i + batch`, `start + batch`), or narrow's length.
/// A batch size written as an integer member of a local or parameter (`cfg.batch_size`),
/// added to Members once.
void addBatchSizeMember(
    const Expr *E, llvm::SmallVector<std::pair<const VarDecl *, const FieldDecl *>, 1> &Members) {
  const auto *Member = dyn_cast<MemberExpr>(E->IgnoreParenImpCasts());
  const auto *Field = Member ? dyn_cast<FieldDecl>(Member->getMemberDecl()) : nullptr;
  const VarDecl *Var = Member ? namedVar(Member->getBase()) : nullptr;
  if (Field && Var && Field->getType()->isIntegerType() &&
      !llvm::is_contained(Members, std::make_pair(Var, Field))) {
    Members.emplace_back(Var, Field);
  }
}

void batchSizesOf(const Expr *Cut, const VarDecl *Counter, llvm::ArrayRef<const VarDecl *> Offsets,
                  llvm::SmallVector<const VarDecl *, 2> &Sizes,
                  llvm::SmallVector<std::pair<const VarDecl *, const FieldDecl *>, 1> &Members) {
  auto Counts = [&](const VarDecl *Var) {
    return Var == Counter || llvm::is_contained(Offsets, Var);
  };
  auto Add = [&](const Expr *E) {
    addBatchSizeMember(E, Members);
    const auto *Ref = dyn_cast<DeclRefExpr>(E->IgnoreParenImpCasts());
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    if (Var && !Counts(Var) && Var->getType()->isIntegerType() && !llvm::is_contained(Sizes, Var)) {
      Sizes.push_back(Var);
    }
  };
  auto FromCounter = [&](const Expr *E) {
    bool Found = false;
    forEachStmt(E, [&](const Stmt *S) {
      const auto *Ref = dyn_cast<DeclRefExpr>(S);
      const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
      Found = Found || (Var && Counts(Var));
    });
    return Found;
  };
  const auto *Call = dyn_cast<CXXMemberCallExpr>(Cut);
  if (Call && isTensorMethod(Call, "narrow") && Call->getNumArgs() >= 3) {
    Add(Call->getArg(2));
  }
  forEachStmt(Cut, [&](const Stmt *S) {
    const auto *Binary = dyn_cast<BinaryOperator>(S);
    if (!Binary || !(Binary->isAdditiveOp() || Binary->isMultiplicativeOp())) {
      return;
    }
    if (FromCounter(Binary->getLHS())) {
      Add(Binary->getRHS());
    }
    if (FromCounter(Binary->getRHS())) {
      Add(Binary->getLHS());
    }
  });
}

/// The variable declared as a reference that is not const (`auto& x = xs[b];`,
/// `auto& [x, y] = pairs[b];`) that Cut initializes, or null.
const VarDecl *referenceBoundTo(const Expr *Cut, ASTContext &Ctx) {
  const Expr *Current = Cut;
  while (true) {
    auto Parents = Ctx.getParents(*Current);
    if (Parents.empty()) {
      return nullptr;
    }
    if (const auto *Var = Parents[0].get<VarDecl>()) {
      QualType Type = Var->getType();
      return Type->isLValueReferenceType() && !Type.getNonReferenceType().isConstQualified()
                 ? Var
                 : nullptr;
    }
    const auto *Parent = Parents[0].get<Expr>();
    if (!Parent || !isa<ImplicitCastExpr, ParenExpr, ExprWithCleanups>(Parent)) {
      return nullptr;
    }
    Current = Parent;
  }
}

/// A use of Var in Body that changes it (for structured bindings, of one of its names), or null.
const DeclRefExpr *changeOf(const VarDecl *Var, const Stmt *Body, ASTContext &Ctx) {
  llvm::SmallVector<const ValueDecl *, 3> Names = {Var};
  if (const auto *Bindings = dyn_cast<DecompositionDecl>(Var)) {
    llvm::append_range(Names, Bindings->bindings());
  }
  const DeclRefExpr *Change = nullptr;
  forEachStmt(Body, [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    if (!Change && Ref && llvm::is_contained(Names, Ref->getDecl()) &&
        changesWhatItNames(Ref, Ctx)) {
      Change = Ref;
    }
  });
  return Change;
}

std::string lineOf(SourceLocation Loc, const ASTContext &Ctx) {
  return std::to_string(Ctx.getSourceManager().getExpansionLineNumber(Loc));
}

/// Why the bound or step E might not stay what it was when the loop began (batch_range
/// evaluates it once, the loop's header every iteration), or "".
std::string changingBound(const Expr *E, const Stmt *Body, llvm::ArrayRef<const Expr *> Cuts,
                          ASTContext &Ctx) {
  // Taking a batch from a list (`batches[b]`, a reference that is not const) leaves the
  // list's size as it is.
  auto ChangedInBody = [&](const VarDecl *Var) {
    bool Changed = false;
    forEachStmt(Body, [&](const Stmt *S) {
      const auto *Use = dyn_cast<DeclRefExpr>(S);
      if (Changed || !Use || Use->getDecl() != Var || !changesWhatItNames(Use, Ctx)) {
        return;
      }
      Changed = !llvm::any_of(Cuts, [&](const Expr *Cut) {
        const auto *Subscript = dyn_cast<CXXOperatorCallExpr>(Cut);
        return Subscript && Subscript->getArg(0)->IgnoreParenImpCasts() == Use;
      });
    });
    return Changed;
  };
  std::string Why;
  forEachStmt(E, [&](const Stmt *S) {
    if (!Why.empty()) {
      return;
    }
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
      if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl()); Var && ChangedInBody(Var)) {
        Why = "the loop changes '" + Var->getNameAsString() + "', which its condition reads";
      }
    } else if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S)) {
      if (!Member->getMethodDecl() || !Member->getMethodDecl()->isConst()) {
        Why = "its condition calls " + sourceText(Member, Ctx) + ", which may change";
      }
    } else if (const auto *Call = dyn_cast<CallExpr>(S); Call && !isa<CXXOperatorCallExpr>(Call)) {
      const std::string Name = qualifiedName(Call->getDirectCallee());
      if (Name != "std::min" && Name != "std::max") {
        Why = "its condition calls " + sourceText(Call, Ctx) + ", which may change";
      }
    }
  });
  return Why;
}

} // namespace

CountedBatchLoop analyzeCountedBatchLoop(const ForStmt *Loop, ASTContext &Ctx) {
  CountedBatchLoop Result;
  const VarDecl *Counter = counterOf(Loop);
  llvm::SmallVector<const Expr *, 2> Aheads;
  bool Inclusive = false;
  const Expr *End = Counter ? boundOf(Loop, Counter, Aheads, Inclusive) : nullptr;
  const Expr *Step = nullptr;
  const Stmt *Body = Loop->getBody();
  if (!End || !Body || !stepOf(Loop, Counter, Step)) {
    return Result;
  }
  // The counter's uses, then those of the offsets computed from it: each a cut, or (for the
  // counter) an offset's initializer.
  const DeclRefExpr *OtherUse = nullptr;
  auto UsesOf = [&](const VarDecl *Var) {
    forEachStmt(Body, [&](const Stmt *S) {
      const auto *Ref = dyn_cast<DeclRefExpr>(S);
      if (!Ref || Ref->getDecl() != Var) {
        return;
      }
      const VarDecl *Offset = nullptr;
      if (const Expr *Cut = cutOf(Ref, Ctx, Var == Counter ? &Offset : nullptr)) {
        if (!llvm::is_contained(Result.Cuts, Cut)) {
          Result.Cuts.push_back(Cut);
        }
      } else if (Offset && !changesWhatItNames(Ref, Ctx)) {
        if (!llvm::is_contained(Result.Offsets, Offset)) {
          Result.Offsets.push_back(Offset);
        }
      } else if (!OtherUse) {
        OtherUse = Ref;
      }
    });
  };
  UsesOf(Counter);
  for (size_t I = 0; I < Result.Offsets.size(); ++I) {
    UsesOf(Result.Offsets[I]);
  }
  if (Result.Cuts.empty()) {
    return Result; // Not a loop that cuts batches.
  }
  Result.Counted = true;
  Result.Counter = Counter;
  Result.Begin = Counter->getInit();
  Result.End = End;
  Result.Aheads = Aheads;
  Result.Inclusive = Inclusive;
  Result.Step = Step;
  llvm::SmallVector<const Expr *, 3> Sizes(Aheads.begin(), Aheads.end());
  Sizes.push_back(Step);
  for (const Expr *Size : Sizes) {
    if (Size) {
      addBatchSizeMember(Size, Result.BatchSizeMembers);
    }
    const auto *Ref = Size ? dyn_cast<DeclRefExpr>(Size->IgnoreParenImpCasts()) : nullptr;
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    if (Var && Var->getType()->isIntegerType() && !llvm::is_contained(Result.BatchSizes, Var)) {
      Result.BatchSizes.push_back(Var);
    }
  }
  for (const Expr *Cut : Result.Cuts) {
    if (isa<CXXMemberCallExpr>(Cut)) {
      batchSizesOf(Cut, Counter, Result.Offsets, Result.BatchSizes, Result.BatchSizeMembers);
    }
  }
  for (const VarDecl *Offset : Result.Offsets) {
    batchSizesOf(Offset->getInit(), Counter, Result.Offsets, Result.BatchSizes,
                 Result.BatchSizeMembers);
  }
  const std::string Name = "'" + Counter->getNameAsString() + "'";
  const std::string ByHand =
      "; or give each process its part by hand (accelerator.process_index(), "
      "accelerator.num_processes())";
  auto Problem = [&](std::string Text) {
    if (Result.Problem.empty()) {
      Result.Problem = std::move(Text);
    }
  };
  if (OtherUse) {
    // A change of the counter in the body is such a use too.
    const std::string Used =
        OtherUse->getDecl() == Counter
            ? Name
            : "'" + OtherUse->getDecl()->getNameAsString() + "', computed from " + Name + ",";
    Problem("this loop cuts its batches with " + Name + ", and uses " + Used +
            " for something else too (line " + lineOf(OtherUse->getBeginLoc(), Ctx) +
            "): accel-rewrite shares the loop by running each process's share of the "
            "iterations, where that use would see other values than in the original; count "
            "with a variable of your own and use " +
            Name + " only to cut the batch" + ByHand);
  }
  if (leavesEarly(Body)) {
    Problem("this loop over batches can leave early (a break, a return): the processes would "
            "stop at different batches while the others wait for their gradients; end it "
            "with its condition" +
            ByHand);
  }
  llvm::SmallVector<const Expr *, 4> Bounds(Aheads.begin(), Aheads.end());
  Bounds.append({End, Step});
  for (const Expr *Bound : Bounds) {
    if (std::string Why = Bound ? changingBound(Bound, Body, Result.Cuts, Ctx) : ""; !Why.empty()) {
      Problem("this loop over batches cannot be shared: " + Why +
              ", and a shared loop fixes its batches when it begins" + ByHand);
    }
  }
  // A batch taken from a list by a reference (`auto& x = xs[b];`): batch_rows returns a new
  // tensor, which only a copy holds. The copy shares the list's memory, so it acts as the
  // reference did unless the loop changes what the reference names (`x = x.to(device)`).
  for (const Expr *Cut : Result.Cuts) {
    const VarDecl *Reference = referenceBoundTo(Cut, Ctx);
    if (!Reference) {
      continue;
    }
    if (const DeclRefExpr *Change = changeOf(Reference, Body, Ctx)) {
      Problem("this loop takes its batch by a reference that is not const ('" +
              Reference->getNameAsString() + "'), and changes what it names (line " +
              lineOf(Change->getBeginLoc(), Ctx) +
              "): the shared loop cuts a new batch, which a reference to the list cannot hold; "
              "assign the changed batch to a variable of its own" +
              ByHand);
    } else {
      Result.ReferencesCopied.push_back(Reference);
    }
  }
  const SourceManager &SM = Ctx.getSourceManager();
  for (const Expr *Cut : Result.Cuts) {
    if (Cut->getBeginLoc().isMacroID() || Cut->getEndLoc().isMacroID()) {
      Problem("this loop cuts a batch inside a macro (line " + lineOf(Cut->getBeginLoc(), Ctx) +
              "), which accel-rewrite does not edit" + ByHand);
    } else if (innermostLoop(DynTypedNode::create(*Cut), Ctx) != Loop) {
      Problem("this loop cuts a batch in a loop inside it (line " +
              lineOf(Cut->getBeginLoc(), Ctx) + "), which accel-rewrite does not share" + ByHand);
    }
  }
  if (Loop->getInit()->getBeginLoc().isMacroID() || Loop->getInc()->getEndLoc().isMacroID()) {
    Problem("this loop over batches is written in a macro, which accel-rewrite does not edit" +
            ByHand);
  } else if (!SM.isWrittenInMainFile(SM.getExpansionLoc(Loop->getBeginLoc()))) {
    Problem("this loop over batches is in an included file, which accel-rewrite does not edit" +
            ByHand);
  }
  if (const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Loop), Ctx);
      Function && (Function->isTemplateInstantiation() || Function->isDependentContext())) {
    Problem("this loop over batches is in a template, whose text other instantiations share; "
            "accel-rewrite shares it only in a plain function" +
            ByHand);
  }
  return Result;
}

bool cutsSharedBatches(const ForStmt *Loop, ASTContext &Ctx) {
  if (!AnalysisContext::of(Ctx).countedBatchLoop(Loop).shareable()) {
    return false;
  }
  if (isTrainingStepLoop(Loop, Ctx)) {
    return true;
  }
  // Or it calls a helper that is one training step (`train_step(model, x, y)`), once per
  // iteration.
  bool CallsStep = false;
  forEachStmt(Loop->getBody(), [&](const Stmt *S) {
    const auto *Call = dyn_cast<CallExpr>(S);
    CallsStep = CallsStep || (Call && Call->getDirectCallee() &&
                              isTrainingStepFunction(Call->getDirectCallee()) &&
                              innermostLoop(DynTypedNode::create(*Call), Ctx) == Loop);
  });
  return CallsStep;
}

} // namespace accel::rewrites
