//===- SaveRule.cpp - accel-save ------------------------------------------===//
//
// torch::save(value, path) -> accelerator.save(value, path): only the main process writes,
// atomically, so processes do not race on the file. See docs/rules/accel-save.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/DivergentSteps.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

#include "clang/AST/ExprCXX.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

/// A file name accelerator.save(value, const std::string&) takes: a string or a C string.
AST_MATCHER(QualType, isPathLike) {
  QualType Type = Node.getNonReferenceType().getCanonicalType();
  if (const auto *Array = dyn_cast<ArrayType>(Type.getTypePtr())) {
    return Array->getElementType()->isCharType();
  }
  if (const auto *Pointer = Type->getAs<PointerType>()) {
    return Pointer->getPointeeType()->isCharType();
  }
  const CXXRecordDecl *Record = Type->getAsCXXRecordDecl();
  return Record && Record->getName() == "basic_string" && Record->isInStdNamespace();
}

/// An in-memory string stream (std::stringstream, std::ostringstream): a snapshot each
/// process keeps for itself (best weights restored later with torch::load), not a file.
AST_MATCHER(QualType, isStringStream) {
  const CXXRecordDecl *Record = Node.getNonReferenceType()->getAsCXXRecordDecl();
  return Record && Record->isInStdNamespace() &&
         (Record->getName() == "basic_stringstream" || Record->getName() == "basic_ostringstream");
}

/// Inside a branch that asks which process this is: the program writes on one process
/// already.
AST_MATCHER(CallExpr, onSomeProcessesOnly) {
  return runsOnSomeProcesses(&Node, Finder->getASTContext());
}

/// Inside a branch on a value of this process's batches: accelerator.save, which waits for
/// every process, would wait forever for those that do not take it.
AST_MATCHER(CallExpr, underBranchThatDiffers) {
  return underConditionThatDiffers(&Node, Finder->getASTContext());
}

} // namespace

Rule makeSaveRule() {
  auto Save = callExpr(inUserCode(), callee(functionDecl(hasName("::torch::save"))),
                       callee(expr(ignoringImplicit(declRefExpr().bind("callee")))))
                  .bind("call");
  auto Callee = [](const MatchResult &Match) -> llvm::Expected<CharSourceRange> {
    const auto *Ref = Match.Nodes.getNodeAs<DeclRefExpr>("callee");
    return CharSourceRange::getTokenRange(Ref->getBeginLoc(), Ref->getEndLoc());
  };
  return applyFirst<Finding>(
      {makeRule(callExpr(Save, argumentCountIs(2), hasArgument(1, expr(hasType(isStringStream())))),
                noEdits(),
                explain("call", "torch::save into a string stream keeps a snapshot in this "
                                "process's memory (each process its own, as each restores its "
                                "own): it stays as it is")),
       makeRule(callExpr(Save, onSomeProcessesOnly()), noEdits(),
                explain("call", "this torch::save runs on the processes the branch around it "
                                "picks already; it stays as it is")),
       makeRule(callExpr(Save, forFunction(acceleratorFunction()), underBranchThatDiffers()),
                noEdits(),
                warn("call", "torch::save under a branch on a value of this process's batches "
                             "(a new best loss, say): every process would write the file when "
                             "its own value says so, and accelerator.save, which waits for "
                             "every process, would wait forever for those that do not take the "
                             "branch; decide on a value that is the same on every process "
                             "(accelerator.reduce(value, \"mean\")) and call "
                             "accelerator.save(value, path) there")),
       makeRule(callExpr(Save, argumentCountIs(2), hasArgument(1, expr(hasType(isPathLike()))),
                         forFunction(acceleratorFunction())),
                changeTo(Callee, cat("accelerator.save")),
                explain("call", "accelerator.save writes the file on the main process only, "
                                "atomically, so that processes do not race on it")),
       makeRule(callExpr(Save, forFunction(acceleratorFunction())), noEdits(),
                warn("call", "torch::save to a stream or with extra arguments: run it on the "
                             "main process only, inside 'if (accelerator.is_main_process())'")),
       noAcceleratorRule(callExpr(Save, forFunction(functionDecl().bind("function"))), "call",
                         "torch::save",
                         "every process would write the file; pass 'accelerate::Accelerator& "
                         "accelerator' in and call accelerator.save(value, path)")});
}

} // namespace accel::rewrites
