//===- DataLoaderRule.cpp - accel-data-loader -----------------------------===//
//
// torch::data::make_data_loader<S>(args...) -> accelerator.prepare_data_loader<S>(args...)
// for training loaders (iterated by a loop that calls backward, here or in a function the
// loader is passed to), so that every process gets its shard of each epoch. See
// docs/rules/accel-data-loader.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/CountedBatchLoops.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

/// The variable the loader call initialises, or null.
const VarDecl *loaderVariable(const CallExpr *Call, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Call);
  for (int Depth = 0; Depth < 8; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return nullptr;
    }
    if (const auto *Var = Parents[0].get<VarDecl>()) {
      return makeDataLoaderInit(Var) == Call ? Var : nullptr;
    }
    const auto *E = Parents[0].get<Expr>();
    if (!E || spelled(E) != Call) {
      return nullptr;
    }
    Current = Parents[0];
  }
  return nullptr;
}

bool iteratedByRangeFor(const VarDecl *Loader, ASTContext &Ctx) {
  return !match(functionDecl(hasDescendant(cxxForRangeStmt(hasRangeInit(
                    expr(hasDescendant(declRefExpr(to(varDecl(equalsNode(Loader)))))))))),
                *cast<FunctionDecl>(Loader->getDeclContext()), Ctx)
              .empty();
}

struct Plan {
  llvm::SmallVector<Edit, 1> Edits;
  Finding Note;
};

Plan plan(const MatchResult &Match) {
  Plan Result;
  ASTContext &Ctx = *Match.Context;
  const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
  const auto *Callee = dyn_cast<DeclRefExpr>(Call->getCallee()->IgnoreImplicit());
  const VarDecl *Loader = loaderVariable(Call, Ctx);
  auto Warn = [&](std::string Message) {
    Result.Note.Kind = Finding::Warning;
    Result.Note.Message = std::move(Message);
  };
  if (!Callee || !Loader || !makeDataLoaderInit(Loader)) {
    return Result; // Not a loader variable: nothing to say.
  }
  std::string Name = Loader->getNameAsString();
  bool Training = isTrainingLoader(Loader, Ctx);
  if (!Training) {
    bool IteratedElsewhere = false;
    for (const LoaderHandOff &HandOff : loaderHandOffs(Loader, Ctx)) {
      IteratedElsewhere = IteratedElsewhere || HandOff.Iterates;
      if (HandOff.Trains && !HandOff.AcceptsShardedLoader) {
        Warn("data loader '" + Name + "' feeds training in " + functionLabel(HandOff.Callee) +
             ", whose parameter names LibTorch's loader type: make that parameter's type a "
             "template parameter (template <typename Loader> ... Loader &loader) and create '" +
             Name +
             "' with accelerator.prepare_data_loader<Sampler>(...) so that each process "
             "gets its shard");
        return Result;
      }
    }
    if (!IteratedElsewhere && !iteratedByRangeFor(Loader, Ctx) &&
        !match(acceleratorFunction(), *cast<FunctionDecl>(Loader->getDeclContext()), Ctx).empty()) {
      Warn("data loader '" + Name +
           "' is not iterated by a loop here; if it feeds training, create it with "
           "accelerator.prepare_data_loader<Sampler>(dataset, options) so that each process "
           "gets its shard");
    }
    return Result; // An evaluation loader: every process sees all of it.
  }
  if (std::string Problem = shardingProblem(Loader); !Problem.empty()) {
    Warn(Problem);
    return Result;
  }
  if (isLoaderFactoryCall(Call)) {
    // A loader a function of the program's own makes (which may make evaluation loaders too):
    // prepared whole, as it comes out of the call.
    Result.Edits.push_back(insertionAt(Call->getBeginLoc(), "accelerator.prepare_data_loader("));
    Result.Edits.push_back(insertionAt(
        Lexer::getLocForEndOfToken(Call->getEndLoc(), 0, *Match.SourceManager, Ctx.getLangOpts()),
        ")"));
    Result.Note.Message = "the training loader '" + Name +
                          "' gives each process its share of every epoch, on the "
                          "accelerator's device (every process runs the whole loader that " +
                          functionLabel(Call->getDirectCallee()) +
                          " makes and keeps its own batches)";
    return Result;
  }
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
  Edit Rename;
  Rename.Range =
      CharSourceRange::getTokenRange(Callee->getBeginLoc(), Callee->getNameInfo().getEndLoc());
  Rename.Replacement = "accelerator.prepare_data_loader";
  Result.Edits.push_back(Rename);
  if (Args.size() == 1) {
    Result.Edits.push_back(
        insertionAt(Lexer::getLocForEndOfToken(Args[0]->getEndLoc(), 0, *Match.SourceManager,
                                               Ctx.getLangOpts()),
                    ", torch::data::DataLoaderOptions()"));
  }
  Result.Note.Message = "the training loader '" + Name +
                        "' gives each process its shard of every epoch, on the "
                        "accelerator's device";
  return Result;
}

} // namespace

