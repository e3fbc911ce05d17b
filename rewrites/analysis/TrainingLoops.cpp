//===- TrainingLoops.cpp - Where a program trains -------------------------===//
#include "analysis/TrainingLoops.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Templates.h"

#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"

#include <optional>

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {

const VarDecl *iteratedVar(const CXXForRangeStmt *Loop) { return namedVar(Loop->getRangeInit()); }

const CallExpr *makeDataLoaderInit(const VarDecl *Var) {
  if (!Var || !Var->isLocalVarDecl() || !Var->getInit()) {
    return nullptr;
  }
  const auto *Call = dyn_cast_or_null<CallExpr>(spelled(Var->getInit()));
  if (!Call || !Call->getDirectCallee() ||
      (qualifiedName(Call->getDirectCallee()) != "torch::data::make_data_loader" &&
       !isLoaderFactoryCall(Call))) {
    return nullptr;
  }
  // The stateless overloads return unique_ptr<StatelessDataLoader<...>>; a stateful
  // dataset has no sampler to shard.
  const auto *Pointer =
      dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Call->getType()));
  if (!Pointer || Pointer->getTemplateArgs().size() < 1 ||
      Pointer->getTemplateArgs()[0].getKind() != TemplateArgument::Type ||
      !isClassOrDerived(Pointer->getTemplateArgs()[0].getAsType(),
                        "torch::data::StatelessDataLoader")) {
    return nullptr;
  }
  return Call;
}

namespace {
/// The loader whose `begin()` or `end()` (Name) E calls: `loader->begin()`, `loader.begin()`,
/// `(*loader).begin()`, also in a template where the loader's type is a parameter (the call
/// is then dependent: `loader.begin()` on a `Loader &loader`); null for anything else.
const VarDecl *loaderWhoseCalled(const Expr *E, llvm::StringRef Name) {
  const Expr *Object = nullptr;
  if (const auto *Member = dyn_cast_or_null<CXXMemberCallExpr>(E)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    if (Method && Method->getDeclName().isIdentifier() && Method->getName() == Name) {
      Object = Member->getImplicitObjectArgument();
    }
  } else if (const auto *Call = dyn_cast_or_null<CallExpr>(E)) {
    const auto *Dependent = dyn_cast<CXXDependentScopeMemberExpr>(Call->getCallee());
    if (Dependent && !Dependent->isImplicitAccess() &&
        Dependent->getMember().getAsString() == Name) {
      Object = Dependent->getBase();
    }
  }
  if (!Object) {
    return nullptr;
  }
  Object = Object->IgnoreParenImpCasts();
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object);
      Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
    Object = Arrow->getArg(0);
  }
  return namedVar(Object);
}
} // namespace

const VarDecl *walkedLoader(const Stmt *Loop) {
  const auto *For = dyn_cast_or_null<ForStmt>(Loop);
  const auto *While = dyn_cast_or_null<WhileStmt>(Loop);
  const Expr *Condition = For ? For->getCond() : While ? While->getCond() : nullptr;
  const auto *Init = For ? dyn_cast_or_null<DeclStmt>(For->getInit()) : nullptr;
  const VarDecl *It =
      Init && Init->isSingleDecl() ? dyn_cast<VarDecl>(Init->getSingleDecl()) : nullptr;
  // `auto it = loader->begin(); while (it != loader->end()) { ...; ++it; }`: the iterator the
  // condition compares, declared before the loop.
  if (While && Condition) {
    forEachStmt(Condition, [&](const Stmt *S) {
      const auto *Ref = dyn_cast<DeclRefExpr>(S);
      const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
      if (!It && Var && Var->isLocalVarDecl() && Var->getInit() &&
          loaderWhoseCalled(spelled(Var->getInit()), "begin")) {
        It = Var;
      }
    });
  }
  if (!It || !It->getInit() || !It->getType()->getContainedAutoType()) {
    return nullptr; // an iterator type spelled out would not fit the prepared loader's
  }
  const VarDecl *Loader = loaderWhoseCalled(spelled(It->getInit()), "begin");
  // The condition compares with the same loader's end().
  bool EndOfIt = false;
  forEachStmt(Condition, [&](const Stmt *S) {
    EndOfIt = EndOfIt || (Loader && loaderWhoseCalled(dyn_cast<Expr>(S), "end") == Loader);
  });
  return EndOfIt ? Loader : nullptr;
}

