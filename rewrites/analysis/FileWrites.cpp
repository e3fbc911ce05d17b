//===- FileWrites.cpp - File writes run once ------------------------------===//
#include "analysis/FileWrites.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/CallGraph.h"
#include "analysis/CountedBatchLoops.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingLoops.h"
#include "analysis/TrainingPlan.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/StmtCXX.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <optional>
#include <variant>

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

/// fopen's mode writes: "w", "a" or an update mode (or a mode that is not a literal).
AST_MATCHER(CallExpr, opensForWriting) {
  if (Node.getNumArgs() < 2) {
    return false;
  }
  const auto *Mode = dyn_cast<StringLiteral>(Node.getArg(1)->IgnoreParenImpCasts());
  return !Mode || Mode->getString().find_first_of("wa+") != llvm::StringRef::npos;
}

/// Guards, or why there is none.
using GuardsOrWhy = std::variant<llvm::SmallVector<const Stmt *, 2>, std::string>;

std::string lineOf(const Stmt *S, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  return std::to_string(SM.getExpansionLineNumber(S->getBeginLoc()));
}

/// std::cout and its siblings: writing to them is printing, which accel-print makes once.
bool isStandardStream(const VarDecl *Var) {
  static const llvm::StringSet<> Streams = {"cout", "cerr", "clog", "wcout", "wcerr"};
  return Var->isInStdNamespace() && Streams.contains(Var->getName());
}

/// Draws from the global random generator: torch's random functions and in-place samplers,
/// the C library's rand, and making a module (its parameters are initialised at random).
bool drawsRandomNumbers(const Stmt *S) {
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(S)) {
    return isModelType(Construct->getType());
  }
  const auto *Call = dyn_cast<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->getIdentifier()) {
    return false;
  }
  static const llvm::StringSet<> Torch = {
      "rand",         "randn",        "randint",       "randperm",        "rand_like",
      "randn_like",   "randint_like", "normal",        "bernoulli",       "multinomial",
      "poisson",      "dropout",      "alpha_dropout", "feature_dropout", "manual_seed",
      "seed",         "normal_",      "uniform_",      "bernoulli_",      "random_",
      "exponential_", "geometric_",   "log_normal_",   "cauchy_"};
  const std::string Name = qualifiedName(Callee);
  const llvm::StringRef Short = Callee->getName();
  if ((llvm::StringRef(Name).starts_with("torch::") || llvm::StringRef(Name).starts_with("at::")) &&
      Torch.contains(Short)) {
    return true;
  }
  return Name == "rand" || Name == "srand" || Name == "std::rand" || Name == "std::srand";
}

/// What the accelerator offers that every process need not call.
bool isLocalAcceleratorUse(const DeclRefExpr *Ref, ASTContext &Ctx) {
  static const llvm::StringSet<> Local = {
      "print",         "is_main_process",     "is_local_main_process",
      "process_index", "local_process_index", "num_processes",
      "device"};
  const DynTypedNodeList Parents = Ctx.getParents(*Ref);
  const auto *Member = Parents.empty() ? nullptr : Parents[0].get<MemberExpr>();
  return Member && Member->getMemberDecl()->getIdentifier() &&
         Local.contains(Member->getMemberDecl()->getName());
}

/// The main file's definition a call or construction runs, or null.
const FunctionDecl *definitionInMainFile(const Stmt *S, const SourceManager &SM) {
  const FunctionDecl *Callee = nullptr;
  if (const auto *Call = dyn_cast<CallExpr>(S)) {
    Callee = Call->getDirectCallee();
  } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(S)) {
    Callee = Construct->getConstructor();
  }
  const FunctionDecl *Definition = Callee ? Callee->getDefinition() : nullptr;
  if (Definition && Definition->getTemplateInstantiationPattern()) {
    Definition = Definition->getTemplateInstantiationPattern();
  }
  if (Definition && Definition->hasBody() &&
      SM.isWrittenInMainFile(SM.getExpansionLoc(Definition->getLocation()))) {
    return Definition;
  }
  return nullptr;
}

/// What running a statement on the main process alone would change for the other processes.
struct Missed {
  /// Why it would change what they do; empty when nothing would but random numbers.
  std::string Why;
  /// Where it draws random numbers (empty when it does not): harmless only when the random
  /// generator is seeded again before anything else draws.
  std::string DrawsAt;
};