namespace {
/// The call that initialises a loader variable (make_data_loader, or a factory's).
AST_MATCHER(CallExpr, initialisesLoaderVariable) {
  return loaderVariable(&Node, Finder->getASTContext()) != nullptr;
}

AST_MATCHER(CXXForRangeStmt, isUnpreparedBatchList) {
  return isUnpreparedBatchListLoop(&Node, Finder->getASTContext());
}

/// A read of the list inside the body of the loop that shares it (`batches.size()` in a
/// progress line): the whole list, where each process iterates its share.
AST_MATCHER(DeclRefExpr, readsListInsideItsLoop) {
  ASTContext &Ctx = Finder->getASTContext();
  DynTypedNode Current = DynTypedNode::create(Node);
  for (int Depth = 0; Depth < 64; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty() || Parents[0].get<FunctionDecl>()) {
      return false;
    }
    if (const auto *Loop = Parents[0].get<CXXForRangeStmt>();
        Loop && Current.get<Stmt>() == Loop->getBody() && isBatchListLoop(Loop, Ctx)) {
      // The list, iterated as it is or through prepare_batches(list).
      const Expr *List = spelled(Loop->getRangeInit());
      if (const auto *Prepared = dyn_cast<CXXMemberCallExpr>(List);
          Prepared && Prepared->getNumArgs() == 1) {
        List = Prepared->getArg(0);
      }
      return namedVar(List) == Node.getDecl();
    }
    Current = Parents[0];
  }
  return false;
}

/// The list of batches a batch-list loop iterates, as it is or through prepare_batches(list).
const VarDecl *listOf(const CXXForRangeStmt *Loop) {
  const Expr *List = spelled(Loop->getRangeInit());
  if (const auto *Prepared = dyn_cast<CXXMemberCallExpr>(List);
      Prepared && Prepared->getNumArgs() == 1) {
    List = Prepared->getArg(0);
  }
  return namedVar(List);
}

/// `batches.size()` computed with outside the loop that shares the list (`total_steps =
/// epochs * batches.size()` for a schedule): the whole list's count, where each process
/// iterates its share by default.
AST_MATCHER(DeclRefExpr, sizesSharedListOutsideItsLoop) {
  ASTContext &Ctx = Finder->getASTContext();
  const auto *List = dyn_cast<VarDecl>(Node.getDecl());
  auto Parents = Ctx.getParents(Node);
  // size() is const: the list is made const for it first.
  while (!Parents.empty() && Parents[0].get<ImplicitCastExpr>()) {
    Parents = Ctx.getParents(Parents[0]);
  }
  const auto *Member = Parents.empty() ? nullptr : Parents[0].get<MemberExpr>();
  auto CallParents = Member ? Ctx.getParents(*Member) : DynTypedNodeList(DynTypedNode());
  const auto *Size =
      Member && !CallParents.empty() ? CallParents[0].get<CXXMemberCallExpr>() : nullptr;
  if (!List || !Size || !Size->getMethodDecl() || Size->getMethodDecl()->getName() != "size") {
    return false;
  }
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(Node), Ctx);
  bool Shared = false, Inside = false;
  forEachStmt(Function ? Function->getBody() : nullptr, [&](const Stmt *S) {
    const auto *Loop = dyn_cast<CXXForRangeStmt>(S);
    if (Loop && isBatchListLoop(Loop, Ctx) && listOf(Loop) == List) {
      Shared = true;
      Inside = Inside || Loop->getSourceRange().fullyContains(Node.getSourceRange());
    }
  });
  if (!Shared || Inside) {
    return false;
  }
  // Computed with: an operand of arithmetic, through casts.
  DynTypedNode Current = DynTypedNode::create(*static_cast<const Stmt *>(Size));
  for (int Depth = 0; Depth < 4; ++Depth) {
    auto Up = Ctx.getParents(Current);
    if (Up.empty()) {
      return false;
    }
    if (const auto *Binary = Up[0].get<BinaryOperator>()) {
      return Binary->isMultiplicativeOp() || Binary->isAdditiveOp() ||
             Binary->isCompoundAssignmentOp();
    }
    if (!Up[0].get<ImplicitCastExpr>() && !Up[0].get<ParenExpr>() &&
        !Up[0].get<CXXStaticCastExpr>() && !Up[0].get<CStyleCastExpr>() &&
        !Up[0].get<CXXFunctionalCastExpr>()) {
      return false;
    }
    Current = Up[0];
  }
  return false;
}

