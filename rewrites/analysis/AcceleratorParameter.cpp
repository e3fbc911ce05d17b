//===- AcceleratorParameter.cpp - Helpers that get the accelerator --------===//
#include "analysis/AcceleratorParameter.h"

#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Templates.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
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

const FunctionDecl *canonical(const FunctionDecl *Function) { return canonicalFunction(Function); }

bool isLambdaOperator(const FunctionDecl *Function) {
  const auto *Method = dyn_cast<CXXMethodDecl>(Function);
  return Method && Method->getParent()->isLambda();
}

bool declaresAnyAccelerator(const FunctionDecl *Function, ASTContext &Ctx) {
  auto Any = varDecl(hasType(isAccelerator()));
  return !match(functionDecl(anyOf(hasDescendant(Any), hasAnyParameter(Any))), *Function, Ctx)
              .empty();
}

/// Functions that never get the parameter, whatever they do: main, lambdas, constructors,
/// destructors, conversions, operators, C functions, template instances (their template does).
bool neverReceives(const FunctionDecl *Function) {
  return Function->isMain() || isLambdaOperator(Function) || isa<CXXConstructorDecl>(Function) ||
         isa<CXXDestructorDecl>(Function) || isa<CXXConversionDecl>(Function) ||
         Function->isOverloadedOperator() || Function->isExternC() ||
         Function->isTemplateInstantiation();
}

/// Why a lambda cannot take `&accelerator` among its captures (empty when it can): a lambda
/// with a capture has no conversion to a function pointer, and one held in a static variable
/// would keep the reference of the first call.
std::string whyLambdaCannotCapture(const CXXRecordDecl *Lambda, const CallGraph &Functions,
                                   ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  if (auto Converted = Functions.ConvertedLambdas.find(Lambda);
      Converted != Functions.ConvertedLambdas.end()) {
    return "it is converted to a function pointer, as on line " +
           std::to_string(SM.getExpansionLineNumber(Converted->second));
  }
  for (const auto &Found :
       match(functionDecl(forEachDescendant(
                 varDecl(unless(hasLocalStorage()),
                         hasInitializer(ignoringImplicit(lambdaExpr().bind("lambda")))))),
             *cast<FunctionDecl>(Lambda->getDeclContext()), Ctx)) {
    if (Found.getNodeAs<LambdaExpr>("lambda")->getLambdaClass() == Lambda) {
      return "it is held in a static variable";
    }
  }
  return "";
}

} // namespace

