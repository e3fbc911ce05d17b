//===- TrainingPlan.cpp - The plan of each training loop ------------------===//
#include "analysis/TrainingPlan.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/CountedBatchLoops.h"
#include "analysis/DivergentSteps.h"
#include "analysis/IncludedTraining.h"
#include "analysis/SequenceBatches.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>
#include <map>

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

/// Backward calls in the main file's code, template instantiations included (in a template,
/// `loss.backward()` on a dependent `loss` is a call only in the instantiations).
class BackwardCalls : public RecursiveASTVisitor<BackwardCalls> {
public:
  explicit BackwardCalls(const SourceManager &SM) : SM(SM) {}
  bool shouldVisitTemplateInstantiations() const { return true; }

  bool TraverseDecl(Decl *D) {
    if (D && !isa<TranslationUnitDecl>(D) &&
        !SM.isWrittenInMainFile(SM.getExpansionLoc(D->getLocation()))) {
      return true; // headers are no plan's business
    }
    return RecursiveASTVisitor::TraverseDecl(D);
  }
  bool VisitStmt(Stmt *S) {
    if (isBackwardCall(S) && SM.isWrittenInMainFile(SM.getExpansionLoc(S->getBeginLoc()))) {
      Found.push_back(S);
    }
    return true;
  }

  const SourceManager &SM;
  std::vector<const Stmt *> Found;
};

unsigned offsetOf(const Stmt *S, const SourceManager &SM) {
  return SM.getFileOffset(SM.getExpansionLoc(S->getBeginLoc()));
}

/// The object a member call is on, as a declaration: `opt` in `opt.step()`, `opt->step()`
/// (raw or smart pointer) and `(*opt).step()`; a field for `this->opt.step()`.
const ValueDecl *calledOn(const CXXMemberCallExpr *Call) {
  const Expr *Object = Call->getImplicitObjectArgument();
  if (!Object) {
    return nullptr;
  }
  Object = Object->IgnoreParenImpCasts();
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object);
      Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
    Object = Arrow->getArg(0)->IgnoreParenImpCasts();
  }
  if (const VarDecl *Var = namedVar(Object)) {
    return Var;
  }
  if (const auto *Member = dyn_cast<MemberExpr>(spelled(Object))) {
    return Member->getMemberDecl();
  }
  return nullptr;
}

/// Follows an optimizer (a local, or a helper's parameter) back to the local variables that
/// create it, through the calls of this file (a helper called for two models has two); false
/// with Why set when that cannot be told.
bool creatingVariables(const VarDecl *Var, ASTContext &Ctx, std::string &Why,
                       llvm::SmallVectorImpl<const VarDecl *> &Created, int Depth = 0) {
  std::string Name = "'" + Var->getNameAsString() + "'";
  if (Depth > 4) {
    Why = "optimizer " + Name + " is passed through too many functions to follow";
    return false;
  }
  if (const auto *Param = dyn_cast<ParmVarDecl>(Var)) {
    const auto *Function = dyn_cast<FunctionDecl>(Param->getDeclContext());
    if (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Function);
        Method && Method->getParent()->isLambda()) {
      Why = "optimizer " + Name + " is a parameter of a lambda, whose calls accel-rewrite " +
            "does not follow";
      return false;
    }
    llvm::ArrayRef<const CallExpr *> Calls =
        Function ? callsInMainFile(Function, Ctx) : llvm::ArrayRef<const CallExpr *>();
    if (Calls.empty()) {
      Why = "optimizer " + Name + " is a parameter of " + functionLabel(Function) +
            ", which no code in this file calls";
      return false;
    }
    unsigned Index = Param->getFunctionScopeIndex();
    for (const CallExpr *Call : Calls) {
      const VarDecl *Passed = Index < Call->getNumArgs() ? namedVar(Call->getArg(Index)) : nullptr;
      if (!Passed || !creatingVariables(Passed, Ctx, Why, Created, Depth + 1)) {
        if (Why.empty()) {
          Why = "cannot tell which optimizer a call of " + functionLabel(Function) + " passes as " +
                Name;
        }
        return false;
      }
    }
    return true;
  }
  if (!Var->isLocalVarDecl() || Var->getType()->isReferenceType() ||
      Var->getType()->isPointerType() || !isOptimizerOrPointerTo(Var->getType())) {
    Why = "optimizer " + Name +
          " is not a local variable holding the optimizer itself, so accel-rewrite cannot "
          "tell where it is created";
    return false;
  }
  if (!llvm::is_contained(Created, Var)) {
    Created.push_back(Var);
  }
  return true;
}

/// Why batches cut along dimension 0 (How says which) cannot train a sequence-first Model.
std::string sequenceFirstProblem(llvm::StringRef How, const VarDecl *Model) {
  return How.str() + " along dimension 0, which model '" + Model->getNameAsString() +
         "' reads as time (it holds an LSTM, GRU or RNN not built with batch_first(true), "
         "a cell (LSTMCell, GRUCell, RNNCell), which a forward pass steps over time however "
         "the program lays its input out, or a Transformer or MultiheadAttention, which read "
         "(time, batch, features)): with "
         "split_batches each process would get a part of each sequence instead of whole "
         "sequences; build a recurrent module with batch_first(true) and cut samples, or give "
         "each process its part by hand (accelerator.process_index(), "
         "accelerator.num_processes())";
}