bool factoryTakesBatchSize(const CallExpr *Call, const Expr *Argument, ASTContext &Ctx);

/// Ref is a loader's batch size as written: the integer argument of make_data_loader (or
/// prepare_data_loader), of DataLoaderOptions(...), or of .batch_size(...); or an argument of
/// a loader factory that passes it on as one.
bool setsBatchSize(const Expr *Ref, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Ref);
  for (int Depth = 0; Depth < 4; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return false;
    }
    if (Parents[0].get<ImplicitCastExpr>() || Parents[0].get<ParenExpr>() ||
        Parents[0].get<MaterializeTemporaryExpr>()) {
      Current = Parents[0];
      continue;
    }
    if (const auto *Construct = Parents[0].get<CXXConstructExpr>()) {
      return qualifiedName(Construct->getConstructor()->getParent()) ==
             "torch::data::DataLoaderOptions";
    }
    if (const auto *Member = Parents[0].get<CXXMemberCallExpr>()) {
      return isMethodCall(Member, "torch::data::DataLoaderOptions", "batch_size") ||
             isMethodCall(Member, "accelerate::Accelerator", "prepare_data_loader");
    }
    if (const auto *Call = Parents[0].get<CallExpr>()) {
      if (isLoaderFactoryCall(Call)) {
        return factoryTakesBatchSize(Call, Ref, Ctx);
      }
      return qualifiedName(Call->getDirectCallee()) == "torch::data::make_data_loader";
    }
    return false;
  }
  return false;
}

bool factoryTakesBatchSize(const CallExpr *Call, const Expr *Argument, ASTContext &Ctx) {
  const FunctionDecl *Factory = Call->getDirectCallee();
  if (!Factory || !Factory->hasBody()) {
    return false;
  }
  for (unsigned I = 0; I < Call->getNumArgs() && I < Factory->getNumParams(); ++I) {
    if (spelled(Call->getArg(I)) != Argument) {
      continue;
    }
    bool Sets = false;
    forEachStmt(Factory->getBody(), [&](const Stmt *S) {
      const auto *Use = dyn_cast<DeclRefExpr>(S);
      Sets = Sets || (Use && Use->getDecl() == Factory->getParamDecl(I) && setsBatchSize(Use, Ctx));
    });
    return Sets;
  }
  return false;
}

/// Whether E names the setting: Var, or with Field, Var's member Field (`cfg.batch_size`).
bool namesSetting(const Stmt *E, const VarDecl *Var, const FieldDecl *Field) {
  if (!Field) {
    const auto *Ref = dyn_cast<DeclRefExpr>(E);
    return Ref && Ref->getDecl() == Var;
  }
  const auto *Member = dyn_cast<MemberExpr>(E);
  return Member && Member->getMemberDecl() == Field && namedVar(Member->getBase()) == Var;
}

/// A training loader's initializer in Function that takes Var (or its member Field) as its
/// batch size.
bool feedsTrainingLoader(const VarDecl *Var, const FunctionDecl *Function, const Stmt *Except,
                         ASTContext &Ctx, const FieldDecl *Field = nullptr) {
  bool Found = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Decl = dyn_cast<DeclStmt>(S);
    if (Found || !Decl || !Decl->isSingleDecl()) {
      return;
    }
    const auto *Loader = dyn_cast<VarDecl>(Decl->getSingleDecl());
    if (!Loader || !Loader->getInit() || !isShardedLoader(Loader, Ctx)) {
      return;
    }
    forEachStmt(Loader->getInit(), [&](const Stmt *Child) {
      Found = Found || (Child != Except && namesSetting(Child, Var, Field) &&
                        setsBatchSize(cast<Expr>(Child), Ctx));
    });
  });
  return Found;
}

/// Whether Inner lies inside Outer in the source.
bool within(const Stmt *Inner, const Stmt *Outer, const SourceManager &SM) {
  return Outer && !SM.isBeforeInTranslationUnit(Inner->getBeginLoc(), Outer->getBeginLoc()) &&
         !SM.isBeforeInTranslationUnit(Outer->getEndLoc(), Inner->getEndLoc());
}

