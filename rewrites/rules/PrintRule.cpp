//===- PrintRule.cpp - accel-print ----------------------------------------===//
//
// std::cout -> accelerator.print() and printf(...) -> accelerator.printf(...) in functions with
// the accelerator: the main process prints, the others evaluate the same operands (a
// collective among them still runs everywhere) and discard the text, so each line appears
// once per job as it did in the single-process program. std::cerr and stderr are left alone:
// an error any process reports stays visible. See docs/rules/accel-print.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/SetupFunction.h"
#include "support/RuleBuilders.h"

#include "clang/AST/Expr.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {
AST_MATCHER(Stmt, isStdoutPrintNode) { return isStdoutPrint(&Node); }
} // namespace

Rule makePrintRule() {
  auto InAcceleratorFunction = allOf(inUserCode(), forFunction(acceleratorFunction()));
  auto Cout = declRefExpr(InAcceleratorFunction, isStdoutPrintNode()).bind("cout");
  auto Printf = callExpr(InAcceleratorFunction, isStdoutPrintNode(),
                         callee(expr(ignoringImplicit(declRefExpr().bind("callee")))))
                    .bind("call");
  return applyFirst<Finding>(
      {makeRule(Cout, changeTo(node("cout"), cat("accelerator.print()")),
                explain("cout", "accelerator.print() is std::cout on the main process and "
                                "discards the text on the others: the line is printed once")),
       makeRule(Printf, changeTo(node("callee"), cat("accelerator.printf")),
                explain("call", "accelerator.printf prints on the main process only: the line "
                                "is printed once"))});
}

} // namespace accel::rewrites