std::unique_ptr<AcceleratorParameterAnalysis> analyzeAcceleratorParameters(ASTContext &Ctx) {
  auto Result = std::make_unique<AcceleratorParameterAnalysis>();
  const SourceManager &SM = Ctx.getSourceManager();
  const CallGraph &Functions = AnalysisContext::of(Ctx).callGraph();

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
    if (neverReceives(Function) || declaresAnyAccelerator(Function, Ctx) ||
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
    for (const FunctionDecl *Instance : instantiationsOf(Body)) {
      Bodies.push_back(Instance->getBody());
    }
    for (const Stmt *Code : Bodies) {
      Trains[Function] = Trains[Function] || containsBackward(Code);
      Needed[Function] =
          Needed[Function] || Trains[Function] || writesOutput(Code) || readsStatistic(Code, Ctx);
    }
  }
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (const auto &[Callee, Sites] : Functions.Sites) {
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
    if (!Functions.Sites.count(Function)) {
      // Called from another file, if at all: left alone; its backward calls get their own
      // warnings.
      Plan.Receives = false;
    }
    Result->Plans[Function] = std::move(Plan);
  }

  // Every caller must have the accelerator to pass: drop functions called from one that does
  // not, until nothing changes (a greatest fixed point). A [&] lambda sees the accelerator of
  // the function it is defined in; another lambda gets it as a capture unless it cannot take
  // one (whyLambdaCannotCapture).
  std::function<bool(const FunctionDecl *)> CallerHasAccelerator = [&](const FunctionDecl *Caller) {
    if (HasOwnAccelerator(Caller)) {
      return true;
    }
    if (auto Plan = Result->Plans.find(canonical(Caller)); Plan != Result->Plans.end()) {
      return Plan->second.Receives;
    }
    const auto *Method = dyn_cast<CXXMethodDecl>(Caller);
    if (!Method || !Method->getParent()->isLambda()) {
      return false;
    }
    const CXXRecordDecl *Lambda = Method->getParent();
    const auto *Outer = dyn_cast<FunctionDecl>(Lambda->getDeclContext());
    return Outer &&
           (Lambda->getLambdaCaptureDefault() == LCD_ByRef ||
            whyLambdaCannotCapture(Lambda, Functions, Ctx).empty()) &&
           CallerHasAccelerator(Outer);
  };
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (auto &[Function, Plan] : Result->Plans) {
      if (!Plan.Receives) {
        continue;
      }
      for (const CallSite &Site : Functions.sitesOf(Function)) {
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
  for (const auto &[Function, Plan] : Result->Plans) {
    if (Plan.Receives) {
      for (const CallSite &Site : Functions.sitesOf(Function)) {
        Result->PassingCalls[Site.Call] = Function;
      }
    } else if (!Plan.Trains && !Plan.Problem.empty() && writesOutput(Plan.Function->getBody())) {
      // A helper that prints or saves (cannotPassRule warns about one that trains).
      Result->PrintingWithoutAccelerator[Plan.Function] =
          "the accelerator cannot be passed to " + functionLabel(Plan.Function) + ": " +
          Plan.Problem + "; print where it is called, with accelerator.print()";
    }
  }

  // Lambdas without a by-reference default that print, save or pass the accelerator on,
  // where the accelerator is. Those that train are the training plans' (a step helper).
  llvm::DenseSet<const FunctionDecl *> PassesAccelerator;
  for (const auto &[Call, Callee] : Result->PassingCalls) {
    PassesAccelerator.insert(Functions.CallerOf.lookup(Call));
  }
  for (const LambdaExpr *Lambda : Functions.Lambdas) {
    const CXXRecordDecl *Class = Lambda->getLambdaClass();
    const auto *Outer = dyn_cast<FunctionDecl>(Class->getDeclContext());
    const Stmt *Body = Lambda->getBody();
    if (Lambda->getCaptureDefault() == LCD_ByRef || !Outer || containsBackward(Body) ||
        !(writesOutput(Body) || PassesAccelerator.count(Lambda->getCallOperator())) ||
        !CallerHasAccelerator(Outer)) {
      continue;
    }
    if (std::string Why = whyLambdaCannotCapture(Class, Functions, Ctx); Why.empty()) {
      Result->CapturingLambdas.insert(Class);
    } else {
      Result->PrintingWithoutAccelerator[Lambda->getCallOperator()] =
          "a lambda cannot capture the accelerator when " + Why +
          "; print where it is called, with accelerator.print()";
    }
  }

  // Constructors and destructors that print, of a class a function with the accelerator
  // makes an object of (a scoped timer): they cannot get a parameter.
  llvm::DenseMap<const CXXRecordDecl *, const FunctionDecl *> MadeWithAccelerator;
  for (const FunctionDecl *Function : Functions.Definitions) {
    if (!CallerHasAccelerator(Function)) {
      continue;
    }
    for (const auto &Found :
         match(functionDecl(forEachDescendant(varDecl(hasLocalStorage()).bind("var"))), *Function,
               Ctx)) {
      const auto *Var = Found.getNodeAs<VarDecl>("var");
      if (const CXXRecordDecl *Class = Var->getType()->getAsCXXRecordDecl()) {
        MadeWithAccelerator.try_emplace(Class->getCanonicalDecl(), Function);
      }
    }
  }
  for (const FunctionDecl *Function : Functions.Definitions) {
    const auto *Special = dyn_cast<CXXMethodDecl>(Function);
    if (!Special || !isa<CXXConstructorDecl, CXXDestructorDecl>(Special) ||
        !writesOutput(Special->getBody())) {
      continue;
    }
    if (const FunctionDecl *Maker =
            MadeWithAccelerator.lookup(Special->getParent()->getCanonicalDecl())) {
      Result->PrintingWithoutAccelerator[canonical(Special)] =
          std::string(isa<CXXDestructorDecl>(Special) ? "a destructor" : "a constructor") +
          " cannot get the accelerator, and " + functionLabel(Maker) + " makes a '" +
          Special->getParent()->getName().str() +
          "'; give it a flag set from accelerator.is_main_process() where it is made, and "
          "print only when the flag is set";
    }
  }
  return Result;
}

bool capturesAccelerator(const FunctionDecl *Function, ASTContext &Ctx) {
  const auto *Method = dyn_cast<CXXMethodDecl>(Function);
  if (!Method || !Method->getParent()->isLambda() ||
      AnalysisContext::of(Ctx).computingAcceleratorParameters()) {
    return false;
  }
  return AnalysisContext::of(Ctx).acceleratorParameters().CapturingLambdas.count(
      Method->getParent());
}

std::string printsWithoutAccelerator(const FunctionDecl *Function, ASTContext &Ctx) {
  if (AnalysisContext::of(Ctx).computingAcceleratorParameters()) {
    return "";
  }
  const auto &Printing =
      AnalysisContext::of(Ctx).acceleratorParameters().PrintingWithoutAccelerator;
  auto Found = Printing.find(canonical(Function));
  if (Found == Printing.end()) {
    Found = Printing.find(Function);
  }
  return Found == Printing.end() ? "" : Found->second;
}

const AcceleratorParameterPlan *acceleratorParameterPlan(const FunctionDecl *Function,
                                                         ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  auto Found = Result.Plans.find(canonical(Function));
  return Found == Result.Plans.end() ? nullptr : &Found->second;
}

bool receivesAcceleratorParameter(const FunctionDecl *Function, ASTContext &Ctx) {
  if (neverReceives(canonical(Function))) {
    return false;
  }
  if (AnalysisContext::of(Ctx).computingAcceleratorParameters()) {
    // Asked by the analysis itself (whether a statistic's loop is a sharded one): a function
    // that trains gets the parameter, as the analysis will decide unless its own problems
    // (virtual, address taken, declared in a header) stop it.
    const FunctionDecl *Definition = Function->getDefinition();
    return Definition && Definition->getBody() && trains(Definition->getBody(), Ctx);
  }
  const AcceleratorParameterPlan *Plan = acceleratorParameterPlan(Function, Ctx);
  return Plan && Plan->Receives;
}

const FunctionDecl *callPassingAccelerator(const CallExpr *Call, ASTContext &Ctx) {
  const AcceleratorParameterAnalysis &Result = AnalysisContext::of(Ctx).acceleratorParameters();
  auto Found = Result.PassingCalls.find(Call);
  return Found == Result.PassingCalls.end() ? nullptr : Found->second;
}

namespace {
/// `stdout` as a C stdio call's stream argument.
bool isStdoutStream(const Expr *E) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E ? E->IgnoreParenImpCasts() : nullptr);
  return Ref && Ref->getDecl()->getDeclName().isIdentifier() &&
         Ref->getDecl()->getName() == "stdout";
}
} // namespace