/// What running Code (a statement, or a function called from it) on the main process alone
/// would change for the others. Inside is the statement to be guarded: variables declared in
/// it are its own. Follows calls into the main file's functions (Seen stops recursion).
Missed whatOthersWouldMiss(const Stmt *Code, const Stmt *Inside, ASTContext &Ctx,
                           llvm::SmallPtrSetImpl<const FunctionDecl *> &Seen) {
  const SourceManager &SM = Ctx.getSourceManager();
  const SourceRange Own = Inside->getSourceRange();
  auto DeclaredInside = [&](const VarDecl *Var) {
    SourceLocation Loc = SM.getExpansionLoc(Var->getLocation());
    return SM.isBeforeInTranslationUnit(SM.getExpansionLoc(Own.getBegin()), Loc) &&
           SM.isBeforeInTranslationUnit(Loc, SM.getExpansionLoc(Own.getEnd()));
  };
  std::string Why, DrawsAt;
  // Training is the reason to name first: it also calls on the accelerator and changes things.
  forEachStmt(Code, [&](const Stmt *S) {
    if (Why.empty() && isBackwardCall(S)) {
      Why = "it trains (backward at line " + lineOf(S, Ctx) + ")";
    }
  });
  forEachStmt(Code, [&](const Stmt *S) {
    if (!Why.empty()) {
      return;
    }
    if (drawsRandomNumbers(S)) {
      if (DrawsAt.empty()) {
        DrawsAt = lineOf(S, Ctx);
      }
      return;
    }
    const CXXMemberCallExpr *Step = nullptr;
    if (isOptimizerStep(S, Step)) {
      Why = "it steps an optimizer (line " + lineOf(S, Ctx) + ")";
      return;
    }
    if (const auto *Call = dyn_cast<CallExpr>(S)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      if (Callee && qualifiedName(Callee) == "torch::save") {
        Why = "it saves with torch::save (line " + lineOf(S, Ctx) +
              "), which becomes accelerator.save, a call every process makes";
        return;
      }
    }
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
      const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
      if (!Var) {
        return;
      }
      if (isAcceleratorType(Var->getType().getNonReferenceType())) {
        if (!isLocalAcceleratorUse(Ref, Ctx)) {
          Why = "it calls on the accelerator (line " + lineOf(S, Ctx) +
                "), which every process must do together";
        }
        return;
      }
      if (isStandardStream(Var) || Var->getType().getNonReferenceType().isConstQualified()) {
        return;
      }
      // In a called function its own locals and parameters are its business; the caller's
      // arguments were checked where they are passed.
      const bool Outside =
          Code == Inside ? !DeclaredInside(Var) : Var->hasGlobalStorage() && !Var->isLocalVarDecl();
      const bool StaticLocal = Var->isStaticLocal() && Code != Inside;
      if ((Outside || StaticLocal) && changesWhatItNames(Ref, Ctx)) {
        Why = "it changes '" + Var->getNameAsString() + "' (line " + lineOf(S, Ctx) +
              "), which the other processes would then not have";
      }
      return;
    }
    const FunctionDecl *Definition = definitionInMainFile(S, SM);
    if (Definition && Seen.insert(Definition).second) {
      Missed Below = whatOthersWouldMiss(Definition->getBody(), Inside, Ctx, Seen);
      Why = Below.Why;
      if (DrawsAt.empty()) {
        DrawsAt = Below.DrawsAt;
      }
    }
  });
  if (Why.empty() && Code == Inside && readsStatistic(Code, Ctx)) {
    Why = "it reads a statistic of the training loop, which accel-reduce combines across the "
          "processes, a call every process makes";
  }
  return {Why, DrawsAt};
}

bool isSeeding(const Stmt *S) {
  if (const auto *Cleanups = dyn_cast<ExprWithCleanups>(S)) {
    S = Cleanups->getSubExpr();
  }
  const auto *Call = dyn_cast<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee) {
    return false;
  }
  const std::string Name = qualifiedName(Callee);
  return Name == "torch::manual_seed" || Name == "at::manual_seed" ||
         Name == "accelerate::set_seed";
}

/// make_data_loader with a random sampler (its default): the sampler draws its order.
bool drawsOrder(const FunctionDecl *Callee) {
  if (!Callee->getIdentifier() || Callee->getName() != "make_data_loader") {
    return false;
  }
  const TemplateArgumentList *Args = Callee->getTemplateSpecializationArgs();
  if (!Args) {
    return true;
  }
  for (const TemplateArgument &Arg : Args->asArray()) {
    if (Arg.getKind() == TemplateArgument::Type) {
      const CXXRecordDecl *Record = Arg.getAsType()->getAsCXXRecordDecl();
      if (Record && Record->getName().contains("Random")) {
        return true;
      }
    }
  }
  return false;
}