bool isLoaderFactoryCall(const CallExpr *Call) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  // A function of the program's own (a free function, a lambda's call operator), not a
  // method of a loader or a LibTorch function that hands out an existing loader.
  // It returns the loader by value: a reference to one held elsewhere cannot be moved into
  // prepare_data_loader.
  return Callee && !isa<CXXMemberCallExpr>(Call) && Call->isPRValue() &&
         qualifiedName(Callee) != "torch::data::make_data_loader" &&
         !llvm::StringRef(qualifiedName(Callee)).starts_with("torch::") &&
         !llvm::StringRef(qualifiedName(Callee)).starts_with("std::");
}

namespace {
/// Whether a range-for in Body iterates Var, and whether one that does calls backward.
void rangeForsOver(const Stmt *Body, const VarDecl *Var, bool &Iterated, bool &Trains,
                   ASTContext &Ctx) {
  forEachStmt(Body, [&](const Stmt *S) {
    if (const auto *Loop = dyn_cast<CXXForRangeStmt>(S); Loop && iteratedVar(Loop) == Var) {
      Iterated = true;
      Trains = Trains || trains(Loop->getBody(), Ctx); // a step helper's call too
    }
    if (isa<ForStmt, WhileStmt>(S) && walkedLoader(S) == Var) {
      // `for (auto it = loader->begin(); it != loader->end(); ++it)`, or the same as a while
      Iterated = true;
      Trains = Trains || trains(loopBody(S), Ctx);
    }
  });
}

/// A parameter whose type is deduced from the argument (`Loader &`, `auto &`), so it accepts
/// the sharded loader as well as LibTorch's.
bool isDeducedParameter(const FunctionDecl *Callee, unsigned Index) {
  const FunctionDecl *Pattern = Callee->getTemplateInstantiationPattern();
  if (!Pattern || Index >= Pattern->getNumParams()) {
    return false;
  }
  QualType Type = Pattern->getParamDecl(Index)->getType().getNonReferenceType();
  return isa<TemplateTypeParmType>(Type.getUnqualifiedType().getCanonicalType().getTypePtr());
}
} // namespace

llvm::SmallVector<LoaderHandOff, 2> loaderHandOffs(const VarDecl *Loader, ASTContext &Ctx,
                                                   int Depth) {
  llvm::SmallVector<LoaderHandOff, 2> Result;
  const auto *Function = dyn_cast<FunctionDecl>(Loader->getDeclContext());
  if (!Function || !Function->hasBody() || Depth > 3) {
    return Result;
  }
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Call = dyn_cast<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (!Callee || !Callee->hasBody() || Callee == Function) {
      return;
    }
    // A call of a lambda or another call operator lists the object as argument 0.
    unsigned Skip = isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Callee) ? 1 : 0;
    for (unsigned I = Skip; I < Call->getNumArgs(); ++I) {
      if (namedVar(Call->getArg(I)) != Loader || I - Skip >= Callee->getNumParams()) {
        continue;
      }
      LoaderHandOff HandOff;
      HandOff.Callee = Callee;
      HandOff.AcceptsShardedLoader = isDeducedParameter(Callee, I - Skip);
      rangeForsOver(Callee->getBody(), Callee->getParamDecl(I - Skip), HandOff.Iterates,
                    HandOff.Trains, Ctx);
      // Passed on (`fit(loader)` calling `train_epoch(loader)`): what the next one does with it.
      for (const LoaderHandOff &Next :
           loaderHandOffs(Callee->getParamDecl(I - Skip), Ctx, Depth + 1)) {
        if (HandOff.AcceptsShardedLoader && Next.AcceptsShardedLoader) {
          HandOff.Iterates = HandOff.Iterates || Next.Iterates;
          HandOff.Trains = HandOff.Trains || Next.Trains;
        }
      }
      Result.push_back(HandOff);
    }
  });
  return Result;
}

bool callsTraining(const Stmt *S, ASTContext &Ctx, int Depth) {
  if (Depth > 4) {
    return false;
  }
  const SourceManager &SM = Ctx.getSourceManager();
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) {
    const auto *Call = dyn_cast<CallExpr>(Child);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    const Stmt *Body = Callee ? Callee->getBody() : nullptr;
    if (Found || !Body || !SM.isWrittenInMainFile(SM.getExpansionLoc(Body->getBeginLoc()))) {
      return;
    }
    Found = containsBackward(Body) || callsTraining(Body, Ctx, Depth + 1);
  });
  return Found;
}