/// A gradient read in Loop (`scale.grad()`) of a tensor variable the program made itself with
/// a LibTorch factory (`torch::ones({1}, torch::requires_grad())`), which no model holds; null
/// for none. A loop variable over a model's parameters (`for (auto &p : model->parameters())`)
/// and a parameter of the function are not such tensors.
const CXXMemberCallExpr *gradientOfFreeTensor(const Stmt *Loop, ASTContext &Ctx) {
  const CXXMemberCallExpr *Found = nullptr;
  forEachStmt(Loop, [&](const Stmt *S) {
    const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
    if (Found || !Call ||
        !(isMethodCall(Call, "at::Tensor", "grad") ||
          isMethodCall(Call, "at::TensorBase", "grad"))) {
      return;
    }
    const auto *Ref = dyn_cast_or_null<DeclRefExpr>(
        Call->getImplicitObjectArgument() ? Call->getImplicitObjectArgument()->IgnoreImplicit()
                                          : nullptr);
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    if (!Var || isa<ParmVarDecl>(Var) || Var->isCXXForRangeDecl() || !Var->getInit() ||
        !isTensorType(Var->getType())) {
      return;
    }
    const auto *Made = dyn_cast<CallExpr>(spelled(Var->getInit()));
    const std::string Factory = Made ? qualifiedName(Made->getDirectCallee()) : "";
    if ((llvm::StringRef(Factory).starts_with("torch::") ||
         llvm::StringRef(Factory).starts_with("at::")) &&
        !isa<CXXMemberCallExpr>(Made)) {
      Found = Call;
    }
  });
  return Found;
}

/// The list a counted for-loop takes its batches from by its counter (`batches[i]` of a
/// vector of structs of the program's own), by name; "" when there is none.
std::string listTakenByCounter(const Stmt *Loop) {
  const auto *For = dyn_cast<ForStmt>(Loop);
  const auto *Init = For ? dyn_cast_or_null<DeclStmt>(For->getInit()) : nullptr;
  const auto *Counter =
      Init && Init->isSingleDecl() ? dyn_cast<VarDecl>(Init->getSingleDecl()) : nullptr;
  if (!Counter) {
    return "";
  }
  std::string Listed;
  forEachStmt(For->getBody(), [&](const Stmt *S) {
    const auto *Subscript = dyn_cast<CXXOperatorCallExpr>(S);
    if (!Listed.empty() || !Subscript || Subscript->getOperator() != OO_Subscript ||
        Subscript->getNumArgs() != 2 || !refersTo(Subscript->getArg(1), Counter) ||
        isTensorType(Subscript->getArg(0)->getType())) {
      return;
    }
    if (const VarDecl *List = namedVar(Subscript->getArg(0)->IgnoreParenImpCasts())) {
      Listed = List->getNameAsString();
    }
  });
  return Listed;
}

/// The loader a for or while loop walks with its iterators (`for (auto it = loader->begin();
/// it != loader->end(); ++it)`), as written with a `*` in front for a pointer, or "".
std::string loaderWalkedByIterators(const Stmt *Loop, const ASTContext &Ctx) {
  const Stmt *Header = nullptr;
  if (const auto *For = dyn_cast<ForStmt>(Loop)) {
    Header = For->getInit() ? For->getInit() : For->getCond();
  } else if (const auto *While = dyn_cast<WhileStmt>(Loop)) {
    Header = While->getCond();
  }
  std::string Walked;
  forEachStmt(Header, [&](const Stmt *S) {
    const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
    const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
    if (!Walked.empty() || !Method ||
        (Method->getName() != "begin" && Method->getName() != "end")) {
      return;
    }
    if (!llvm::StringRef(qualifiedName(Method->getParent())).starts_with("torch::data::")) {
      return;
    }
    const Expr *Object = Call->getImplicitObjectArgument()->IgnoreParenImpCasts();
    if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object);
        Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
      Walked = "*" + sourceText(Arrow->getArg(0), Ctx);
    } else {
      Walked = sourceText(Object, Ctx);
    }
  });
  return Walked;
}

/// The nearest range-for around S (S itself included) inside its function, innermost first,
/// that iterates a loader whose batches are this process's shard; null when there is none.
/// Nearest is set to the nearest range-for of any kind.
const VarDecl *shardedLoaderAround(const Stmt *S, ASTContext &Ctx,
                                   const CXXForRangeStmt *&Nearest) {
  Nearest = nullptr;
  DynTypedNode Current = DynTypedNode::create(*S);
  for (int Depth = 0; Depth < 256; ++Depth) {
    if (const VarDecl *Loader = walkedLoader(Current.get<Stmt>());
        Loader && isShardedLoader(Loader, Ctx)) {
      return Loader;
    }
    if (const auto *Loop = Current.get<CXXForRangeStmt>()) {
      Nearest = Nearest ? Nearest : Loop;
      if (const VarDecl *Loader = iteratedVar(Loop); Loader && isShardedLoader(Loader, Ctx)) {
        return Loader;
      }
      if (isBatchListLoop(Loop, Ctx)) {
        // The list of batches (or, through prepare_batches(...) of a temporary, the loop's
        // variable standing for it).
        const VarDecl *List = iteratedVar(Loop);
        if (const auto *Prepared = dyn_cast<CXXMemberCallExpr>(spelled(Loop->getRangeInit()));
            Prepared && Prepared->getNumArgs() == 1) {
          List = namedVar(Prepared->getArg(0));
        }
        return List ? List : Loop->getLoopVariable();
      }
    }
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty() || Parents[0].get<FunctionDecl>() || Parents[0].get<LambdaExpr>()) {
      return nullptr;
    }
    Current = Parents[0];
  }
  return nullptr;
}

std::string line(SourceLocation Loc, const SourceManager &SM) {
  return std::to_string(SM.getExpansionLineNumber(Loc));
}

