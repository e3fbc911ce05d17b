//===- EntryFunction.cpp - main declares the Accelerator ------------------===//
#include "analysis/EntryFunction.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "llvm/ADT/DenseMap.h"

using namespace clang;

namespace accel::rewrites {
namespace {

/// Who calls whom among the main file's functions (canonical declarations).
class CallGraph : public RecursiveASTVisitor<CallGraph> {
public:
  explicit CallGraph(const SourceManager &SM) : SM(SM) {}

  bool TraverseFunctionDecl(FunctionDecl *Function) {
    if (!Function->doesThisDeclarationHaveABody() ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(Function->getLocation()))) {
      return true;
    }
    const FunctionDecl *Outer = Current;
    Current = Function->getCanonicalDecl();
    RecursiveASTVisitor::TraverseFunctionDecl(Function);
    Current = Outer;
    return true;
  }
  bool TraverseCXXMethodDecl(CXXMethodDecl *Method) {
    return TraverseFunctionDecl(Method); // a member function's calls are calls too
  }
  bool VisitCallExpr(CallExpr *Call) {
    if (const FunctionDecl *Callee = Call->getDirectCallee(); Callee && Current) {
      Callers[Callee->getCanonicalDecl()].insert(Current);
    }
    return true;
  }

  const SourceManager &SM;
  const FunctionDecl *Current = nullptr;
  llvm::DenseMap<const FunctionDecl *, llvm::SmallPtrSet<const FunctionDecl *, 2>> Callers;
};

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

/// It creates an optimizer: it sets up training (SetupFunction.h's setupFunction()).
bool createsOptimizer(const FunctionDecl *Function) {
  bool Found = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
      for (const Decl *D : Decls->decls()) {
        const auto *Var = dyn_cast<VarDecl>(D);
        Found = Found || (Var && isOptimizerType(Var->getType()));
      }
    }
  });
  return Found;
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
  CallGraph Graph(SM);
  Graph.TraverseDecl(Ctx.getTranslationUnitDecl());
  llvm::SmallPtrSet<const FunctionDecl *, 4> Setups;
  bool TrainsMembers = false;
  forEachStmt(Main->getBody(), [&](const Stmt *S) {
    const auto *Call = dyn_cast<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    const FunctionDecl *Definition = Callee ? Callee->getDefinition() : nullptr;
    // A trainer class's method that prepares its members gets the accelerator from main, which
    // also prepares the loader main hands it: its own Accelerator could reach neither.
    if (Definition && isa<CXXMethodDecl>(Definition)) {
      const MemberTraining &Members = AnalysisContext::of(Ctx).memberTraining(Definition);
      const auto &Callers = Graph.Callers[Callee->getCanonicalDecl()];
      if (Members.sound() && Callers.size() == 1 && *Callers.begin() == Main->getCanonicalDecl()) {
        Setups.insert(Members.Method->getCanonicalDecl());
        TrainsMembers = true;
      }
      return;
    }
    // Plain functions of this file only: a template, a member or a lambda keeps its own.
    if (!Definition || isa<CXXMethodDecl>(Definition) ||
        Definition->getTemplatedKind() != FunctionDecl::TK_NonTemplate ||
        !SM.isWrittenInMainFile(SM.getExpansionLoc(Definition->getLocation())) ||
        hasAccelerator(Definition) || !createsOptimizer(Definition)) {
      return;
    }
    for (const FunctionDecl *Declaration : Definition->redecls()) {
      if (!SM.isWrittenInMainFile(SM.getExpansionLoc(Declaration->getLocation()))) {
        return; // a header declares it: its signature cannot change here
      }
    }
    const auto &Callers = Graph.Callers[Definition->getCanonicalDecl()];
    if (Callers.size() == 1 && *Callers.begin() == Main->getCanonicalDecl()) {
      Setups.insert(Definition->getCanonicalDecl());
    }
  });
  if (Setups.empty() || (!TrainsMembers && !writesOutput(Main->getBody()))) {
    return Result;
  }
  Result->Main = Main->getCanonicalDecl();
  Result->Hosted = std::move(Setups);
  return Result;
}

} // namespace accel::rewrites