bool trains(const Stmt *S, ASTContext &Ctx) { return containsBackward(S) || callsTraining(S, Ctx); }

bool isTrainingLoader(const VarDecl *Loader, ASTContext &Ctx) {
  if (!makeDataLoaderInit(Loader)) {
    return false;
  }
  const auto *Function = dyn_cast<FunctionDecl>(Loader->getDeclContext());
  if (!Function || !Function->hasBody() || match(acceleratorFunction(), *Function, Ctx).empty()) {
    return false;
  }
  bool Iterated = false, Trains = false;
  rangeForsOver(Function->getBody(), Loader, Iterated, Trains, Ctx);
  for (const LoaderHandOff &HandOff : loaderHandOffs(Loader, Ctx)) {
    Trains = Trains || (HandOff.Trains && HandOff.AcceptsShardedLoader);
  }
  return Trains;
}

std::string shardingProblem(const VarDecl *Loader) {
  const CallExpr *Call = makeDataLoaderInit(Loader);
  if (!Call) {
    return "";
  }
  std::string Name = Loader->getNameAsString();
  if (!isa<AutoType>(Loader->getType().getTypePtr()) &&
      !Loader->getType()->getContainedAutoType()) {
    return "data loader '" + Name +
           "' is declared with its type spelled out; declare it 'auto' and create it with " +
           (isLoaderFactoryCall(Call)
                ? "accelerator.prepare_data_loader(" + sourceText(Call, Loader->getASTContext()) +
                      ")"
                : std::string("accelerator.prepare_data_loader<Sampler>(...)")) +
           ", which returns a sharded loader";
  }
  if (isLoaderFactoryCall(Call)) {
    return "";
  }
  const auto *Callee = dyn_cast<DeclRefExpr>(Call->getCallee()->IgnoreImplicit());
  if (!Callee) {
    return "data loader '" + Name +
           "' is made through an expression accel-rewrite cannot "
           "rename; create it with accelerator.prepare_data_loader<Sampler>(...)";
  }
  if (writtenArgs(Call).size() == 3 && Callee->hasExplicitTemplateArgs()) {
    return "make_data_loader with a sampler object and explicit template arguments: call "
           "accelerator.prepare_data_loader(dataset, sampler, options) by hand";
  }
  return "";
}

namespace {
/// The argument a call passes for parameter Index of Function: the calls of the file
/// (callsInMainFile), and for a lambda's call operator the calls of the lambda in the
/// function that holds it (`accuracy("train", *loader)`), whose argument 0 is the lambda.
llvm::SmallVector<const Expr *, 2> argumentsPassed(const FunctionDecl *Function, unsigned Index,
                                                   ASTContext &Ctx) {
  llvm::SmallVector<const Expr *, 2> Passed;
  for (const CallExpr *Call : callsInMainFile(Function, Ctx)) {
    if (Index < Call->getNumArgs()) {
      Passed.push_back(Call->getArg(Index));
    }
  }
  const auto *Method = dyn_cast<CXXMethodDecl>(Function);
  if (!Method || !Method->getParent()->isLambda()) {
    return Passed;
  }
  // A generic lambda's calls are calls of its specializations: each counts, as the calls of
  // every instantiation of a function template do (one passing a sharded loader and one a
  // whole loader make a parameter of both kinds).
  auto Pattern = [](const FunctionDecl *F) {
    const FunctionDecl *From = F ? F->getTemplateInstantiationPattern() : nullptr;
    return (From ? From : F)->getCanonicalDecl();
  };
  const auto *Holder = dyn_cast_or_null<FunctionDecl>(
      Method->getParent()->getDeclContext()->getNonClosureAncestor());
  forEachStmt(Holder ? Holder->getBody() : nullptr, [&](const Stmt *S) {
    const auto *Call = dyn_cast<CXXOperatorCallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (Callee && Call->getOperator() == OO_Call && Pattern(Callee) == Pattern(Function) &&
        Index + 1 < Call->getNumArgs()) {
      Passed.push_back(Call->getArg(Index + 1));
    }
  });
  return Passed;
}
} // namespace