/// The named function whose body holds Function's code: itself, or for a lambda the function
/// it is defined in; the template pattern's canonical declaration.
const FunctionDecl *owningFunction(const FunctionDecl *Function) {
  while (Function) {
    const auto *Method = dyn_cast<CXXMethodDecl>(Function);
    if (!Method || !Method->getParent()->isLambda()) {
      break;
    }
    Function = dyn_cast<FunctionDecl>(Method->getParent()->getDeclContext());
  }
  if (!Function) {
    return nullptr;
  }
  if (const FunctionDecl *Pattern = Function->getTemplateInstantiationPattern()) {
    Function = Pattern;
  }
  return Function->getCanonicalDecl();
}

/// Whether Function is the call operator of a lambda that an optimizer's step takes as its
/// closure (`auto closure = [&] { ...; loss.backward(); return loss; };
/// optimizer.step(closure);`, LBFGS's way).
bool closureOfAStep(const FunctionDecl *Function) {
  const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Function);
  if (!Method || !Method->getParent()->isLambda()) {
    return false;
  }
  const CXXRecordDecl *Closure = Method->getParent();
  const FunctionDecl *Outer = owningFunction(Function);
  bool Given = false;
  forEachStmt(Outer && Outer->hasBody() ? Outer->getBody() : nullptr, [&](const Stmt *S) {
    const CXXMemberCallExpr *Step = nullptr;
    if (Given || !isOptimizerStep(S, Step) || Step->getNumArgs() != 1) {
      return;
    }
    const Expr *Argument = Step->getArg(0)->IgnoreImplicit();
    forEachStmt(Argument, [&](const Stmt *Inner) {
      if (const auto *Lambda = dyn_cast<LambdaExpr>(Inner)) {
        Given = Given || Lambda->getLambdaClass() == Closure;
      }
      if (const auto *Ref = dyn_cast<DeclRefExpr>(Inner)) {
        const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
        const auto *Lambda = Var && Var->getInit()
                                 ? dyn_cast<LambdaExpr>(Var->getInit()->IgnoreImplicit())
                                 : nullptr;
        Given = Given || (Lambda && Lambda->getLambdaClass() == Closure);
      }
    });
  });
  return Given;
}

/// The models prepared with the optimizers Plan steps (those found so far).
llvm::SmallVector<const VarDecl *, 2> modelsOf(const LoopPlan &Plan, ASTContext &Ctx) {
  llvm::SmallVector<const VarDecl *, 2> Models;
  if (!Plan.Setup) {
    return Models;
  }
  const SetupInfo &Info = AnalysisContext::of(Ctx).setup(Plan.Setup);
  if (Info.AlreadyPrepared) {
    return Info.models();
  }
  for (const VarDecl *Optimizer : Plan.Optimizers) {
    if (const PrepareGroup *Group = Info.groupOf(Optimizer)) {
      Models.append(Group->Models.begin(), Group->Models.end());
    }
  }
  return Models;
}