/// Whether Var is only read as the bound of loops that cut their batches by a counter
/// (`num_batches` in `for (b = 0; b < num_batches; ++b)`): the number of batches at the
/// batch size, which batch_range shares, so computing it from the batch size is right.
bool onlyBoundsCountedLoops(const VarDecl *Var, const FunctionDecl *Function, ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  llvm::SmallVector<const Expr *, 2> Bounds;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Loop = dyn_cast<ForStmt>(S); Loop && cutsSharedBatches(Loop, Ctx)) {
      Bounds.push_back(AnalysisContext::of(Ctx).countedBatchLoop(Loop).End);
    }
  });
  bool Other = false, Any = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    if (!Ref || Ref->getDecl() != Var) {
      return;
    }
    Any = true;
    Other =
        Other || llvm::none_of(Bounds, [&](const Expr *Bound) { return within(Ref, Bound, SM); });
  });
  return Any && !Other;
}

/// Ref names a variable that sizes the batches of a loop in Function that cuts them by a
/// counter (CountedBatchLoop::BatchSizes), outside the headers and cuts of such loops (which
/// stay right as written) and outside the initializer of a variable that only bounds them.
/// Whether Ref lies in the header or a cut of a loop of Function that cuts shared batches by
/// a counter (`i += batch_size`, `X.slice(0, i, i + batch_size)`): batch_range and
/// batch_rows share those, so they stay right.
bool inCountedLoopHeaderOrCut(const Expr *Ref, const FunctionDecl *Function, ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  bool Inside = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Loop = dyn_cast<ForStmt>(S);
    if (Inside || !Loop || !cutsSharedBatches(Loop, Ctx)) {
      return;
    }
    const CountedBatchLoop &Counted = AnalysisContext::of(Ctx).countedBatchLoop(Loop);
    Inside = within(Ref, Loop->getInit(), SM) || within(Ref, Loop->getCond(), SM) ||
             within(Ref, Loop->getInc(), SM) ||
             llvm::any_of(Counted.Cuts, [&](const Stmt *Cut) { return within(Ref, Cut, SM); }) ||
             llvm::any_of(Counted.Offsets, [&](const VarDecl *Offset) {
               return within(Ref, Offset->getInit(), SM);
             });
  });
  return Inside;
}

bool sizesCountedLoop(const VarDecl *Var, const FunctionDecl *Function, const Expr *Ref,
                      ASTContext &Ctx, const FieldDecl *Field = nullptr) {
  bool Sizes = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Loop = dyn_cast<ForStmt>(S);
    if (Loop && cutsSharedBatches(Loop, Ctx)) {
      const CountedBatchLoop &Counted = AnalysisContext::of(Ctx).countedBatchLoop(Loop);
      Sizes =
          Sizes || (Field ? llvm::is_contained(Counted.BatchSizeMembers, std::make_pair(Var, Field))
                          : llvm::is_contained(Counted.BatchSizes, Var));
    }
  });
  if (!Sizes || inCountedLoopHeaderOrCut(Ref, Function, Ctx)) {
    return false;
  }
  // `const int64_t num_batches = N / batch_size;` read only as such a loop's bound.
  for (DynTypedNode Current = DynTypedNode::create(*Ref);;) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty() || Parents[0].get<Stmt>() == nullptr) {
      const auto *Declared = Parents.empty() ? nullptr : Parents[0].get<VarDecl>();
      return !Declared || !onlyBoundsCountedLoops(Declared, Function, Ctx);
    }
    Current = Parents[0];
  }
}

/// The arithmetic Ref is an operand of (through conversions): a BinaryOperator on numbers, or a
/// tensor's operator (`loss.sum() / batch_size`, where the number becomes a c10::Scalar).
const Expr *arithmeticOn(const Expr *Ref, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*Ref);
  for (int Depth = 0; Depth < 6; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return nullptr;
    }
    // Through conversions, written ones included (`static_cast<double>(batch_size)`).
    if (Parents[0].get<ImplicitCastExpr>() || Parents[0].get<ExplicitCastExpr>() ||
        Parents[0].get<ParenExpr>() || Parents[0].get<MaterializeTemporaryExpr>() ||
        Parents[0].get<CXXBindTemporaryExpr>() || Parents[0].get<CXXConstructExpr>()) {
      Current = Parents[0];
      continue;
    }
    if (const auto *Arithmetic = Parents[0].get<BinaryOperator>()) {
      return Arithmetic->isMultiplicativeOp() || Arithmetic->isAdditiveOp() ||
                     Arithmetic->isCompoundAssignmentOp()
                 ? Arithmetic
                 : nullptr;
    }
    if (const auto *Operator = Parents[0].get<CXXOperatorCallExpr>()) {
      switch (Operator->getOperator()) {
      case OO_Plus:
      case OO_Minus:
      case OO_Star:
      case OO_Slash:
      case OO_PlusEqual:
      case OO_MinusEqual:
      case OO_StarEqual:
      case OO_SlashEqual:
        return Operator;
      default:
        return nullptr;
      }
    }
    return nullptr;
  }
  return nullptr;
}

