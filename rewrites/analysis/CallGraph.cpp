//===- CallGraph.cpp - Who calls what in the main file --------------------===//
#include "analysis/CallGraph.h"

#include "analysis/AnalysisContext.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace clang;

namespace accel::rewrites {

const FunctionDecl *canonicalFunction(const FunctionDecl *Function) {
  if (!Function) {
    return nullptr;
  }
  if (const FunctionDecl *Pattern = Function->getTemplateInstantiationPattern()) {
    Function = Pattern;
  }
  return Function->getCanonicalDecl();
}

namespace {

/// The function a call names, also when it is a dependent call in a template whose only
/// candidate is one function (template).
const FunctionDecl *calledFunction(const CallExpr *Call) {
  if (isa<CXXOperatorCallExpr>(Call)) {
    return nullptr; // operators and lambda calls: never given a parameter
  }
  if (const FunctionDecl *Direct = Call->getDirectCallee()) {
    return canonicalFunction(Direct);
  }
  const auto *Overloads = dyn_cast<OverloadExpr>(Call->getCallee()->IgnoreParenImpCasts());
  if (!Overloads) {
    return nullptr;
  }
  const FunctionDecl *Found = nullptr;
  for (const NamedDecl *Candidate : Overloads->decls()) {
    const NamedDecl *Underlying = Candidate->getUnderlyingDecl();
    const FunctionDecl *Function = dyn_cast<FunctionDecl>(Underlying);
    if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Underlying)) {
      Function = Template->getTemplatedDecl();
    }
    if (!Function || (Found && canonicalFunction(Function) != Found)) {
      return nullptr;
    }
    Found = canonicalFunction(Function);
  }
  return Found;
}

/// Calls, non-call references and per-function facts of the main file's code (template
/// patterns, not instantiations).
class MainFileFunctions : public RecursiveASTVisitor<MainFileFunctions> {
public:
  explicit MainFileFunctions(const SourceManager &SM) : SM(SM) {}

  bool shouldVisitTemplateInstantiations() const { return false; }
  bool shouldVisitImplicitCode() const { return false; }

  bool TraverseDecl(Decl *D) {
    if (!D) {
      return true;
    }
    if (!isa<TranslationUnitDecl>(D) && !SM.isInMainFile(SM.getExpansionLoc(D->getLocation()))) {
      return true; // headers: their functions are not ours to change
    }
    const auto *Function = dyn_cast<FunctionDecl>(D);
    if (Function && Function->doesThisDeclarationHaveABody()) {
      Definitions.push_back(Function);
      Current.push_back(Function);
      bool Result = RecursiveASTVisitor::TraverseDecl(D);
      Current.pop_back();
      return Result;
    }
    return RecursiveASTVisitor::TraverseDecl(D);
  }

  bool TraverseLambdaExpr(LambdaExpr *Lambda, DataRecursionQueue * = nullptr) {
    Lambdas.push_back(Lambda);
    Current.push_back(Lambda->getCallOperator());
    bool Result = RecursiveASTVisitor::TraverseLambdaExpr(Lambda);
    Current.pop_back();
    return Result;
  }

  bool VisitCallExpr(CallExpr *Call) {
    if (Current.empty()) {
      return true;
    }
    if (const FunctionDecl *Callee = calledFunction(Call)) {
      Calls[Callee].push_back({Current.back(), Call});
      CalleeNames.insert(Call->getCallee()->IgnoreParenImpCasts());
    }
    return true;
  }

  // A lambda converted to a function pointer (passed to a C callback, `+[] {}`): the
  // conversion function called on it.
  bool VisitMemberExpr(MemberExpr *Member) {
    const auto *Conversion = dyn_cast<CXXConversionDecl>(Member->getMemberDecl());
    if (Conversion && Conversion->getParent()->isLambda()) {
      ConvertedLambdas.try_emplace(Conversion->getParent(), Member->getBase()->getBeginLoc());
    }
    return true;
  }

  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    const auto *Function = dyn_cast<FunctionDecl>(Ref->getDecl());
    if (Function && !CalleeNames.count(Ref)) {
      AddressTaken.try_emplace(canonicalFunction(Function), Ref->getLocation());
    }
    return true;
  }

  const SourceManager &SM;
  llvm::SmallVector<const FunctionDecl *, 16> Definitions;
  llvm::DenseMap<const FunctionDecl *, llvm::SmallVector<CallSite, 2>> Calls;
  llvm::DenseMap<const FunctionDecl *, SourceLocation> AddressTaken;
  llvm::SmallVector<const LambdaExpr *, 8> Lambdas;
  llvm::DenseMap<const CXXRecordDecl *, SourceLocation> ConvertedLambdas;

private:
  llvm::SmallVector<const FunctionDecl *, 4> Current;
  llvm::SmallPtrSet<const Expr *, 16> CalleeNames;
};

} // namespace

std::unique_ptr<CallGraph> analyzeCallGraph(ASTContext &Ctx) {
  MainFileFunctions Functions(Ctx.getSourceManager());
  Functions.TraverseDecl(Ctx.getTranslationUnitDecl());
  auto Result = std::make_unique<CallGraph>();
  Result->Definitions = std::move(Functions.Definitions);
  Result->AddressTaken = std::move(Functions.AddressTaken);
  Result->Lambdas = std::move(Functions.Lambdas);
  Result->ConvertedLambdas = std::move(Functions.ConvertedLambdas);
  for (const auto &[Function, Sites] : Functions.Calls) {
    for (const CallSite &Site : Sites) {
      Result->Calls[Function].push_back(Site.Call);
      Result->CallerOf[Site.Call] = Site.Caller;
    }
  }
  Result->Sites = std::move(Functions.Calls);
  return Result;
}

llvm::ArrayRef<CallSite> CallGraph::sitesOf(const FunctionDecl *Function) const {
  auto Found = Sites.find(Function);
  return Found == Sites.end() ? llvm::ArrayRef<CallSite>()
                              : llvm::ArrayRef<CallSite>(Found->second);
}

llvm::ArrayRef<const CallExpr *> callsInMainFile(const FunctionDecl *Function, ASTContext &Ctx) {
  const CallGraph &Graph = AnalysisContext::of(Ctx).callGraph();
  auto Found = Graph.Calls.find(canonicalFunction(Function));
  if (Found == Graph.Calls.end()) {
    return {};
  }
  return Found->second;
}

const FunctionDecl *callerOf(const CallExpr *Call, ASTContext &Ctx) {
  return AnalysisContext::of(Ctx).callGraph().CallerOf.lookup(Call);
}

llvm::SmallVector<const FunctionDecl *, 8> calledFunctions(ASTContext &Ctx) {
  llvm::SmallVector<const FunctionDecl *, 8> Functions;
  for (const auto &[Function, Calls] : AnalysisContext::of(Ctx).callGraph().Calls) {
    Functions.push_back(Function);
  }
  return Functions;
}

} // namespace accel::rewrites