/// Fills Plan's optimizers, setup and loader, or its problem.
void plan(LoopPlan &Plan, ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  // One warning per loop, at the loop (at a step helper's name); the text names the part.
  auto Problem = [&](std::string Text) {
    if (!Plan.Problem.empty()) {
      return;
    }
    Plan.Problem = std::move(Text);
    Plan.ProblemLoc = Plan.Kind == LoopPlan::StepFunction && Plan.Function
                          ? Plan.Function->getLocation()
                          : Plan.Unit->getBeginLoc();
    if (Plan.Kind == LoopPlan::StraightLine) {
      // At the first backward of the straight-line step, not at the function's brace.
      bool Found = false;
      forEachStmtOutsideLoops(Plan.Unit, [&](const Stmt *S) {
        if (!Found && isBackwardCall(S)) {
          Found = true;
          Plan.ProblemLoc = S->getBeginLoc();
        }
      });
    }
  };
  const FunctionDecl *Function = Plan.Function;
  if (!Function) {
    Problem("backward outside any function");
    return;
  }
  const std::string HelperCalledOnce =
      "a training step outside any loop: " + functionLabel(Function) +
      " is called once, not once per batch (accel-rewrite rewrites a step outside a loop "
      "only in the function that creates its optimizer); rewrite it by hand with "
      "accelerator.backward(loss), accelerator.step(optimizer) and "
      "accelerator.zero_grad(optimizer), after accelerator.prepare";
  const bool StraightLine = Plan.Kind == LoopPlan::StraightLine;
  // The statements of the unit: a straight-line step is the function's code outside loops
  // (its loops are units of their own).
  auto ForEachInUnit = [&](llvm::function_ref<void(const Stmt *)> Visit) {
    if (StraightLine) {
      forEachStmtOutsideLoops(Plan.Unit, Visit);
    } else {
      forEachStmt(Plan.Unit, Visit);
    }
  };

  // What the unit steps, and where each optimizer is created and prepared.
  llvm::SmallVector<const CXXMemberCallExpr *, 2> Steps;
  ForEachInUnit([&](const Stmt *S) {
    const CXXMemberCallExpr *Step = nullptr;
    if (isOptimizerStep(S, Step)) {
      Steps.push_back(Step);
    }
  });
  if (Steps.empty() && closureOfAStep(Function)) {
    Problem("this backward is in a closure given to optimizer.step(closure) (LBFGS), which "
            "accelerator.step does not take: the optimizer evaluates the closure several times "
            "a step; rewrite it by hand (accelerator.backward(loss) in the closure, and step "
            "only when accelerator.sync_gradients()), or leave this training on one process");
    return;
  }
  if (Steps.empty()) {
    Problem(StraightLine
                ? "this backward outside any loop in " + functionLabel(Function) +
                      " has no optimizer.step() outside a loop beside it (the step is "
                      "elsewhere, or the gradients are not for training), so accel-rewrite "
                      "cannot tell what it trains; call accelerator.prepare(model, optimizer) "
                      "before it and accelerator.backward(loss) by hand, or leave it out of "
                      "the distributed program"
                : "this training loop calls no optimizer.step() (the step is elsewhere, or "
                  "the parameters are updated by hand), so accel-rewrite cannot tell what to "
                  "prepare; call accelerator.prepare(model, optimizer) before it and "
                  "accelerator.backward(loss) in it by hand");
    return;
  }
  for (const CXXMemberCallExpr *Step : Steps) {
    if (!writtenArgs(Step).empty()) {
      Problem("this optimizer step takes a closure, which accelerator.step does not; rewrite "
              "the loop by hand (step only when accelerator.sync_gradients())");
      return;
    }
    const ValueDecl *Object = calledOn(Step);
    const auto *Var = dyn_cast_or_null<VarDecl>(Object);
    if (const auto *Field = dyn_cast_or_null<FieldDecl>(Object)) {
      // A trainer class: the method prepares the member model and optimizer itself.
      const MemberTraining &Members = AnalysisContext::of(Ctx).memberTraining(Function);
      if (!Members.Problem.empty()) {
        Problem(Members.Problem);
        return;
      }
      // By name: in a class template the step is on a specialization's field.
      if (llvm::any_of(Members.Optimizers, [&](const FieldDecl *Member) {
            return Member->getDeclName() == Field->getDeclName();
          })) {
        Plan.Setup = Function;
        continue;
      }
    }
    if (!Var) {
      Problem(Object ? "optimizer '" + Object->getNameAsString() +
                           "' is a class member, which accel-prepare does not prepare; call "
                           "accelerator.prepare(model, optimizer) on the members by hand"
                     : std::string("cannot tell which optimizer this step is on; call "
                                   "accelerator.prepare(model, optimizer) by hand"));
      return;
    }
    std::string Why;
    llvm::SmallVector<const VarDecl *, 2> Created;
    if (!creatingVariables(Var, Ctx, Why, Created)) {
      Problem(Why + "; call accelerator.prepare(model, optimizer) where "
                    "both are created, before training");
      return;
    }
    const auto *Setup = dyn_cast<FunctionDecl>(Created.front()->getDeclContext());
    for (const VarDecl *Optimizer : Created) {
      if (Optimizer->getDeclContext() != Setup) {
        Problem("the optimizers '" + Created.front()->getNameAsString() + "' and '" +
                Optimizer->getNameAsString() +
                "' that this loop steps are created in different functions; call "
                "accelerator.prepare(model, optimizer) where each is created, before training");
        return;
      }
    }
    if (!Setup) {
      Problem("optimizer '" + Created.front()->getNameAsString() +
              "' is not created in a function");
      return;
    }
    const SetupInfo &Info = AnalysisContext::of(Ctx).setup(Setup);
    for (const VarDecl *Optimizer : Created) {
      if (Info.AlreadyPrepared) {
        break;
      }
      if (!Info.Problem.empty()) {
        // accel-prepare's own warning says why; this one says what it means for the loop.
        Problem("accel-prepare cannot prepare optimizer '" + Optimizer->getNameAsString() +
                "' in " + functionLabel(Setup) + " (its warning on line " +
                line(Info.ProblemLoc, SM) + " says why), so nothing here is synchronised");
        return;
      }
      if (!Info.groupOf(Optimizer)) {
        Problem("accel-prepare cannot prepare optimizer '" + Optimizer->getNameAsString() +
                "' in " + functionLabel(Setup) + "; call accelerator.prepare(model, " +
                Optimizer->getNameAsString() + ") there after both are created, before training");
        return;
      }
    }
    for (const VarDecl *Optimizer : Created) {
      if (!llvm::is_contained(Plan.Optimizers, Optimizer)) {
        Plan.Optimizers.push_back(Optimizer);
      }
    }
    Plan.Setup = Setup;
  }

  // Clipping the accelerator cannot do would clip scaled gradients under fp16 and partial
  // sums under accumulation: the loop is rewritten whole or not at all.
  std::string Clipping;
  ForEachInUnit([&](const Stmt *S) {
    if (Clipping.empty() && isGradientClipping(S)) {
      if (std::string Why = clippingProblem(cast<CallExpr>(S)); !Why.empty()) {
        Clipping = "the gradient clipping on line " + line(S->getBeginLoc(), SM) + " of this " +
                   "training loop cannot become the accelerator's: " + Why +
                   "; write accelerator.clip_grad_norm_(parameters, max_norm) (a "
                   "std::vector<torch::Tensor>) there by hand, then run accel-rewrite again";
      }
    }
  });
  if (!Clipping.empty()) {
    Problem(Clipping);
    return;
  }

  if (match(acceleratorFunction(), *Function, Ctx).empty()) {
    std::string Why;
    if (const AcceleratorParameterPlan *Parameter = acceleratorParameterPlan(Function, Ctx);
        Parameter && !Parameter->Problem.empty()) {
      Why = " (" + Parameter->Problem + ")";
    }
    Problem("training in " + functionLabel(Function) + " cannot get the accelerator" + Why +
            "; pass 'accelerate::Accelerator &accelerator' to it by hand and rewrite "
            "its training with accelerator.backward and accelerator.step");
    return;
  }
  // The batches: a loop over a loader that gives each process its shard, around the unit or
  // (for a step helper) around every call of it.
  auto NoShard = [&](const CXXForRangeStmt *Nearest, const std::string &Where) {
    std::string Source =
        Nearest ? "'" + sourceText(Nearest->getRangeInit(), Ctx) + "'" : "a loop over no loader";
    if (std::string Listed = Nearest ? "" : listTakenByCounter(Plan.Unit); !Listed.empty()) {
      Problem("the batches " + Where + " are taken from '" + Listed +
              "' by the loop's counter, which accel-rewrite shares only for a list of batches "
              "of tensors (a tensor, or a pair, tuple, torch::data::Example or vector of "
              "tensors, taken as accelerator.batch_rows(list[i])): every process would train "
              "on all of it; give each process its part by hand (accelerator.process_index(), "
              "accelerator.num_processes())");
      return;
    }
    if (std::string Walked = Nearest ? "" : loaderWalkedByIterators(Plan.Unit, Ctx);
        !Walked.empty()) {
      Problem("the batches " + Where + " come from '" + Walked +
              "' walked with its iterators (begin(), end()) in a way accel-rewrite does not "
              "follow (it follows `for (auto it = loader->begin(); it != loader->end(); ++it)`, "
              "the iterator declared auto so that the sharded loader's fits): every process "
              "would train on all of it; write the loop as `for (auto &batch : " +
              Walked + ")` and run accel-rewrite again");
      return;
    }
    Problem("the batches " + Where + " come from " + Source +
            ", which accel-rewrite cannot shard: every process would train on all of it; "
            "iterate a loader made with torch::data::make_data_loader (declared auto) or a "
            "std::vector of batches by name (accelerator.prepare_batches shards it), cut "
            "each batch from tensors held whole with the counter of a loop `for (int64_t i = "
            "0; i < n; i += batch)` (t.slice(0, i, i + batch), t.narrow(0, i, batch)), or "
            "give each process its part by hand (accelerator.process_index(), "
            "accelerator.num_processes())");
  };
  if (StraightLine) {
    // One step on the batch as written: every process computes the same gradients, so their
    // average is the original's (docs/rules/accel-training-loop.md, "Straight-line steps").
    if (owningFunction(Plan.Setup) != owningFunction(Function)) {
      Problem("a training step outside any loop in " + functionLabel(Function) +
              ", whose optimizer is created in " + functionLabel(Plan.Setup) +
              " (accel-rewrite rewrites a step outside a loop only in the function that "
              "creates its optimizer); rewrite it by hand with accelerator.backward(loss), "
              "accelerator.step(optimizer) and accelerator.zero_grad(optimizer)");
    }
    return;
  }
  if (Plan.Kind == LoopPlan::Loop) {
    const CXXForRangeStmt *Nearest = nullptr;
    Plan.Loader = shardedLoaderAround(Plan.Unit, Ctx, Nearest);
    if (const auto *For = dyn_cast<ForStmt>(Plan.Unit); For && !Plan.Loader) {
      // A counter that cuts the batches from tensors held whole (analysis/CountedBatchLoops.h).
      if (const CountedBatchLoop &Counted = AnalysisContext::of(Ctx).countedBatchLoop(For);
          Counted.Counted) {
        if (!Counted.Problem.empty()) {
          Problem(Counted.Problem);
          return;
        }
        Plan.Loader = Counted.Counter;
        // Its cuts are rows of dimension 0: time steps, for a sequence-first model.
        if (const VarDecl *Model = sequenceFirstModel(modelsOf(Plan, Ctx), Ctx)) {
          Problem(sequenceFirstProblem("this loop cuts its batches", Model));
          return;
        }
      }
    }
    if (!Plan.Loader) {
      NoShard(Nearest, "of this training loop");
      return;
    }
    // A list of batches the program made is cut along dimension 0 under split_batches, as
    // a counted loop's batches are: time steps, for a sequence-first model.
    if (Nearest && isBatchListLoop(Nearest, Ctx)) {
      if (const VarDecl *Model = sequenceFirstModel(modelsOf(Plan, Ctx), Ctx)) {
        Problem(sequenceFirstProblem(
            "under split_batches, accelerator.prepare_batches cuts this loop's batches", Model));
        return;
      }
    }
    // Batches that depend on the one before (analysis/SequenceBatches.h) cannot be shared.
    if (std::optional<CarriedState> State = carriedState(Plan.Unit, Ctx)) {
      std::string Name = State->Var->getNameAsString();
      Problem("this loop carries '" + Name + "' from one batch to the next (it changes it, and " +
              "gives it to the model on line " + line(State->Used->getBeginLoc(), SM) +
              "): a recurrent state: each batch depends on the one before it, and sharing the "
              "batches among the processes would break that chain (each process would carry "
              "the state through other batches); leave this training on one process, or give "
              "each process whole sequences of its own by hand "
              "(accelerator.process_index(), accelerator.num_processes())");
      return;
    }
    const VarDecl *Stateful = nullptr;
    if (const FieldDecl *State = stateKeptInModel(modelsOf(Plan, Ctx), Stateful, Ctx)) {
      Problem("model '" + Stateful->getNameAsString() + "' keeps '" + State->getNameAsString() +
              "' (line " + line(State->getLocation(), SM) +
              ") from one forward pass to the next: a recurrent state carried across batches; " +
              "sharing the batches among the processes would break that chain (each process " +
              "would carry the state through other batches); leave this training on one " +
              "process, or give each process whole sequences of its own by hand " +
              "(accelerator.process_index(), accelerator.num_processes())");
      return;
    }
    // Every process must take every step (analysis/DivergentSteps.h).
    if (std::optional<DivergentStep> Divergent = divergentStep(Plan.Unit, Ctx)) {
      const Stmt *Where = Divergent->Statement;
      Problem("this loop " +
              std::string(isa<ContinueStmt>(Where) ? "skips the rest of a batch"
                          : Divergent->Leaves      ? "can leave early"
                          : isBackwardCall(Where)  ? "calls backward"
                                                   : "steps its optimizer") +
              " on line " + line(Divergent->Statement->getBeginLoc(), SM) + " when '" +
              sourceText(Divergent->Condition, Ctx) +
              "', which is computed from this process's batches: with the batches shared "
              "among the processes they would part ways there, and a process still training "
              "would wait forever for the others' gradients; decide on a value that is the "
              "same on every process (a step count, or accelerator.reduce(value, \"mean\")) "
              "and run accel-rewrite again, or give each process its part by hand "
              "(accelerator.process_index(), accelerator.num_processes())");
      return;
    }
    if (const CXXMemberCallExpr *Gradient = gradientOfFreeTensor(Plan.Unit, Ctx)) {
      const std::string Name = sourceText(Gradient->getImplicitObjectArgument(), Ctx);
      Problem("this training reads the gradient of '" + Name + "' on line " +
              line(Gradient->getBeginLoc(), SM) +
              ", a tensor the program made itself outside its models: accelerator.prepare "
              "synchronises the gradients of the prepared models' parameters only, so each "
              "process would update '" +
              Name +
              "' from its own batches and the processes would drift apart; make it a "
              "parameter of the model (register_parameter) and run accel-rewrite again");
      return;
    }
    if (std::optional<DivergentStep> Setting = divergentSetting(Plan.Unit, Ctx)) {
      Problem("this training sets its optimizer with " + sourceText(Setting->Statement, Ctx) +
              " on line " + line(Setting->Statement->getBeginLoc(), SM) + " from '" +
              sourceText(Setting->Condition, Ctx) +
              "', which is computed from this process's batches: with the batches shared "
              "among the processes each would step with its own setting, and their weights "
              "would drift apart; compute it from a value that is the same on every process "
              "(accelerator.reduce(value, \"mean\"), a step count) and run accel-rewrite "
              "again");
      return;
    }
    if (std::optional<DivergentStep> Divergent = divergentLeaveAround(Plan.Unit, Ctx)) {
      const bool ByItsCondition = isa<ForStmt, WhileStmt, DoStmt>(Divergent->Statement);
      Problem("the loop around it " +
              std::string(ByItsCondition ? "stops by its condition" : "can leave") + " on line " +
              line(Divergent->Statement->getBeginLoc(), SM) + " when '" +
              sourceText(Divergent->Condition, Ctx) +
              "', which reads a value this process's batches gave it and accel-reduce does "
              "not combine there (a smoothed or last loss, a minimum): the processes would "
              "stop after different numbers of passes, and one still training would wait "
              "forever for the others' gradients; decide on a value that is the same on every "
              "process (accelerator.reduce(value, \"mean\"), a sum over the batches divided by "
              "their count, a step count) and run accel-rewrite again");
    }
    return;
  }
  llvm::ArrayRef<const CallExpr *> Calls = callsInMainFile(Function, Ctx);
  for (const CallExpr *Call : Calls) {
    const CXXForRangeStmt *Nearest = nullptr;
    const VarDecl *Loader = shardedLoaderAround(Call, Ctx, Nearest);
    if (!Loader && !innermostLoop(DynTypedNode::create(*Call), Ctx)) {
      Problem(HelperCalledOnce); // where its backward is
      forEachStmt(Plan.Unit, [&](const Stmt *S) {
        if (isBackwardCall(S) && Plan.ProblemLoc == Function->getLocation()) {
          Plan.ProblemLoc = S->getBeginLoc();
        }
      });
      return;
    }
    if (const auto *For =
            dyn_cast_or_null<ForStmt>(innermostLoop(DynTypedNode::create(*Call), Ctx));
        For && !Loader) {
      // Called in a loop that cuts its batches by a counter (CountedBatchLoops.h).
      if (const CountedBatchLoop &Counted = AnalysisContext::of(Ctx).countedBatchLoop(For);
          Counted.Counted) {
        if (!Counted.Problem.empty()) {
          Problem(Counted.Problem);
          return;
        }
        Loader = Counted.Counter;
      }
    }
    if (!Loader) {
      NoShard(Nearest, "of the training step " + functionLabel(Function) + " called on line " +
                           line(Call->getBeginLoc(), SM));
      return;
    }
    Plan.Loader = Loader;
  }
}