bool isShardedLoader(const VarDecl *Var, ASTContext &Ctx, int Depth) {
  if (!Var || Depth > 4) {
    return false;
  }
  if (makeDataLoaderInit(Var)) {
    return isTrainingLoader(Var, Ctx) && shardingProblem(Var).empty();
  }
  if (const auto *Param = dyn_cast<ParmVarDecl>(Var)) {
    // A parameter: sharded when a call in this file passes a sharded loader to it.
    const auto *Function = dyn_cast<FunctionDecl>(Param->getDeclContext());
    if (!Function) {
      return false;
    }
    return llvm::any_of(
        argumentsPassed(Function, Param->getFunctionScopeIndex(), Ctx),
        [&](const Expr *Argument) { return isShardedLoader(namedVar(Argument), Ctx, Depth + 1); });
  }
  // Already ported: auto loader = accelerator.prepare_data_loader<...>(...).
  const Expr *Init = Var->getInit() ? spelled(Var->getInit()) : nullptr;
  return Init && isMethodCall(Init, "accelerate::Accelerator", "prepare_data_loader");
}

bool receivesUnshardedLoaderToo(const VarDecl *Var, ASTContext &Ctx) {
  const auto *Param = dyn_cast_or_null<ParmVarDecl>(Var);
  const auto *Function = Param ? dyn_cast<FunctionDecl>(Param->getDeclContext()) : nullptr;
  if (!Function) {
    return false;
  }
  bool Sharded = false, Whole = false;
  for (const Expr *Argument : argumentsPassed(Function, Param->getFunctionScopeIndex(), Ctx)) {
    (isShardedLoader(namedVar(Argument), Ctx) ? Sharded : Whole) = true;
  }
  return Sharded && Whole;
}

namespace {

/// std::vector<Batch> of a batch type.
bool isBatchListType(QualType Type) {
  const auto *Record = dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Type));
  return Record && qualifiedName(Record) == "std::vector" &&
         Record->getTemplateArgs().size() >= 1 &&
         Record->getTemplateArgs()[0].getKind() == TemplateArgument::Type &&
         isBatchType(Record->getTemplateArgs()[0].getAsType());
}

} // namespace

bool isUnpreparedBatchListLoop(const CXXForRangeStmt *Loop, ASTContext &Ctx) {
  // Not in a template: its text serves other instantiations, which may iterate a loader.
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Loop), Ctx);
  if (!Function || Function->isTemplateInstantiation() || Function->isDependentContext()) {
    return false;
  }
  const Expr *Init = Loop->getRangeInit();
  const Expr *Written = spelled(Init);
  const VarDecl *List = namedVar(Init);
  // A list by name (`for (auto &b : batches)`), or one a call makes for the loop (d2l's
  // `for (auto &[X, y] : data_iter(batch_size, features, labels))`).
  const bool IsList = (List && isa<DeclRefExpr>(Written) && isBatchListType(List->getType())) ||
                      (isa<CallExpr>(Written) &&
                       !isMethodCall(Written, "accelerate::Accelerator", "prepare_batches") &&
                       isBatchListType(Written->getType()));
  return IsList && isTrainingStepLoop(Loop, Ctx) && !Init->getBeginLoc().isMacroID();
}

bool isBatchListLoop(const CXXForRangeStmt *Loop, ASTContext &Ctx) {
  return isMethodCall(spelled(Loop->getRangeInit()), "accelerate::Accelerator",
                      "prepare_batches") ||
         isUnpreparedBatchListLoop(Loop, Ctx);
}

bool isTrainingBatch(const VarDecl *Var, ASTContext &Ctx) {
  const CXXForRangeStmt *Loop = rangeForDeclaring(Var, Ctx);
  const VarDecl *Loader = Loop ? iteratedVar(Loop) : nullptr;
  return Loader && isTrainingLoader(Loader, Ctx);
}

namespace {
/// The nearest ancestor of Node (following first parents) for which Stop holds, or nullopt.
std::optional<DynTypedNode> nearestAncestor(const DynTypedNode &Node, ASTContext &Ctx,
                                            llvm::function_ref<bool(const DynTypedNode &)> Stop) {
  DynTypedNode Current = Node;
  for (int Depth = 0; Depth < 512; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return std::nullopt;
    }
    Current = Parents[0];
    if (Stop(Current)) {
      return Current;
    }
  }
  return std::nullopt;
}

