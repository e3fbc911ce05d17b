//===- AcceleratorParameter.cpp - Helpers that get the accelerator --------===//
#include "analysis/AcceleratorParameter.h"

#include "analysis/AnalysisContext.h"

#include "analysis/SetupFunction.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <functional>
#include <memory>

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

/// One declaration stands for a function and all its redeclarations and instantiations.
const FunctionDecl *canonical(const FunctionDecl *Function) {
  if (!Function) {
    return nullptr;
  }
  if (const FunctionDecl *Pattern = Function->getTemplateInstantiationPattern()) {
    Function = Pattern;
  }
  return Function->getCanonicalDecl();
}

/// The function a call names, also when it is a dependent call in a template whose only
/// candidate is one function (template).
const FunctionDecl *calledFunction(const CallExpr *Call) {
  if (isa<CXXOperatorCallExpr>(Call)) {
    return nullptr; // operators and lambda calls: never given a parameter
  }
  if (const FunctionDecl *Direct = Call->getDirectCallee()) {
    return canonical(Direct);
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
    if (!Function || (Found && canonical(Function) != Found)) {
      return nullptr;
    }
    Found = canonical(Function);
  }
  return Found;
}

struct CallSite {
  const FunctionDecl *Caller; // the function whose body holds the call (a lambda's operator)
  const CallExpr *Call;
};

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

  bool VisitDeclRefExpr(DeclRefExpr *Ref) {
    const auto *Function = dyn_cast<FunctionDecl>(Ref->getDecl());
    if (Function && !CalleeNames.count(Ref)) {
      AddressTaken.try_emplace(canonical(Function), Ref->getLocation());
    }
    return true;
  }

  const SourceManager &SM;
  llvm::SmallVector<const FunctionDecl *, 16> Definitions;
  llvm::DenseMap<const FunctionDecl *, llvm::SmallVector<CallSite, 2>> Calls;
  llvm::DenseMap<const FunctionDecl *, SourceLocation> AddressTaken;

private:
  llvm::SmallVector<const FunctionDecl *, 4> Current;
  llvm::SmallPtrSet<const Expr *, 16> CalleeNames;
};

bool isLambdaOperator(const FunctionDecl *Function) {
  const auto *Method = dyn_cast<CXXMethodDecl>(Function);
  return Method && Method->getParent()->isLambda();
}

bool declaresAnyAccelerator(const FunctionDecl *Function, ASTContext &Ctx) {
  auto Any = varDecl(hasType(isAccelerator()));
  return !match(functionDecl(anyOf(hasDescendant(Any), hasAnyParameter(Any))), *Function, Ctx)
              .empty();
}

} // namespace