/// The functions and loader declarations a declined plan takes with it (TrainingPlans::
/// DeclinedRanges), as offsets of the main file.
void collectDeclinedRanges(TrainingPlans &Plans, ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  llvm::SmallPtrSet<const FunctionDecl *, 8> Declined, DeclinedSetups;
  for (const LoopPlan &Plan : Plans.Loops) {
    if (!Plan.sound()) {
      Declined.insert(owningFunction(Plan.Function));
      if (Plan.Setup) {
        DeclinedSetups.insert(owningFunction(Plan.Setup));
      }
    }
  }
  if (Declined.empty()) {
    return;
  }
  // The functions the loader a plan trains on is made in: its own, or for a parameter, those
  // of the loaders the calls pass (`fit(model, *loader)`), a few calls up.
  std::function<void(const VarDecl *, int, llvm::SmallPtrSet<const FunctionDecl *, 4> &)>
      LoaderOwners = [&](const VarDecl *Loader, int Depth,
                         llvm::SmallPtrSet<const FunctionDecl *, 4> &Owners) {
        const auto *Function = dyn_cast<FunctionDecl>(Loader->getDeclContext());
        const auto *Param = dyn_cast<ParmVarDecl>(Loader);
        if (!Param) {
          Owners.insert(owningFunction(Function));
          return;
        }
        if (!Function || Depth > 4) {
          return;
        }
        for (const CallExpr *Call : callsInMainFile(Function, Ctx)) {
          const unsigned Index = Param->getFunctionScopeIndex();
          const Expr *Argument =
              Index < Call->getNumArgs() ? Call->getArg(Index)->IgnoreParenImpCasts() : nullptr;
          // `*loader`: the built-in operator on a pointer, unique_ptr's operator*.
          if (const auto *Deref = dyn_cast_or_null<UnaryOperator>(Argument);
              Deref && Deref->getOpcode() == UO_Deref) {
            Argument = Deref->getSubExpr()->IgnoreParenImpCasts();
          } else if (const auto *Star = dyn_cast_or_null<CXXOperatorCallExpr>(Argument);
                     Star && Star->getOperator() == OO_Star && Star->getNumArgs() == 1) {
            Argument = Star->getArg(0)->IgnoreParenImpCasts();
          }
          if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Argument)) {
            if (const auto *Passed = dyn_cast<VarDecl>(Ref->getDecl())) {
              LoaderOwners(Passed, Depth + 1, Owners);
            }
          }
        }
      };
  // A loop that trains on a loader made in a declined function (a helper given main's loader
  // while main's own loop is declined) would train on LibTorch's loader, whole on every
  // process, with gradients averaged: it is declined too, out loud.
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (LoopPlan &Plan : Plans.Loops) {
      llvm::SmallPtrSet<const FunctionDecl *, 4> Owners;
      if (Plan.sound() && Plan.Loader) {
        LoaderOwners(Plan.Loader, 0, Owners);
      }
      const FunctionDecl *Owner = nullptr;
      for (const FunctionDecl *Candidate : Owners) {
        if (Candidate && Declined.count(Candidate) && Candidate != owningFunction(Plan.Function)) {
          Owner = Candidate;
        }
      }
      if (!Owner) {
        continue;
      }
      Plan.Problem = "it trains on '" + Plan.Loader->getNameAsString() + "', a loader made in " +
                     functionLabel(Owner) +
                     ", whose training is left as written (see the warning there), so the "
                     "loader stays whole on every process; once that training can be "
                     "rewritten, this one will be too";
      Plan.ProblemLoc = Plan.Unit->getBeginLoc();
      Declined.insert(owningFunction(Plan.Function));
      if (Plan.Setup) {
        DeclinedSetups.insert(owningFunction(Plan.Setup));
      }
      Changed = true;
    }
  }
  for (const LoopPlan &Plan : Plans.Loops) {
    if (Plan.Setup && DeclinedSetups.count(owningFunction(Plan.Setup))) {
      Declined.insert(owningFunction(Plan.Function));
    }
  }
  Declined.insert(DeclinedSetups.begin(), DeclinedSetups.end());
  Declined.erase(nullptr);
  // Helpers that get the accelerator from a declined function go with it. A call that would
  // pass the accelerator to a declined helper is left as written (the helper keeps its
  // parameters), and only the call: the rest of its caller is rewritten as usual.
  llvm::SmallVector<const CallExpr *, 4> CallsToDeclined;
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (const FunctionDecl *Callee : calledFunctions(Ctx)) {
      const FunctionDecl *Helper = owningFunction(Callee);
      if (!Helper || !receivesAcceleratorParameter(Callee, Ctx)) {
        continue;
      }
      for (const CallExpr *Call : callsInMainFile(Callee, Ctx)) {
        const FunctionDecl *Caller = owningFunction(callerOf(Call, Ctx));
        if (Caller && Declined.count(Caller) && Declined.insert(Helper).second) {
          Changed = true;
        }
      }
    }
  }
  for (const FunctionDecl *Callee : calledFunctions(Ctx)) {
    if (Declined.count(owningFunction(Callee)) && receivesAcceleratorParameter(Callee, Ctx)) {
      llvm::append_range(CallsToDeclined, callsInMainFile(Callee, Ctx));
    }
  }
  auto Add = [&](SourceRange Range) {
    SourceLocation Begin = SM.getExpansionLoc(Range.getBegin());
    SourceLocation End = SM.getExpansionRange(Range.getEnd()).getEnd();
    if (SM.isWrittenInMainFile(Begin) && SM.isWrittenInMainFile(End)) {
      Plans.DeclinedRanges.push_back({SM.getFileOffset(Begin), SM.getFileOffset(End) + 1});
    }
  };
  for (const CallExpr *Call : CallsToDeclined) {
    // Up to its first argument, where accel-accelerator would insert `accelerator, `; edits
    // of the arguments themselves stay.
    llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
    Add({Call->getBeginLoc(), Args.empty() ? Call->getRParenLoc() : Args.front()->getBeginLoc()});
  }
  for (const FunctionDecl *Function : Declined) {
    for (const FunctionDecl *Declaration : Function->redecls()) {
      Add(Declaration->getSourceRange());
    }
  }
  // A loader made elsewhere and handed to a declined function keeps LibTorch's loader.
  auto Loaders =
      match(varDecl(isExpansionInMainFile(), hasInitializer(expr())).bind("loader"), Ctx);
  for (const BoundNodes &Found : Loaders) {
    const auto *Loader = Found.getNodeAs<VarDecl>("loader");
    if (!makeDataLoaderInit(Loader)) {
      continue;
    }
    for (const LoaderHandOff &HandOff : loaderHandOffs(Loader, Ctx)) {
      if (Declined.count(owningFunction(HandOff.Callee))) {
        Add(Loader->getSourceRange());
      }
    }
  }
}

} // namespace