StdoutCall stdoutCall(const Stmt *S) {
  const auto *Call = dyn_cast_or_null<CallExpr>(S);
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || !Callee->isExternC() || !Callee->getDeclName().isIdentifier()) {
    return StdoutCall::None;
  }
  llvm::StringRef Name = Callee->getName();
  const unsigned Args = Call->getNumArgs();
  if (Name == "printf") {
    return StdoutCall::Printf;
  }
  if (Name == "puts" && Args == 1) {
    return StdoutCall::Puts;
  }
  if (Name == "putchar" && Args == 1) {
    return StdoutCall::Putchar;
  }
  if (Name == "fprintf" && Args >= 2 && isStdoutStream(Call->getArg(0))) {
    return StdoutCall::FprintfStdout;
  }
  if ((Name == "fputs" || Name == "fputc" || Name == "putc") && Args == 2 &&
      isStdoutStream(Call->getArg(1))) {
    return Name == "fputs" ? StdoutCall::FputsStdout : StdoutCall::FputcStdout;
  }
  return StdoutCall::None;
}

bool isStdoutPrint(const Stmt *S) {
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(S)) {
    return qualifiedName(Ref->getDecl()) == "std::cout";
  }
  return stdoutCall(S) != StdoutCall::None;
}

bool readsStatistic(const Stmt *S, ASTContext &Ctx) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) {
    std::string Op;
    const auto *Ref = dyn_cast<DeclRefExpr>(Child);
    Found = Found || (Ref && readsRunningStatistic(Ref, Ctx, Op));
  });
  return Found;
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