std::unique_ptr<AcceleratorParameterAnalysis> analyzeAcceleratorParameters(ASTContext &Ctx) {
  auto Result = std::make_unique<AcceleratorParameterAnalysis>();
  const SourceManager &SM = Ctx.getSourceManager();
  MainFileFunctions Functions(SM);
  Functions.TraverseDecl(Ctx.getTranslationUnitDecl());

  // A caller that has an accelerator of its own (or gets one from accel-accelerator as the
  // setup function), before any parameter is added.
  llvm::DenseMap<const FunctionDecl *, bool> OwnAccelerator;
  auto HasOwnAccelerator = [&](const FunctionDecl *Function) {
    auto [At, Inserted] = OwnAccelerator.try_emplace(Function, false);
    if (Inserted) {
      At->second = !match(functionDecl(declaresAccelerator()), *Function, Ctx).empty();
    }
    return At->second;
  };

  // Candidates: the main file's plain functions and methods without an accelerator.
  llvm::DenseMap<const FunctionDecl *, const FunctionDecl *> Definition; // canonical -> body
  for (const FunctionDecl *Function : Functions.Definitions) {
    if (Function->isMain() || isLambdaOperator(Function) || isa<CXXConstructorDecl>(Function) ||
        isa<CXXDestructorDecl>(Function) || isa<CXXConversionDecl>(Function) ||
        Function->isOverloadedOperator() || Function->isExternC() ||
        Function->isTemplateInstantiation() || declaresAnyAccelerator(Function, Ctx) ||
        HasOwnAccelerator(Function)) {
      continue;
    }
    Definition[canonical(Function)] = Function;
  }

  // Needed: it trains, prints or saves, or calls a function that is needed (a least fixed
  // point).
  llvm::DenseMap<const FunctionDecl *, bool> Trains, Needed;
  for (const auto &[Function, Body] : Definition) {
    // In a template, `loss.backward()` on a dependent `loss` is a call only in the
    // instantiations.
    llvm::SmallVector<const Stmt *, 2> Bodies = {Body->getBody()};
    if (const FunctionTemplateDecl *Template = Body->getDescribedFunctionTemplate()) {
      for (const FunctionDecl *Instance : Template->specializations()) {
        Bodies.push_back(Instance->getBody());
      }
    }
    for (const Stmt *Code : Bodies) {
      Trains[Function] = Trains[Function] || containsBackward(Code);
      Needed[Function] = Needed[Function] || Trains[Function] || writesOutput(Code);
    }
  }
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (const auto &[Callee, Sites] : Functions.Calls) {
      if (!Needed.lookup(Callee)) {
        continue;
      }
      for (const CallSite &Site : Sites) {
        const FunctionDecl *Caller = canonical(Site.Caller);
        if (Definition.count(Caller) && !Needed[Caller]) {
          Needed[Caller] = Changed = true;
        }
      }
    }
  }

  for (const auto &[Function, Body] : Definition) {
    if (!Needed[Function]) {
      continue;
    }
    AcceleratorParameterPlan Plan;
    Plan.Function = Function;
    Plan.Trains = Trains[Function];
    Plan.Receives = true;
    auto Problem = [&](std::string Text) {
      if (Plan.Receives) {
        Plan.Receives = false;
        Plan.Problem = std::move(Text);
      }
    };
    if (const auto *Method = dyn_cast<CXXMethodDecl>(Body); Method && Method->isVirtual()) {
      Problem("it is virtual, and its overrides would not get the parameter");
    }
    if (auto Taken = Functions.AddressTaken.find(Function); Taken != Functions.AddressTaken.end()) {
      Problem("its address is taken on line " +
              std::to_string(SM.getExpansionLineNumber(Taken->second)) +
              ", and calls through it would not pass the accelerator");
    }
    for (const FunctionDecl *Redeclaration : Function->redecls()) {
      SourceLocation Loc = SM.getExpansionLoc(Redeclaration->getLocation());
      if (!SM.isInMainFile(Loc)) {
        Problem("it is also declared in " + SM.getFilename(Loc).str() +
                ", which accel-rewrite does not edit");
      }
    }
    if (!Functions.Calls.count(Function)) {
      // Called from another file, if at all: left alone; its backward calls get their own
      // warnings.
      Plan.Receives = false;
    }
    Result->Plans[Function] = std::move(Plan);
  }

  // Every caller must have the accelerator to pass: drop functions called from one that does
  // not, until nothing changes (a greatest fixed point).
  std::function<bool(const FunctionDecl *)> CallerHasAccelerator = [&](const FunctionDecl *Caller) {
    if (HasOwnAccelerator(Caller)) {
      return true;
    }
    if (auto Plan = Result->Plans.find(canonical(Caller)); Plan != Result->Plans.end()) {
      return Plan->second.Receives;
    }
    // A [&] lambda sees the accelerator of the function it is defined in.
    const auto *Method = dyn_cast<CXXMethodDecl>(Caller);
    if (Method && Method->getParent()->isLambda() &&
        Method->getParent()->getLambdaCaptureDefault() == LCD_ByRef) {
      if (const auto *Outer = dyn_cast<FunctionDecl>(Method->getParent()->getDeclContext())) {
        return CallerHasAccelerator(Outer);
      }
    }
    return false;
  };
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (auto &[Function, Plan] : Result->Plans) {
      if (!Plan.Receives) {
        continue;
      }
      for (const CallSite &Site : Functions.Calls[Function]) {
        if (!CallerHasAccelerator(Site.Caller)) {
          Plan.Receives = false;
          Plan.Problem = "it is called from " + functionLabel(Site.Caller) +
                         ", which has no accelerator to pass";
          Changed = true;
          break;
        }
      }
    }
  }
  for (const auto &[Function, Sites] : Functions.Calls) {
    for (const CallSite &Site : Sites) {
      Result->Calls[Function].push_back(Site.Call);
      Result->CallerOf[Site.Call] = Site.Caller;
    }
  }
  for (const auto &[Function, Plan] : Result->Plans) {
    if (Plan.Receives) {
      for (const CallSite &Site : Functions.Calls[Function]) {
        Result->PassingCalls[Site.Call] = Function;
      }
    }
  }
  return Result;
}

const AcceleratorParameterPlan *acceleratorParameterPlan(const FunctionDecl *Function,
                                                         ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  auto Found = Result.Plans.find(canonical(Function));
  return Found == Result.Plans.end() ? nullptr : &Found->second;
}

bool receivesAcceleratorParameter(const FunctionDecl *Function, ASTContext &Ctx) {
  const AcceleratorParameterPlan *Plan = acceleratorParameterPlan(Function, Ctx);
  return Plan && Plan->Receives;
}

const FunctionDecl *callPassingAccelerator(const CallExpr *Call, ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  auto Found = Result.PassingCalls.find(Call);
  return Found == Result.PassingCalls.end() ? nullptr : Found->second;
}

llvm::ArrayRef<const CallExpr *> callsInMainFile(const FunctionDecl *Function, ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  auto Found = Result.Calls.find(canonical(Function));
  if (Found == Result.Calls.end()) {
    return {};
  }
  return Found->second;
}

const FunctionDecl *callerOf(const CallExpr *Call, ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  return Result.CallerOf.lookup(Call);
}

llvm::SmallVector<const FunctionDecl *, 8> calledFunctions(ASTContext &Ctx) {
  llvm::SmallVector<const FunctionDecl *, 8> Functions;
  for (const auto &[Function, Calls] : AnalysisContext::of(Ctx).acceleratorParameters().Calls) {
    Functions.push_back(Function);
  }
  return Functions;
}

bool isStdoutPrint(const Stmt *S) {
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(S)) {
    return qualifiedName(Ref->getDecl()) == "std::cout";
  }
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  return Callee && Callee->isExternC() && Callee->getDeclName().isIdentifier() &&
         Callee->getName() == "printf";
}

bool writesOutput(const Stmt *S) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) {
    const auto *Call = dyn_cast<CallExpr>(Child);
    Found = Found || isStdoutPrint(Child) ||
            (Call && qualifiedName(Call->getDirectCallee()) == "torch::save");
  });
  return Found;
}

} // namespace accel::rewrites