bool TrainingPlans::declines(unsigned Offset) const {
  return llvm::any_of(DeclinedRanges, [&](const std::pair<unsigned, unsigned> &Range) {
    return Range.first <= Offset && Offset < Range.second;
  });
}

const LoopPlan *TrainingPlans::planOf(const Stmt *Backward, const SourceManager &SM) const {
  unsigned Offset = offsetOf(Backward, SM);
  for (size_t I = 0; I < Loops.size(); ++I) {
    if (llvm::is_contained(BackwardOffsets[I], Offset)) {
      return &Loops[I];
    }
  }
  return nullptr;
}

bool isInStraightLineStep(const CallExpr *Call, ASTContext &Ctx) {
  DynTypedNode Node = DynTypedNode::create(*Call);
  if (innermostLoop(Node, Ctx)) {
    return false;
  }
  // The same function whether seen in a template's pattern or an instantiation of it.
  auto Canonical = [](const FunctionDecl *F) -> const FunctionDecl * {
    if (F && F->getTemplateInstantiationPattern()) {
      F = F->getTemplateInstantiationPattern();
    }
    return F ? F->getCanonicalDecl() : nullptr;
  };
  const FunctionDecl *Function = Canonical(enclosingFunction(Node, Ctx));
  const auto &Loops = AnalysisContext::of(Ctx).trainingPlans().Loops;
  bool Planned =
      Function && llvm::any_of(Loops, [&](const LoopPlan &Plan) {
        return Plan.Kind == LoopPlan::StraightLine && Canonical(Plan.Function) == Function;
      });
  return Planned && !runsBeforePrepare(Call, Ctx);
}

