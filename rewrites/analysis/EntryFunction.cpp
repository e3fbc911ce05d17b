//===- EntryFunction.cpp - main declares the Accelerator ------------------===//
#include "analysis/EntryFunction.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/CallGraph.h"
#include "analysis/FileWrites.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/DeclCXX.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace clang;

namespace accel::rewrites {
namespace {

/// The functions that call Function (canonical declarations; a call in a lambda counts for the
/// function the lambda is in).
llvm::SmallPtrSet<const FunctionDecl *, 2> callersOf(const FunctionDecl *Function,
                                                     ASTContext &Ctx) {
  llvm::SmallPtrSet<const FunctionDecl *, 2> Callers;
  for (const CallSite &Site :
       AnalysisContext::of(Ctx).callGraph().sitesOf(canonicalFunction(Function))) {
    const FunctionDecl *Caller = Site.Caller;
    while (const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Caller)) {
      if (!Method->getParent()->isLambda()) {
        break;
      }
      Caller = dyn_cast<FunctionDecl>(Method->getParent()->getDeclContext());
    }
    if (Caller) {
      Callers.insert(canonicalFunction(Caller));
    }
  }
  return Callers;
}

bool hasAccelerator(const FunctionDecl *Function) {
  for (const ParmVarDecl *Param : Function->parameters()) {
    if (isAcceleratorType(Param->getType().getNonReferenceType())) {
      return true;
    }
  }
  bool Found = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
      for (const Decl *D : Decls->decls()) {
        const auto *Var = dyn_cast<VarDecl>(D);
        Found = Found || (Var && isAcceleratorType(Var->getType().getNonReferenceType()));
      }
    }
  });
  return Found;
}

/// Whether Function is called from Main only, directly or through functions and methods of the
/// main file that are called so themselves and have no accelerator nor optimizer of their own
/// (`main` -> `Experiment(cfg)` -> `trainer.train_epoch(*loader)`, or `trainer.fit()` ->
/// `train_epoch`): what main's Accelerator reaches by the parameters accel-accelerator adds.
bool reachedOnlyFromMain(const FunctionDecl *Function, const FunctionDecl *Main, ASTContext &Ctx,
                         int Depth = 0) {
  const auto Callers = callersOf(Function, Ctx);
  if (Callers.empty() || Depth > 3) {
    return false;
  }
  const SourceManager &SM = Ctx.getSourceManager();
  for (const FunctionDecl *Caller : Callers) {
    if (Caller == Main->getCanonicalDecl()) {
      continue;
    }
    const FunctionDecl *Definition = Caller->getDefinition();
    // A method between (`trainer.fit(...)` calling `train_epoch`) takes the parameter like a
    // function, unless it is virtual, a constructor or an operator.
    const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Definition);
    if (!Definition ||
        (Method && (Method->isVirtual() || isa<CXXConstructorDecl>(Method) ||
                    Method->isOverloadedOperator() || Method->getParent()->isLambda())) ||
        (!Method && Definition->isTemplated()) ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(Definition->getLocation())) ||
        hasAccelerator(Definition) || createsOptimizer(Definition) ||
        !reachedOnlyFromMain(Definition, Main, Ctx, Depth + 1)) {
      return false;
    }
  }
  return true;
}

} // namespace