bool isFunctionBoundary(const DynTypedNode &Node) {
  return Node.get<FunctionDecl>() || Node.get<LambdaExpr>();
}

bool isLoop(const Stmt *S) {
  return S && (isa<ForStmt>(S) || isa<CXXForRangeStmt>(S) || isa<WhileStmt>(S) || isa<DoStmt>(S));
}
} // namespace

const FunctionDecl *enclosingFunction(const DynTypedNode &Node, ASTContext &Ctx) {
  auto Found = nearestAncestor(Node, Ctx, isFunctionBoundary);
  if (!Found) {
    return nullptr;
  }
  if (const auto *Lambda = Found->get<LambdaExpr>()) {
    return Lambda->getCallOperator();
  }
  return Found->get<FunctionDecl>();
}

const Stmt *innermostLoop(const DynTypedNode &Node, ASTContext &Ctx) {
  auto Found = nearestAncestor(Node, Ctx, [](const DynTypedNode &Ancestor) {
    return isFunctionBoundary(Ancestor) || isLoop(Ancestor.get<Stmt>());
  });
  return Found && isLoop(Found->get<Stmt>()) ? Found->get<Stmt>() : nullptr;
}

bool isTrainingStepLoop(const Stmt *Loop, ASTContext &Ctx) {
  bool Found = false;
  forEachStmt(Loop, [&](const Stmt *S) {
    Found = Found || (isBackwardCall(S) && innermostLoop(DynTypedNode::create(*S), Ctx) == Loop);
  });
  return Found;
}

bool createsOptimizer(const FunctionDecl *Function) {
  bool Found = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Declaration = dyn_cast<DeclStmt>(S);
    if (!Declaration) {
      return;
    }
    for (const Decl *D : Declaration->decls()) {
      const auto *Var = dyn_cast<VarDecl>(D);
      Found = Found || (Var && isOptimizerOrPointerTo(Var->getType()));
    }
  });
  return Found;
}

bool isTrainingStepFunction(const FunctionDecl *Function) {
  if (Function->hasBody() && createsOptimizer(Function->getDefinition())) {
    return false;
  }
  llvm::SmallVector<const FunctionDecl *, 2> Versions = {Function};
  llvm::append_range(Versions, instantiationsOf(Function));
  for (const FunctionDecl *Version : Versions) {
    if (!Version->hasBody()) {
      continue;
    }
    ASTContext &Ctx = Version->getASTContext();
    bool Found = false;
    forEachStmt(Version->getBody(), [&](const Stmt *S) {
      if (Found || !isBackwardCall(S)) {
        return;
      }
      DynTypedNode Node = DynTypedNode::create(*S);
      Found = !innermostLoop(Node, Ctx) && enclosingFunction(Node, Ctx) == Version;
    });
    if (Found) {
      return true;
    }
  }
  return false;
}

namespace {
AST_MATCHER(Stmt, holdsTrainingStep) { return isTrainingStepLoop(&Node, Finder->getASTContext()); }
AST_MATCHER(FunctionDecl, isStepFunction) { return isTrainingStepFunction(&Node); }
} // namespace

bool isInTrainingStep(const CallExpr *Call, ASTContext &Ctx) {
  DynTypedNode Node = DynTypedNode::create(*Call);
  if (const Stmt *Loop = innermostLoop(Node, Ctx)) {
    return isTrainingStepLoop(Loop, Ctx);
  }
  const FunctionDecl *Function = enclosingFunction(Node, Ctx);
  return Function && (isTrainingStepFunction(Function) || isInStraightLineStep(Call, Ctx));
}

StatementMatcher trainingStepBody() {
  auto Body = hasBody(compoundStmt().bind("body"));
  auto Loop =
      stmt(inUserCode(), anyOf(forStmt(Body), cxxForRangeStmt(Body), whileStmt(Body), doStmt(Body)),
           holdsTrainingStep(), forFunction(acceleratorFunction()))
          .bind("loop");
  auto StepFunction =
      compoundStmt(inUserCode(), hasParent(functionDecl(receivesAccelerator(), isStepFunction())))
          .bind("body");
  return stmt(anyOf(Loop, StepFunction));
}

} // namespace accel::rewrites