/// Whether S (or a function of the main file it calls) may draw random numbers: torch's
/// random functions, a module made, a data loader made (a random sampler draws its order).
bool mayDrawRandomNumbers(const Stmt *S, const SourceManager &SM,
                          llvm::SmallPtrSetImpl<const FunctionDecl *> &Seen) {
  bool Draws = false;
  forEachStmt(S, [&](const Stmt *Node) {
    if (Draws) {
      return;
    }
    const auto *Call = dyn_cast<CallExpr>(Node);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (drawsRandomNumbers(Node) || (Callee && drawsOrder(Callee))) {
      Draws = true;
      return;
    }
    const FunctionDecl *Definition = definitionInMainFile(Node, SM);
    if (Definition && Seen.insert(Definition).second) {
      Draws = mayDrawRandomNumbers(Definition->getBody(), SM, Seen);
    }
  });
  return Draws;
}

/// Whether the random generator is seeded again after Guarded (a statement of a block)
/// before anything else draws from it: then the numbers the main process drew in it alone
/// change nothing afterwards.
bool seededAgainAfter(const Stmt *Guarded, ASTContext &Ctx) {
  const DynTypedNodeList Parents = Ctx.getParents(*Guarded);
  const auto *Block = Parents.empty() ? nullptr : Parents[0].get<CompoundStmt>();
  if (!Block) {
    return false;
  }
  bool Past = false;
  llvm::SmallPtrSet<const FunctionDecl *, 8> Seen;
  for (const Stmt *S : Block->body()) {
    if (!Past) {
      // The block holds the statement as the AST has it (a call with a temporary inside its
      // ExprWithCleanups); Guarded is it as spelled.
      const auto *Statement = dyn_cast<Expr>(S);
      Past = S == Guarded || (Statement && Statement->IgnoreImplicit() == Guarded);
      continue;
    }
    if (isSeeding(S)) {
      return true;
    }
    if (mayDrawRandomNumbers(S, Ctx.getSourceManager(), Seen)) {
      return false;
    }
  }
  return false;
}

/// The function S is in has its own accelerator (declared there, or inserted there by
/// accel-accelerator), so a statement that runs once per call of it runs the same number of
/// times on every process: main, or the function that sets up training.
bool hasOwnAccelerator(const FunctionDecl *Function, ASTContext &Ctx) {
  if (isa<CXXMethodDecl>(Function)) {
    return false;
  }
  for (const ParmVarDecl *Param : Function->parameters()) {
    if (isAcceleratorType(Param->getType().getNonReferenceType())) {
      return false; // a helper given it: how often it runs is its callers' business
    }
  }
  return !match(functionDecl(declaresAccelerator()), *Function, Ctx).empty();
}

/// An Accelerator variable of Function declared after Loc: it cannot be used before.
bool acceleratorDeclaredAfter(const FunctionDecl *Function, SourceLocation Loc,
                              const SourceManager &SM) {
  bool After = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
      for (const Decl *D : Decls->decls()) {
        const auto *Var = dyn_cast<VarDecl>(D);
        After = After || (Var && isAcceleratorType(Var->getType().getNonReferenceType()) &&
                          SM.isBeforeInTranslationUnit(Loc, Var->getLocation()));
      }
    }
  });
  return After;
}

