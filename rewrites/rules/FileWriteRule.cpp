//===- FileWriteRule.cpp - accel-file-write -------------------------------===//
//
// File writes, renames and removals that every process would run once the program is
// launched on N processes: a CSV written N times over while another process reads it, a
// checkpoint removed before a slower process has loaded it. accelerator.save covers
// torch::save (accel-save); these are warned about, with the guard to write by hand, in a file
// that trains. See docs/rules/accel-file-write.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/SetupFunction.h"
#include "analysis/Statistics.h"
#include "analysis/TrainingPlan.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"

#include "clang/AST/Expr.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

/// The file trains (it has a training loop the tool plans, or an Accelerator already): only
/// then does it run on N processes. Asked only of the calls the rule is about.
AST_MATCHER(Stmt, inTrainingFile) {
  ASTContext &Ctx = Finder->getASTContext();
  return !AnalysisContext::of(Ctx).trainingPlans().Loops.empty() ||
         !match(varDecl(isExpansionInMainFile(), hasType(isAccelerator())), Ctx).empty();
}

AST_MATCHER(Stmt, onSomeProcessesOnly) {
  return runsOnSomeProcesses(&Node, Finder->getASTContext());
}

/// fopen's mode writes: "w", "a" or an update mode.
AST_MATCHER(CallExpr, opensForWriting) {
  if (Node.getNumArgs() < 2) {
    return false;
  }
  const auto *Mode = dyn_cast<StringLiteral>(Node.getArg(1)->IgnoreParenImpCasts());
  return !Mode || Mode->getString().find_first_of("wa+") != llvm::StringRef::npos;
}

std::string message(llvm::StringRef What) {
  return ("every process runs this " + What +
          " at the same time once the program is launched on several (a file written over by "
          "each, or gone before a slower process has read it); run it on the main process "
          "only, `if (accelerator.is_main_process()) { ... }`, and call "
          "`accelerator.wait_for_everyone();` before any process reads the file")
      .str();
}

} // namespace

Rule makeFileWriteRule() {
  auto Where = [](auto Matcher) {
    return traverse(TK_IgnoreUnlessSpelledInSource,
                    stmt(Matcher, inUserCode(), inTrainingFile(), unless(onSomeProcessesOnly())));
  };
  auto Stream = cxxRecordDecl(hasName("::std::basic_ofstream"));
  auto OpensStream = Where(
      cxxConstructExpr(hasDeclaration(cxxConstructorDecl(ofClass(Stream))), argumentCountAtLeast(1))
          .bind("write"));
  auto OpensLater = Where(
      cxxMemberCallExpr(callee(cxxMethodDecl(hasName("open"), ofClass(Stream)))).bind("write"));
  auto Fopen =
      Where(callExpr(callee(functionDecl(hasAnyName("::fopen", "::std::fopen"))), opensForWriting())
                .bind("write"));
  // The C library's remove and rename (std::remove the algorithm is a template).
  auto Removes =
      Where(callExpr(callee(functionDecl(
                         hasAnyName("::remove", "::rename", "::std::filesystem::remove",
                                    "::std::filesystem::remove_all", "::std::filesystem::rename"),
                         unless(isTemplateInstantiation()))))
                .bind("remove"));
  return applyFirst<Finding>({
      makeRule(OpensStream, noEdits(), warn("write", message("file write"))),
      makeRule(OpensLater, noEdits(), warn("write", message("file write"))),
      makeRule(Fopen, noEdits(), warn("write", message("file write"))),
      makeRule(Removes, noEdits(), warn("remove", message("file removal or rename"))),
  });
}

} // namespace accel::rewrites
