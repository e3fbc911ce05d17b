//===- AcceleratorRule.cpp - accel-accelerator ----------------------------===//
//
// `accelerate::Accelerator accelerator;` as the first statement of the function that sets up
// training (the one creating an optimizer), which the other rules' edits refer to; and, for
// helper functions that train, print or save (utils/AcceleratorParameter.h), a first parameter
// `accelerate::Accelerator &accelerator` and `accelerator` as the first argument of each call.
// See docs/rules/accel-accelerator.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/Devices.h"
#include "analysis/EntryFunction.h"
#include "analysis/SetupFunction.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/Stmt.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

namespace {

AST_MATCHER(CallExpr, passesAccelerator) {
  return callPassingAccelerator(&Node, Finder->getASTContext()) != nullptr;
}
AST_MATCHER(LambdaExpr, getsAcceleratorCapture) {
  return capturesAccelerator(Node.getCallOperator(), Finder->getASTContext());
}
AST_MATCHER(FunctionDecl, trainsWithoutAccelerator) {
  const AcceleratorParameterPlan *Plan = acceleratorParameterPlan(&Node, Finder->getASTContext());
  return Plan && Plan->Trains && !Plan->Receives && !Plan->Problem.empty();
}

constexpr llvm::StringLiteral ParameterExplanation =
    "the accelerator is passed in as the first parameter, so that the training steps and "
    "prints in this function go through it as in the function that sets up training";

Rule declarationRule() {
  auto AnyAccelerator = varDecl(hasType(isAccelerator()));
  // The setup function, or main when it declares the Accelerator for the setup functions it
  // calls (analysis/EntryFunction.h).
  auto Setup =
      functionDecl(
          isExpansionInMainFile(), unless(isInstantiated()),
          anyOf(allOf(setupFunction(), unless(hostedByEntry())), hostsAcceleratorOfSetups()),
          unless(hasDescendant(AnyAccelerator)), unless(hasAnyParameter(AnyAccelerator)),
          hasBody(compoundStmt(hasAnySubstatement(stmt().bind("first")))))
          .bind("function");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Body =
        cast<CompoundStmt>(Match.Nodes.getNodeAs<FunctionDecl>("function")->getBody());
    SourceLocation First = Body->body_front()->getBeginLoc();
    llvm::SmallVector<Edit, 1> Result;
    if (First.isMacroID()) {
      return Result;
    }
    SourceLocation At = lineStartBefore(First, *Match.SourceManager);
    // On a line of its own, indented like the statement after it; beside that statement when
    // it shares its line with other code (the user's lines are never re-flowed).
    std::string Declaration =
        namesOnlyTheCpu(*Match.Context)
            ? "accelerate::Accelerator accelerator(accelerate::Options::on_cpu());"
            : "accelerate::Accelerator accelerator;";
    Result.push_back(insertionAt(At, Declaration + (At == First ? " " : "\n")));
    return Result;
  };
  return makeRule(Setup, Edits, finding(Finding::Rewrite, "first", [](const MatchResult &Match) {
                    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
                    return "the Accelerator sets up the processes of this run; " +
                           functionLabel(Function) +
                           (AnalysisContext::of(*Match.Context).entryHosting().Main ==
                                    Function->getCanonicalDecl()
                                ? " calls the functions that set up training, and passes it "
                                  "to them"
                                : " creates the optimizer") +
                           (namesOnlyTheCpu(*Match.Context)
                                ? "; this program names no device but the CPU, so the run "
                                  "stays on the CPU (Options::on_cpu()): the tensors it "
                                  "creates would otherwise meet a model moved to the GPU. To "
                                  "train on GPUs, choose the device as "
                                  "`torch::cuda::is_available() ? torch::kCUDA : "
                                  "torch::kCPU` and move each tensor the model sees to it"
                                : "");
                  }));
}

/// Each declaration of a helper that gets the accelerator: the parameter, first.
Rule parameterRule() {
  auto Helper =
      functionDecl(isExpansionInMainFile(), unless(isInstantiated()), receivesAccelerator())
          .bind("function");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
    llvm::SmallVector<Edit, 1> Result;
    FunctionTypeLoc Type = Function->getFunctionTypeLoc();
    if (!Type) {
      return Result;
    }
    SourceLocation First =
        Function->getNumParams() ? Function->getParamDecl(0)->getBeginLoc() : SourceLocation();
    llvm::Expected<Edit> Parameter =
        firstInList(Type.getLParenLoc(), First, Type.getRParenLoc(),
                    "accelerate::Accelerator &accelerator", *Match.SourceManager);
    if (!Parameter) {
      llvm::consumeError(Parameter.takeError());
      return Result;
    }
    Result.push_back(*Parameter);
    return Result;
  };
  return makeRule(Helper, Edits, explain("function", ParameterExplanation.str()));
}