/// A loop every process runs the same number of times, so that the waits of a guard inside
/// it meet: a range-for over a variable that is no data loader or list of batches (the
/// rates of a sweep, the folds of a k-fold loop) and that the loop does not change, or a
/// counting for-loop (`for (int k = 0; k < folds; ++k)`) whose bound the loop does not change,
/// whose condition calls nothing and that does not count through batches it shares
/// (CountedBatchLoops.h); and nothing in it leaves it early (a break, a return).
/// Training inside it is fine: a training loop ends alike on every process.
bool runsAlikeEverywhere(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *Body = nullptr;
  if (const auto *Range = dyn_cast<CXXForRangeStmt>(Loop)) {
    const auto *Named = dyn_cast<DeclRefExpr>(Range->getRangeInit()->IgnoreParenImpCasts());
    const auto *Container = Named ? dyn_cast<VarDecl>(Named->getDecl()) : nullptr;
    if (!Container || isBatchListLoop(Range, Ctx) || isShardedLoader(Container, Ctx) ||
        isTrainingLoader(Container, Ctx) || changedInside(Container, Range->getBody(), Ctx)) {
      return false;
    }
    Body = Range->getBody();
  } else if (const auto *For = dyn_cast<ForStmt>(Loop)) {
    const auto *Init = dyn_cast_or_null<DeclStmt>(For->getInit());
    const auto *Counter =
        Init && Init->isSingleDecl() ? dyn_cast<VarDecl>(Init->getSingleDecl()) : nullptr;
    const auto *Condition =
        For->getCond() ? dyn_cast<BinaryOperator>(For->getCond()->IgnoreParenImpCasts()) : nullptr;
    if (!Counter || !Counter->getType()->isIntegerType() || !Condition ||
        !Condition->isComparisonOp() || changedInside(Counter, For->getBody(), Ctx) ||
        cutsSharedBatches(For, Ctx)) {
      return false;
    }
    bool Uniform = true;
    forEachStmt(Condition, [&](const Stmt *S) {
      if (isa<CallExpr>(S)) {
        Uniform = false;
      } else if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
        const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
        Uniform = Uniform && Var && (Var == Counter || !changedInside(Var, For->getBody(), Ctx));
      }
    });
    if (!Uniform) {
      return false;
    }
    Body = For->getBody();
  } else {
    return false;
  }
  return !leavesEarly(Body);
}

/// The statement to guard for Code in Function (which has its own accelerator): the
/// statement it is in that runs once each time Function does, taken whole with the loops and
/// branches around Code. Why says why there is none.
const Stmt *statementToGuard(const Stmt *Code, const FunctionDecl *Function, ASTContext &Ctx,
                             std::string &Why) {
  const Stmt *Body = Function->getBody();
  const Stmt *Candidate = nullptr;
  DynTypedNode Node = DynTypedNode::create(*Code);
  while (true) {
    const DynTypedNodeList Parents = Ctx.getParents(Node);
    if (Parents.empty()) {
      Why = "the tool cannot tell where it runs";
      return nullptr;
    }
    const DynTypedNode Parent = Parents[0];
    if (const auto *Block = Parent.get<CompoundStmt>()) {
      const auto *Child = Node.get<Stmt>();
      // A declaration's name is used by what follows it in the block: the block goes whole.
      if (!Candidate && Child && !isa<DeclStmt>(Child)) {
        Candidate = Child;
      }
      if (Block == Body) {
        break;
      }
    } else if (Parent.get<LambdaExpr>()) {
      Why = "it is in a lambda";
      return nullptr;
    } else if (const Stmt *Body = loopBody(Parent.get<Stmt>())) {
      // In the body of a loop every process runs alike (a sweep, a k-fold loop) the guard
      // goes inside it; any other loop goes whole.
      if (Node.get<Stmt>() != Body || !runsAlikeEverywhere(Parent.get<Stmt>(), Ctx)) {
        Candidate = nullptr;
      }
    } else if (Parent.get<IfStmt>() || Parent.get<SwitchStmt>() || Parent.get<CXXCatchStmt>()) {
      Candidate = nullptr; // the branch goes whole
    }
    Node = Parent;
  }
  if (!Candidate) {
    Why = "its result is a variable of " + functionLabel(Function) +
          " that the code after it uses; put the writing in a block `{ ... }` or a function "
          "of its own";
    return nullptr;
  }
  return Candidate;
}

/// Whether S begins and ends its own lines (its semicolon included), so that the guard's
/// lines can go around it.
bool hasLinesOfItsOwn(const Stmt *S, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  const LangOptions &LangOpts = Ctx.getLangOpts();
  CharSourceRange Range =
      Lexer::makeFileCharRange(CharSourceRange::getTokenRange(S->getSourceRange()), SM, LangOpts);
  if (Range.isInvalid()) {
    return false;
  }
  auto [FID, Begin] = SM.getDecomposedLoc(Range.getBegin());
  unsigned End = SM.getFileOffset(Range.getEnd());
  llvm::StringRef Data = SM.getBufferData(FID);
  while (Begin > 0 && (Data[Begin - 1] == ' ' || Data[Begin - 1] == '\t')) {
    --Begin;
  }
  if (Begin != 0 && Data[Begin - 1] != '\n') {
    return false;
  }
  llvm::StringRef After = Data.substr(End).ltrim(" \t");
  if (!isa<CompoundStmt>(S) && After.starts_with(";")) {
    After = After.drop_front().ltrim(" \t");
  }
  return After.empty() || After.starts_with("\n") || After.starts_with("\r") ||
         After.starts_with("//");
}