std::optional<llvm::SmallVector<const VarDecl *, 2>> modelsTrainedIn(const Stmt *Body,
                                                                     ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  auto BodyOf = [](const Stmt *Unit) -> const Stmt * {
    const Stmt *Body = loopBody(Unit);
    return Body ? Body : Unit; // a step helper's body
  };
  AnalysisContext &Analyses = AnalysisContext::of(Ctx);
  for (const LoopPlan &Plan : Analyses.trainingPlans().Loops) {
    const Stmt *Unit = Plan.Kind == LoopPlan::StraightLine ? nullptr : BodyOf(Plan.Unit);
    if (!Unit || !Plan.Setup || offsetOf(Unit, SM) != offsetOf(Body, SM)) {
      continue;
    }
    llvm::SmallVector<const VarDecl *, 2> Models;
    if (owningFunction(Plan.Function) != owningFunction(Plan.Setup)) {
      return Models; // a helper: the setup function's names are not in scope there
    }
    const SetupInfo &Info = Analyses.setup(Plan.Setup);
    for (const VarDecl *Optimizer : Plan.Optimizers) {
      const PrepareGroup *Group = Info.groupOf(Optimizer);
      for (const VarDecl *Model : Group ? Group->Models : Info.PreparedModels) {
        if (!llvm::is_contained(Models, Model)) {
          Models.push_back(Model);
        }
      }
    }
    return Models;
  }
  return std::nullopt;
}

