//===- AcceleratorRule.cpp - accel-accelerator ----------------------------===//
//
// `accelerate::Accelerator accelerator;` as the first statement of the function that sets up
// training (the one creating an optimizer), which the other rules' edits refer to. See
// docs/rules/accel-accelerator.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "utils/Calls.h"
#include "utils/LibTorchTypes.h"
#include "utils/RuleBuilders.h"
#include "utils/SetupFunction.h"
#include "utils/SourceRanges.h"

#include "clang/AST/Stmt.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {

Rule makeAcceleratorRule() {
  auto AnyAccelerator = varDecl(hasType(isAccelerator()));
  auto Setup =
      functionDecl(isExpansionInMainFile(), unless(isInstantiated()), setupFunction(),
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
    Result.push_back(insertionAt(At, At == First ? "accelerate::Accelerator accelerator; "
                                                 : "accelerate::Accelerator accelerator;\n"));
    return Result;
  };
  return makeRule(Setup, Edits, finding(Finding::Rewrite, "first", [](const MatchResult &Match) {
                    return "the Accelerator sets up the processes of this run; " +
                           functionLabel(Match.Nodes.getNodeAs<FunctionDecl>("function")) +
                           " creates the optimizer";
                  }));
}

} // namespace accel::rewrites