/// Each call of such a helper: `accelerator`, first.
Rule argumentRule() {
  auto Call = callExpr(inUserCode(), passesAccelerator()).bind("call");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    const SourceManager &SM = *Match.SourceManager;
    llvm::SmallVector<Edit, 1> Result;
    SourceLocation CalleeEnd = Call->getCallee()->getEndLoc();
    std::optional<Token> Paren =
        CalleeEnd.isMacroID() ? std::nullopt
                              : Lexer::findNextToken(CalleeEnd, SM, Match.Context->getLangOpts());
    if (!Paren || !Paren->is(tok::l_paren)) {
      return Result;
    }
    llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
    llvm::Expected<Edit> Argument =
        firstInList(Paren->getLocation(), Args.empty() ? SourceLocation() : Args[0]->getBeginLoc(),
                    Call->getRParenLoc(), "accelerator", SM);
    if (!Argument) {
      llvm::consumeError(Argument.takeError());
      return Result;
    }
    Result.push_back(*Argument);
    return Result;
  };
  return makeRule(Call, Edits, finding(Finding::Rewrite, "call", [](const MatchResult &Match) {
                    return "passes the accelerator to " +
                           functionLabel(callPassingAccelerator(
                               Match.Nodes.getNodeAs<CallExpr>("call"), *Match.Context));
                  }));
}

/// Each lambda that prints or saves where the accelerator is, without a by-reference default
/// (`[]`, `[n]`, `[=]`): `&accelerator` among its captures.
Rule captureRule() {
  auto Lambda = lambdaExpr(isExpansionInMainFile(), getsAcceleratorCapture()).bind("lambda");
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Lambda = Match.Nodes.getNodeAs<LambdaExpr>("lambda");
    llvm::SmallVector<Edit, 1> Result;
    SourceRange Introducer = Lambda->getIntroducerRange();
    if (Introducer.getBegin().isMacroID() || Introducer.getEnd().isMacroID()) {
      return Result;
    }
    const bool Empty = Lambda->getCaptureDefault() == LCD_None &&
                       Lambda->explicit_capture_begin() == Lambda->explicit_capture_end();
    Edit Capture;
    if (Empty) {
      Capture.Range = CharSourceRange::getTokenRange(Introducer);
      Capture.Replacement = "[&accelerator]";
    } else {
      Capture.Range = CharSourceRange::getCharRange(Introducer.getEnd(), Introducer.getEnd());
      Capture.Replacement = ", &accelerator";
    }
    Result.push_back(Capture);
    return Result;
  };
  return makeRule(Lambda, Edits,
                  explain("lambda", "the lambda captures the accelerator, so that what it prints "
                                    "or saves goes through it as in the function it is in"));
}

/// A helper that trains but cannot get the parameter: the warning says why and what to do.
Rule cannotPassRule() {
  auto Helper = functionDecl(isExpansionInMainFile(), unless(isInstantiated()), isDefinition(),
                             trainsWithoutAccelerator())
                    .bind("function");
  return makeRule(Helper, noEdits(), dynamicFinding("function", [](const MatchResult &Match) {
                    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
                    Finding Result;
                    Result.Kind = Finding::Warning;
                    Result.Loc = Function->getLocation();
                    Result.Message =
                        functionLabel(Function) +
                        " trains, but the accelerator cannot be passed to it: " +
                        acceleratorParameterPlan(Function, *Match.Context)->Problem +
                        "; add a first parameter 'accelerate::Accelerator &accelerator' to it, "
                        "pass 'accelerator' where it is called, and run accel-rewrite again to "
                        "rewrite its training step";
                    return Result;
                  }));
}

} // namespace

Rule makeAcceleratorRule() {
  return applyFirst<Finding>(
      {declarationRule(), parameterRule(), argumentRule(), captureRule(), cannotPassRule()});
}

} // namespace accel::rewrites