/// Whether Call is a factory or method of LibTorch's whose integer arguments give a shape or a
/// length (`torch::zeros({bs, 1})`, `torch::arange(bs)`, `x.view({bs, -1})`); InList: the
/// argument is an element of a braced list (randint's and full's other numbers are values).
bool takesShape(const CallExpr *Call, bool InList) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee || !Callee->getDeclName().isIdentifier()) {
    return false;
  }
  const llvm::StringRef Name = Callee->getName();
  if (isa<CXXMethodDecl>(Callee)) {
    const llvm::StringRef Method = tensorMethodName(Call);
    return Method == "view" || Method == "reshape" || Method == "expand" ||
           Method.starts_with("new_");
  }
  const std::string Qualified = qualifiedName(Callee);
  if (!llvm::StringRef(Qualified).starts_with("torch::") &&
      !llvm::StringRef(Qualified).starts_with("at::")) {
    return false;
  }
  if (Name == "randint" || Name == "full") {
    return InList;
  }
  return Name == "zeros" || Name == "ones" || Name == "empty" || Name == "rand" ||
         Name == "randn" || Name == "arange" || Name == "eye" || Name == "randperm";
}

bool parameterShapesTensor(const FunctionDecl *Function, unsigned Index, ASTContext &Ctx,
                           int Depth);

/// The call Ref gives a tensor's shape to, through conversions and braced lists: a factory or
/// method of LibTorch's (takesShape), or a function of the program whose parameter does
/// (`model->init_hidden(batch_size)` making `torch::zeros({1, batch_size, hidden})`); or
/// null.
const CallExpr *shapedBy(const Expr *Ref, ASTContext &Ctx, int Depth = 0) {
  DynTypedNode Current = DynTypedNode::create(*Ref);
  bool InList = false;
  for (int Step = 0; Step < 10; ++Step) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return nullptr;
    }
    if (Parents[0].get<InitListExpr>() || Parents[0].get<CXXStdInitializerListExpr>()) {
      InList = true;
      Current = Parents[0];
      continue;
    }
    if (Parents[0].get<ImplicitCastExpr>() || Parents[0].get<ExplicitCastExpr>() ||
        Parents[0].get<ParenExpr>() || Parents[0].get<MaterializeTemporaryExpr>() ||
        Parents[0].get<CXXBindTemporaryExpr>() ||
        (Parents[0].get<CXXConstructExpr>() && !Parents[0].get<CXXTemporaryObjectExpr>())) {
      Current = Parents[0];
      continue;
    }
    const auto *Call = Parents[0].get<CallExpr>();
    if (!Call || isa<CXXOperatorCallExpr>(Call)) {
      return nullptr;
    }
    if (takesShape(Call, InList)) {
      return Call;
    }
    const FunctionDecl *Callee = Call->getDirectCallee();
    const SourceManager &SM = Ctx.getSourceManager();
    if (InList || !Callee || !Callee->getBody() ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(Callee->getBody()->getBeginLoc()))) {
      return nullptr;
    }
    for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
      if (Current.get<Expr>() == Call->getArg(I)) {
        return parameterShapesTensor(Callee, I, Ctx, Depth) ? Call : nullptr;
      }
    }
    return nullptr;
  }
  return nullptr;
}

/// Whether E lies in a loop over a loader that is not sharded (an evaluation loop), whose
/// batches stay whole under split_batches too.
bool inEvaluationLoop(const Expr *E, ASTContext &Ctx) {
  DynTypedNode Current = DynTypedNode::create(*E);
  for (auto Parents = Ctx.getParents(Current); !Parents.empty();
       Parents = Ctx.getParents(Parents[0])) {
    if (const auto *Loop = Parents[0].get<CXXForRangeStmt>()) {
      const VarDecl *Loader = iteratedVar(Loop);
      if (Loader && makeDataLoaderInit(Loader) && !isShardedLoader(Loader, Ctx)) {
        return true;
      }
    }
  }
  return false;
}