GuardsOrWhy guardsFor(const Stmt *Code, ASTContext &Ctx, unsigned Depth) {
  AnalysisContext &Analyses = AnalysisContext::of(Ctx);
  const SourceManager &SM = Ctx.getSourceManager();
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Code), Ctx);
  if (!Function) {
    return std::string("it is outside any function");
  }
  if (const auto *Method = dyn_cast<CXXMethodDecl>(Function);
      Method && Method->getParent()->isLambda()) {
    return std::string("it is in a lambda");
  }
  if (hasOwnAccelerator(Function, Ctx)) {
    std::string Why;
    const Stmt *Guard = statementToGuard(Code, Function, Ctx, Why);
    if (!Guard) {
      return Why;
    }
    const std::string Where =
        "running line " + lineOf(Guard, Ctx) + " on the main process alone would not do: ";
    if (Analyses.trainingPlans().declines(
            SM.getFileOffset(SM.getExpansionLoc(Guard->getBeginLoc())))) {
      return std::string("the training of " + functionLabel(Function) +
                         " is left as written (see the accel-training-loop warning)");
    }
    if (acceleratorDeclaredAfter(Function, Guard->getBeginLoc(), SM)) {
      return Where + "the accelerator is declared after it";
    }
    if (!hasLinesOfItsOwn(Guard, Ctx)) {
      return Where + "it shares a line with other code";
    }
    llvm::SmallPtrSet<const FunctionDecl *, 8> Seen;
    Missed Missing = whatOthersWouldMiss(Guard, Guard, Ctx, Seen);
    if (!Missing.Why.empty()) {
      return Where + Missing.Why;
    }
    if (!Missing.DrawsAt.empty() && !seededAgainAfter(Guard, Ctx)) {
      return Where + "it draws random numbers (line " + Missing.DrawsAt +
             "), so the main process's random state would no longer match the others'; "
             "seeding again right after it (`torch::manual_seed(...)`) lets the tool guard it";
    }
    return llvm::SmallVector<const Stmt *, 2>{Guard};
  }
  // A helper: guarded where it is called, at every call.
  const FunctionDecl *Helper = canonicalFunction(Function);
  const CallGraph &Calls = Analyses.callGraph();
  if (Calls.AddressTaken.count(Helper)) {
    return "it is in " + functionLabel(Function) +
           ", whose address is taken: the tool cannot follow where it runs";
  }
  if (Function->isMain()) {
    return std::string("'main' has no accelerator: it is declared in the functions that set up "
                       "training, and main only calls them");
  }
  llvm::ArrayRef<CallSite> Sites = Calls.sitesOf(Helper);
  if (Sites.empty() || Depth > 4) {
    return "it is in " + functionLabel(Function) +
           ", which the tool cannot follow back to the function that declares the accelerator";
  }
  llvm::SmallVector<const Stmt *, 2> Guards;
  for (const CallSite &Site : Sites) {
    if (runsOnSomeProcesses(Site.Call, Ctx)) {
      continue; // guarded already (by hand, or by an earlier rewrite)
    }
    GuardsOrWhy Found = guardsFor(Site.Call, Ctx, Depth + 1);
    if (auto *Why = std::get_if<std::string>(&Found)) {
      return "it is in " + functionLabel(Function) + ", called at line " + lineOf(Site.Call, Ctx) +
             ", where " + *Why;
    }
    for (const Stmt *Guard : std::get<0>(Found)) {
      Guards.push_back(Guard);
    }
  }
  return Guards;
}

bool contains(const Stmt *Outer, const Stmt *Inner, const SourceManager &SM) {
  return Outer != Inner &&
         !SM.isBeforeInTranslationUnit(SM.getExpansionLoc(Inner->getBeginLoc()),
                                       SM.getExpansionLoc(Outer->getBeginLoc())) &&
         !SM.isBeforeInTranslationUnit(SM.getExpansionLoc(Outer->getEndLoc()),
                                       SM.getExpansionLoc(Inner->getEndLoc()));
}

} // namespace