std::unique_ptr<EntryHosting> analyzeEntryHosting(ASTContext &Ctx) {
  auto Result = std::make_unique<EntryHosting>();
  const SourceManager &SM = Ctx.getSourceManager();
  const FunctionDecl *Main = nullptr;
  for (const Decl *D : Ctx.getTranslationUnitDecl()->decls()) {
    const auto *Function = dyn_cast<FunctionDecl>(D);
    if (Function && Function->isMain() && Function->doesThisDeclarationHaveABody() &&
        SM.isWrittenInMainFile(SM.getExpansionLoc(Function->getLocation()))) {
      Main = Function;
    }
  }
  // main that has an Accelerator, or sets up training itself, keeps it where it is.
  if (!Main || hasAccelerator(Main) || createsOptimizer(Main)) {
    return Result;
  }
  llvm::SmallPtrSet<const FunctionDecl *, 4> Setups;
  bool TrainsMembers = false;
  forEachStmt(Main->getBody(), [&](const Stmt *S) {
    const auto *Call = dyn_cast<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    const FunctionDecl *Definition = Callee ? Callee->getDefinition() : nullptr;
    // A trainer class's method that prepares its members gets the accelerator from main, which
    // also prepares the loader main hands it: its own Accelerator could reach neither.
    if (Definition && isa<CXXMethodDecl>(Definition)) {
      return; // trainer classes: below
    }
    // Functions of this file only, function templates included (`template <typename Loader>
    // void train(Net &model, Loader &loader)`, the loader's type deduced): a member or a
    // lambda keeps its own.
    const FunctionDecl::TemplatedKind Kind =
        Definition ? Definition->getTemplatedKind() : FunctionDecl::TK_NonTemplate;
    if (!Definition || isa<CXXMethodDecl>(Definition) ||
        (Kind != FunctionDecl::TK_NonTemplate &&
         Kind != FunctionDecl::TK_FunctionTemplateSpecialization) ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(Definition->getLocation())) ||
        hasAccelerator(Definition) || !createsOptimizer(Definition)) {
      return;
    }
    for (const FunctionDecl *Declaration : Definition->redecls()) {
      if (!SM.isWrittenInMainFile(SM.getExpansionLoc(Declaration->getLocation()))) {
        return; // a header declares it: its signature cannot change here
      }
    }
    const auto Callers = callersOf(Definition, Ctx);
    if (Callers.size() == 1 && *Callers.begin() == Main->getCanonicalDecl()) {
      Setups.insert(Definition->getCanonicalDecl());
      // A template: its pattern and every instantiation, which the rules see one by one.
      if (const FunctionTemplateDecl *Template = Definition->getPrimaryTemplate()) {
        Setups.insert(Template->getTemplatedDecl()->getCanonicalDecl());
        for (const FunctionDecl *Instance : Template->specializations()) {
          Setups.insert(Instance->getCanonicalDecl());
        }
      }
    }
  });
  // A trainer class's method that prepares its members gets the accelerator from main (through
  // the functions between), which also prepares a loader main hands it: its own Accelerator
  // could reach neither.
  for (const FunctionDecl *Definition : AnalysisContext::of(Ctx).callGraph().Definitions) {
    if (!isa<CXXMethodDecl>(Definition)) {
      continue;
    }
    const MemberTraining &Members = AnalysisContext::of(Ctx).memberTraining(Definition);
    if (Members.sound() && reachedOnlyFromMain(Definition, Main, Ctx)) {
      Setups.insert(Members.Method->getCanonicalDecl());
      TrainsMembers = true;
    }
  }
  // A loader main makes and hands to such a function is prepared in main, which needs the
  // Accelerator for it (the function's own would not reach it).
  bool HandsLoader = false;
  forEachStmt(Main->getBody(), [&](const Stmt *S) {
    const auto *Declaration = dyn_cast<DeclStmt>(S);
    if (!Declaration) {
      return;
    }
    for (const Decl *D : Declaration->decls()) {
      const auto *Loader = dyn_cast<VarDecl>(D);
      if (!Loader || !makeDataLoaderInit(Loader)) {
        continue;
      }
      for (const LoaderHandOff &HandOff : loaderHandOffs(Loader, Ctx)) {
        HandsLoader = HandsLoader || (HandOff.Callee && HandOff.Trains &&
                                      Setups.count(HandOff.Callee->getCanonicalDecl()));
      }
    }
  });
  if (Setups.empty() || (!TrainsMembers && !HandsLoader && !writesOutput(Main->getBody()) &&
                         !writesFiles(Main, Ctx))) {
    return Result;
  }
  Result->Main = Main->getCanonicalDecl();
  Result->Hosted = std::move(Setups);
  return Result;
}

} // namespace accel::rewrites