std::unique_ptr<TrainingPlans> planTrainingLoops(ASTContext &Ctx) {
  auto Result = std::make_unique<TrainingPlans>();
  const SourceManager &SM = Ctx.getSourceManager();
  BackwardCalls Calls(SM);
  for (Decl *D : Ctx.getTraversalScope()) {
    Calls.TraverseDecl(D);
  }
  // One plan per unit: a template's instantiations share their pattern's unit, and the
  // first instantiation plans it.
  std::map<unsigned, size_t> ByUnit;
  for (const Stmt *Backward : Calls.Found) {
    if (runsBeforePrepare(Backward, Ctx)) {
      continue; // a demonstration before prepare: left as written, not training
    }
    DynTypedNode Node = DynTypedNode::create(*Backward);
    LoopPlan Plan;
    Plan.Function = enclosingFunction(Node, Ctx);
    if (const Stmt *Loop = innermostLoop(Node, Ctx)) {
      Plan.Unit = Loop;
    } else if (Plan.Function && isTrainingStepFunction(Plan.Function) &&
               receivesAcceleratorParameter(Plan.Function, Ctx)) {
      Plan.Kind = LoopPlan::StepFunction;
      Plan.Unit = Plan.Function->getBody();
    } else {
      // Every backward of the function outside loops belongs to one straight-line plan.
      Plan.Kind = LoopPlan::StraightLine;
      Plan.Unit = Plan.Function && Plan.Function->getBody() ? Plan.Function->getBody() : Backward;
    }
    auto [At, New] = ByUnit.try_emplace(offsetOf(Plan.Unit, SM), Result->Loops.size());
    if (New) {
      plan(Plan, Ctx);
      Result->Loops.push_back(std::move(Plan));
      Result->BackwardOffsets.emplace_back();
    }
    LoopPlan &Planned = Result->Loops[At->second];
    if (Planned.sound() && Backward->getBeginLoc().isMacroID()) {
      // accel-backward leaves a call in a macro expansion alone: the loop would be half
      // rewritten.
      Planned.Problem =
          "a backward call of this loop is inside the expansion of macro '" +
          Lexer::getImmediateMacroName(Backward->getBeginLoc(), SM, Ctx.getLangOpts()).str() +
          "' on line " + line(Backward->getBeginLoc(), SM) +
          ", which accel-rewrite does not edit; write accelerator.backward(loss) "
          "there by hand (or expand the macro), then run accel-rewrite again";
      Planned.ProblemLoc = Planned.Kind == LoopPlan::StepFunction && Planned.Function
                               ? Planned.Function->getLocation()
                               : Planned.Unit->getBeginLoc();
    }
    Result->BackwardOffsets[At->second].push_back(offsetOf(Backward, SM));
  }
  collectDeclinedRanges(*Result, Ctx);
  // Training in an included project header (accel-training-loop declines it): the file is left
  // as written, since its own code may train through the header's (a trainer class). So is a
  // file none of whose training can be rewritten: its prints and file writes, guarded, would
  // only hide that every process still trains the whole model on all the data.
  bool NothingRewritten =
      !Result->Loops.empty() && llvm::none_of(Result->Loops, std::mem_fn(&LoopPlan::sound));
  if (NothingRewritten || !trainingInIncludedHeaders(Ctx).empty()) {
    const FileID Main = SM.getMainFileID();
    Result->DeclinedRanges.emplace_back(0, SM.getBufferData(Main).size() + 1);
  }
  return Result;
}

} // namespace accel::rewrites