/// Whether Function's parameter Index gives a tensor's shape in its body (shapedBy).
bool parameterShapesTensor(const FunctionDecl *Function, unsigned Index, ASTContext &Ctx,
                           int Depth) {
  if (Depth >= 2 || Index >= Function->getNumParams()) {
    return false;
  }
  const ParmVarDecl *Param = Function->getParamDecl(Index);
  bool Shapes = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Use = dyn_cast<DeclRefExpr>(S);
    Shapes = Shapes || (Use && Use->getDecl() == Param && shapedBy(Use, Ctx, Depth + 1));
  });
  return Shapes;
}

/// Arithmetic with the variable that sets a training loader's batch size (`n / batch_size`
/// steps per epoch, `seen += batch_size`, `loss.sum() / batch_size`): it is one process's batch
/// in the default loader mode and the global batch under split_batches.
AST_MATCHER(DeclRefExpr, computesWithTrainingBatchSize) {
  ASTContext &Ctx = Finder->getASTContext();
  const auto *Var = dyn_cast<VarDecl>(Node.getDecl());
  // A local, a parameter, or a constant at file scope (`const int64_t kBatchSize = 64;`, as
  // the MNIST example writes it), looked for in the function that reads it.
  const bool FileScope = Var && Var->hasGlobalStorage() && !Var->isStaticLocal();
  if (!Var || !Var->getType()->isIntegerType() ||
      !(Var->isLocalVarDecl() || isa<ParmVarDecl>(Var) || FileScope) ||
      !(arithmeticOn(&Node, Ctx) || (shapedBy(&Node, Ctx) && !inEvaluationLoop(&Node, Ctx)))) {
    return false;
  }
  const auto *Function = FileScope ? enclosingFunction(DynTypedNode::create(Node), Ctx)
                                   : dyn_cast<FunctionDecl>(Var->getDeclContext());
  return Function && Function->getBody() && !inCountedLoopHeaderOrCut(&Node, Function, Ctx) &&
         (feedsTrainingLoader(Var, Function, &Node, Ctx) ||
          sizesCountedLoop(Var, Function, &Node, Ctx));
}

/// The same for a member of a local or parameter (`cfg.epochs * (cfg.n_train /
/// cfg.batch_size)` with the loader made at `cfg.batch_size`, or a loop cutting its batches
/// by `i += cfg.batch_size`): a Config struct's setting.
AST_MATCHER(MemberExpr, computesWithTrainingBatchSizeMember) {
  ASTContext &Ctx = Finder->getASTContext();
  const auto *Field = dyn_cast<FieldDecl>(Node.getMemberDecl());
  const VarDecl *Var = namedVar(Node.getBase());
  if (!Field || !Field->getType()->isIntegerType() || !Var ||
      !(Var->isLocalVarDecl() || isa<ParmVarDecl>(Var)) ||
      !(arithmeticOn(&Node, Ctx) || (shapedBy(&Node, Ctx) && !inEvaluationLoop(&Node, Ctx)))) {
    return false;
  }
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  return Function && Function->getBody() &&
         (feedsTrainingLoader(Var, Function, &Node, Ctx, Field) ||
          sizesCountedLoop(Var, Function, &Node, Ctx, Field));
}

/// E's text, in parentheses unless it is one name, literal or call.
std::string parenthesized(const Expr *E, const ASTContext &Ctx) {
  const Expr *Bare = E->IgnoreImpCasts();
  const bool Simple = isa<DeclRefExpr, IntegerLiteral, CallExpr, ParenExpr, MemberExpr>(Bare);
  return Simple ? sourceText(E, Ctx) : "(" + sourceText(E, Ctx) + ")";
}

AST_MATCHER(ForStmt, cutsSharedBatchesByCounter) {
  return cutsSharedBatches(&Node, Finder->getASTContext());
}