namespace {
/// A method whose first parameter is a std::string (a file name).
AST_MATCHER(CXXMethodDecl, takesFileName) {
  if (Node.getNumParams() < 1) {
    return false;
  }
  const auto *Record = recordOf(Node.getParamDecl(0)->getType().getNonReferenceType());
  return Record && Record->isInStdNamespace() && Record->getName() == "basic_string";
}
} // namespace

StatementMatcher fileWrite() {
  auto Stream = cxxRecordDecl(hasName("::std::basic_ofstream"));
  return stmt(anyOf(
      cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(Stream))), argumentCountAtLeast(1))
          .bind("write"),
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("open"), ofClass(Stream)))).bind("write"),
      callExpr(callee(functionDecl(hasAnyName("::fopen", "::std::fopen"))), opensForWriting())
          .bind("write"),
      // archive.save_to("model.pt") (not the overloads that write to a stream or a function).
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("save_to"),
                                             ofClass(hasName("::torch::serialize::OutputArchive")),
                                             takesFileName())))
          .bind("write"),
      // The C library's remove and rename (std::remove the algorithm is a template).
      callExpr(callee(functionDecl(hasAnyName("::remove", "::rename", "::std::filesystem::remove",
                                              "::std::filesystem::remove_all",
                                              "::std::filesystem::rename"),
                                   unless(isTemplateInstantiation()))))
          .bind("remove")));
}

std::unique_ptr<FileWriteGuards> analyzeFileWrites(ASTContext &Ctx) {
  auto Result = std::make_unique<FileWriteGuards>();
  const SourceManager &SM = Ctx.getSourceManager();
  llvm::SmallVector<const Stmt *, 8> Guards;
  llvm::SmallVector<const Stmt *, 8> Writes;
  for (const FunctionDecl *Function : AnalysisContext::of(Ctx).callGraph().Definitions) {
    for (const BoundNodes &Found :
         match(traverse(TK_IgnoreUnlessSpelledInSource,
                        findAll(stmt(fileWrite(), isExpansionInMainFile()).bind("found"))),
               *Function->getBody(), Ctx)) {
      Writes.push_back(Found.getNodeAs<Stmt>("found"));
    }
  }
  for (const Stmt *Write : Writes) {
    if (runsOnSomeProcesses(Write, Ctx)) {
      continue;
    }
    GuardsOrWhy Guarded = guardsFor(Write, Ctx, 0);
    if (auto *Why = std::get_if<std::string>(&Guarded)) {
      Result->WhyNot[SM.getExpansionLoc(Write->getBeginLoc())] = *Why;
      continue;
    }
    for (const Stmt *Guard : std::get<0>(Guarded)) {
      Guards.push_back(Guard);
    }
  }
  for (const Stmt *Guard : Guards) {
    bool Inside =
        llvm::any_of(Guards, [&](const Stmt *Other) { return contains(Other, Guard, SM); });
    if (!Inside) {
      Result->Guarded.insert(Guard);
    }
  }
  return Result;
}

namespace {
bool writesFiles(const FunctionDecl *Function, ASTContext &Ctx,
                 llvm::SmallPtrSetImpl<const FunctionDecl *> &Seen) {
  const Stmt *Body = Function->getBody();
  if (!Body) {
    return false;
  }
  if (!match(traverse(TK_IgnoreUnlessSpelledInSource, findAll(fileWrite())), *Body, Ctx).empty()) {
    return true;
  }
  bool Writes = false;
  forEachStmt(Body, [&](const Stmt *S) {
    const FunctionDecl *Definition =
        Writes ? nullptr : definitionInMainFile(S, Ctx.getSourceManager());
    if (Definition && !createsOptimizer(Definition) && Seen.insert(Definition).second) {
      Writes = writesFiles(Definition, Ctx, Seen);
    }
  });
  return Writes;
}
} // namespace

bool writesFiles(const FunctionDecl *Function, ASTContext &Ctx) {
  llvm::SmallPtrSet<const FunctionDecl *, 8> Seen{Function};
  return writesFiles(Function, Ctx, Seen);
}

bool isGuardedWrite(const Stmt *Write, ASTContext &Ctx, std::string &Why) {
  const FileWriteGuards &Guards = AnalysisContext::of(Ctx).fileWrites();
  auto Found = Guards.WhyNot.find(Ctx.getSourceManager().getExpansionLoc(Write->getBeginLoc()));
  if (Found == Guards.WhyNot.end()) {
    return true;
  }
  Why = Found->second;
  return false;
}

} // namespace accel::rewrites