/// A loop that cuts its batches by a counter, shared: its header runs this process's
/// iterations, and each cut takes this process's rows of the batch.
///   for (int64_t i = 0; i < n; i += b)  ->  for (int64_t i : accelerator.batch_range(0, n, b))
///   X.slice(0, i, i + b)                ->  accelerator.batch_rows(X.slice(0, i, i + b))
///   xs[b]                               ->  accelerator.batch_rows(xs[b])
llvm::Expected<llvm::SmallVector<Edit, 1>> countedLoopEdits(const MatchResult &Match) {
  const auto *Loop = Match.Nodes.getNodeAs<ForStmt>("counted");
  ASTContext &Ctx = *Match.Context;
  const SourceManager &SM = *Match.SourceManager;
  const CountedBatchLoop &Counted = AnalysisContext::of(Ctx).countedBatchLoop(Loop);
  // The counter's declaration as written up to its name (`int64_t i`, `auto b`).
  const SourceLocation NameEnd =
      Lexer::getLocForEndOfToken(Counted.Counter->getLocation(), 0, SM, Ctx.getLangOpts());
  const std::string Declared =
      Lexer::getSourceText(CharSourceRange::getCharRange(Loop->getInit()->getBeginLoc(), NameEnd),
                           SM, Ctx.getLangOpts())
          .str();
  // batch_range's end excludes it: `i + ahead <= end` runs while i < end - ahead + 1.
  std::string End = !Counted.Aheads.empty() || Counted.Inclusive ? parenthesized(Counted.End, Ctx)
                                                                 : sourceText(Counted.End, Ctx);
  for (const Expr *Ahead : Counted.Aheads) {
    End += " - " + parenthesized(Ahead, Ctx);
  }
  if (Counted.Inclusive) {
    End += " + 1";
  }
  std::string Range =
      Declared + " : accelerator.batch_range(" + sourceText(Counted.Begin, Ctx) + ", " + End;
  if (Counted.Step) {
    Range += ", " + sourceText(Counted.Step, Ctx);
  }
  llvm::SmallVector<Edit, 1> Edits;
  Edit Header;
  Header.Range =
      CharSourceRange::getTokenRange(Loop->getInit()->getBeginLoc(), Loop->getInc()->getEndLoc());
  Header.Replacement = Range + ")";
  Edits.push_back(Header);
  for (const Expr *Cut : Counted.Cuts) {
    Edits.push_back(insertionAt(Cut->getBeginLoc(), "accelerator.batch_rows("));
    Edits.push_back(
        insertionAt(Lexer::getLocForEndOfToken(Cut->getEndLoc(), 0, SM, Ctx.getLangOpts()), ")"));
  }
  // `auto& x = xs[b];` -> `auto x = accelerator.batch_rows(xs[b]);`
  for (const VarDecl *Reference : Counted.ReferencesCopied) {
    auto Sigil =
        Reference->getTypeSourceInfo()->getTypeLoc().getAsAdjusted<LValueReferenceTypeLoc>();
    if (Sigil.isNull() || Sigil.getSigilLoc().isMacroID()) {
      return llvm::SmallVector<Edit, 1>(); // written in a way this cannot edit: left as is
    }
    Edit Copy;
    Copy.Range = CharSourceRange::getTokenRange(Sigil.getSigilLoc(), Sigil.getSigilLoc());
    // `auto & x` keeps one space.
    const char *After = SM.getCharacterData(Sigil.getSigilLoc()) + 1;
    const char *Before = SM.getCharacterData(Sigil.getSigilLoc()) - 1;
    if (*After == ' ' && *Before == ' ') {
      Copy.Range = CharSourceRange::getCharRange(Sigil.getSigilLoc(),
                                                 Sigil.getSigilLoc().getLocWithOffset(2));
    }
    Edits.push_back(Copy);
  }
  return Edits;
}

} // namespace

Rule makeDataLoaderRule() {
  // make_data_loader, or a factory of the program's own that returns its loader.
  // (plan() tells them apart by the variable they initialise).
  auto Call = callExpr(inUserCode(), unless(cxxMemberCallExpr()), callee(functionDecl()),
                       initialisesLoaderVariable())
                  .bind("call");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    for (const Edit &E : plan(Match).Edits) {
      if (E.Range.getBegin().isMacroID() || E.Range.getEnd().isMacroID()) {
        return llvm::SmallVector<Edit, 1>();
      }
    }
    return plan(Match).Edits;
  };
  auto Loaders =
      makeRule(Call, Edits,
               dynamicFinding("call", [](const MatchResult &Match) { return plan(Match).Note; }));
  // A training loop over batches the program made itself: shared like a loader's.
  auto BatchList = cxxForRangeStmt(inUserCode(), forFunction(acceleratorFunction()),
                                   isUnpreparedBatchList(), hasRangeInit(expr().bind("list")))
                       .bind("loop");
  auto Lists = makeRule(
      BatchList, changeTo(node("list"), cat("accelerator.prepare_batches(", node("list"), ")")),
      explain("list", "each process trains on its share of these batches (every N-th one, or "
                      "its rows of each under split_batches), moved to accelerator.device()"));
  // A training loop that cuts its batches by a counter (analysis/CountedBatchLoops.h).
  auto Counted = makeRule(
      forStmt(inUserCode(), forFunction(acceleratorFunction()), cutsSharedBatchesByCounter())
          .bind("counted"),
      EditGenerator(countedLoopEdits),
      explain("counted", "each process runs its share of this loop's batches "
                         "(accelerator.batch_range: every N-th one, or all of them under "
                         "split_batches) and cuts its rows of each (accelerator.batch_rows: the "
                         "whole batch, or its part under split_batches)"));
  auto ListRead = makeRule(
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), readsListInsideItsLoop())
          .bind("read"),
      noEdits(),
      warn("read", "this reads the whole list of batches inside the loop that shares it: each "
                   "process iterates its share of it (accelerator.prepare_batches), as many "
                   "batches as the original only under split_batches; count the batches in the "
                   "loop, or keep `auto shard = accelerator.prepare_batches(list);` and use "
                   "shard.size()"));
  auto ListSizeArithmetic = makeRule(
      declRefExpr(inUserCode(), forFunction(acceleratorFunction()), sizesSharedListOutsideItsLoop())
          .bind("list"),
      noEdits(),
      warn("list", "this computes with the number of batches in a list a training loop shares: "
                   "by default each process iterates its share of it (accelerator.prepare_batches, "
                   "every N-th batch), so a number of steps made from it (a schedule's length) "
                   "counts N times the steps a process takes; all of them only under "
                   "split_batches. Keep `auto shard = accelerator.prepare_batches(list);` and use "
                   "shard.size(), or launch with --split_batches"));
  auto BatchSizeArithmetic = makeRule(
      expr(inUserCode(), forFunction(acceleratorFunction()),
           anyOf(declRefExpr(computesWithTrainingBatchSize()),
                 memberExpr(computesWithTrainingBatchSizeMember())))
          .bind("size"),
      noEdits(), finding(Finding::Warning, "size", [](const MatchResult &Match) {
        const auto *Ref = Match.Nodes.getNodeAs<Expr>("size");
        std::string Name = sourceText(Ref, *Match.Context);
        const auto *Function = enclosingFunction(DynTypedNode::create(*Ref), *Match.Context);
        // A member's setting feeds a loader by construction; a variable may size the batches
        // a loop cuts by its counter instead.
        const auto *Member = dyn_cast<MemberExpr>(Ref);
        const bool Loader =
            Member ? feedsTrainingLoader(namedVar(Member->getBase()), Function, Ref, *Match.Context,
                                         cast<FieldDecl>(Member->getMemberDecl()))
                   : feedsTrainingLoader(cast<VarDecl>(cast<DeclRefExpr>(Ref)->getDecl()), Function,
                                         Ref, *Match.Context);
        const std::string What = Loader ? "' sets a training loader's batch size"
                                        : "' sizes the batches a training loop cuts by its counter";
        if (const CallExpr *Shaped = shapedBy(Ref, *Match.Context);
            Shaped && !arithmeticOn(Ref, *Match.Context)) {
          // A tensor the size of one batch: right by default, N times too many rows under
          // split_batches.
          return "'" + Name + What + ", and this tensor is shaped by it (`" +
                 sourceText(Shaped, *Match.Context) +
                 "`): by default each process takes batches of " + Name +
                 ", as written; under split_batches (accel launch --split_batches) a process "
                 "holds " +
                 Name +
                 " / accelerator.num_processes() rows of each, so a tensor made for a "
                 "batch would not fit it. Shape it by the rows of the batch (its size(0)) "
                 "instead, or launch without --split_batches";
        }
        if (const Expr *Arithmetic = arithmeticOn(Ref, *Match.Context);
            Arithmetic && isTensorType(Arithmetic->getType())) {
          // A loss scaled by the batch size: right by default, 1/N of it under split_batches.
          return "'" + Name + What +
                 ", and this tensor computes with it: by default each process takes batches of " +
                 Name +
                 ", as written; under split_batches (accel launch --split_batches) a "
                 "process holds " +
                 Name +
                 " / accelerator.num_processes() rows of each, so a "
                 "loss divided by " +
                 Name +
                 " would give gradients N times too small. Divide by "
                 "the rows of the batch (its size(0)) instead, or launch without "
                 "--split_batches";
        }
        return "'" + Name + What +
               ", and this computes with it: by default each process takes batches of " + Name +
               " (the global batch is " + Name +
               " times accelerator.num_processes()), so a number of steps or samples computed "
               "from it is one process's share; under split_batches (accel launch "
               "--split_batches) it stays the global batch, as written. Count the steps in "
               "the loop, or launch with --split_batches";
      }));
  return applyFirst<Finding>(
      {Loaders, Lists, Counted, ListRead, ListSizeArithmetic, BatchSizeArithmetic});
}

} // namespace accel::rewrites
