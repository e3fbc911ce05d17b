//===- PrintRule.cpp - accel-print ----------------------------------------===//
//
// std::cout -> accelerator.print(), printf(...) and fprintf(stdout, ...) ->
// accelerator.printf(...), puts, fputs and putchar to standard output -> accelerator.print, in
// functions with the accelerator: the main process prints, the others evaluate the same
// operands (a collective among them still runs everywhere) and discard the text, so each line
// appears once per job as it did in the single-process program. std::cerr and stderr are left
// alone: an error any process reports stays visible. See docs/rules/accel-print.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AcceleratorParameter.h"
#include "analysis/SetupFunction.h"
#include "support/Calls.h"
#include "support/RuleBuilders.h"

#include "clang/AST/Expr.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {
AST_MATCHER(Stmt, isStdoutPrintNode) { return isStdoutPrint(&Node); }

AST_MATCHER_P(CallExpr, writesStdoutAs, StdoutCall, Kind) { return stdoutCall(&Node) == Kind; }

/// Whether the call is a statement of its own: what puts or putchar returns is not read, so the
/// call can become a stream expression.
AST_MATCHER(CallExpr, resultUnused) {
  auto Parents = Finder->getASTContext().getParents(Node);
  for (; !Parents.empty(); Parents = Finder->getASTContext().getParents(Parents[0])) {
    if (const auto *Wrapper = Parents[0].get<Expr>();
        Wrapper && isa<ExprWithCleanups, ParenExpr, ImplicitCastExpr>(Wrapper)) {
      continue;
    }
    const Stmt *Parent = Parents[0].get<Stmt>();
    return Parent && !isa<Expr>(Parent);
  }
  return false;
}

/// The text that streams one character: `'\n'` as written, an int as static_cast<char>(c).
std::string streamedCharacter(const Expr *Arg, const ASTContext &Ctx) {
  const std::string Text = sourceText(Arg, Ctx);
  return Arg->IgnoreImpCasts()->getType()->isCharType() ? Text : "static_cast<char>(" + Text + ")";
}

/// The text of an operand of `<<`, in parentheses unless it is a single term.
std::string streamedOperand(const Expr *Arg, const ASTContext &Ctx) {
  const std::string Text = sourceText(Arg, Ctx);
  return isa<DeclRefExpr, StringLiteral, CallExpr, MemberExpr, ArraySubscriptExpr, ParenExpr>(
             Arg->IgnoreImpCasts())
             ? Text
             : "(" + Text + ")";
}
} // namespace

Rule makePrintRule() {
  auto InAcceleratorFunction = allOf(inUserCode(), forFunction(acceleratorFunction()));
  auto Cout = declRefExpr(InAcceleratorFunction, isStdoutPrintNode()).bind("cout");
  auto Printf = callExpr(InAcceleratorFunction, writesStdoutAs(StdoutCall::Printf),
                         callee(expr(ignoringImplicit(declRefExpr().bind("callee")))))
                    .bind("call");
  const std::string Once = "the line is printed once";
  // fprintf(stdout, format, ...) -> accelerator.printf(format, ...): the callee and the stream.
  auto FprintfStdout =
      callExpr(InAcceleratorFunction, writesStdoutAs(StdoutCall::FprintfStdout)).bind("call");
  EditGenerator DropStream =
      [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    Edit Head;
    Head.Range = CharSourceRange::getCharRange(Call->getBeginLoc(), Call->getArg(1)->getBeginLoc());
    Head.Replacement = "accelerator.printf(";
    return llvm::SmallVector<Edit, 1>{Head};
  };
  // puts, fputs and putchar as statements become the accelerator's stream.
  auto Streamed =
      callExpr(InAcceleratorFunction, resultUnused(),
               anyOf(writesStdoutAs(StdoutCall::Puts), writesStdoutAs(StdoutCall::FputsStdout),
                     writesStdoutAs(StdoutCall::Putchar), writesStdoutAs(StdoutCall::FputcStdout)))
          .bind("call");
  auto StreamedText = [](const MatchResult &Match) -> std::string {
    const auto *Call = Match.Nodes.getNodeAs<CallExpr>("call");
    const Expr *Arg = Call->getArg(0);
    switch (stdoutCall(Call)) {
    case StdoutCall::Puts:
      return "accelerator.print(" + sourceText(Arg, *Match.Context) + ")"; // adds the newline
    case StdoutCall::FputsStdout:
      return "accelerator.print() << " + streamedOperand(Arg, *Match.Context);
    default:
      return "accelerator.print() << " + streamedCharacter(Arg, *Match.Context);
    }
  };
  // What puts or putchar returns is read: no stream expression can stand there.
  auto ResultRead =
      callExpr(InAcceleratorFunction, unless(resultUnused()),
               anyOf(writesStdoutAs(StdoutCall::Puts), writesStdoutAs(StdoutCall::FputsStdout),
                     writesStdoutAs(StdoutCall::Putchar), writesStdoutAs(StdoutCall::FputcStdout)))
          .bind("call");
  // A print (or save) where the accelerator cannot reach (analysis/AcceleratorParameter.h):
  // said at each line, with why.
  auto Unreachable = forFunction(functionDecl(printsWithoutTheAccelerator()).bind("function"));
  auto EveryProcess = stmt(inUserCode(), Unreachable,
                           anyOf(declRefExpr(isStdoutPrintNode()), callExpr(isStdoutPrintNode()),
                                 callExpr(callee(functionDecl(hasName("::torch::save"))))))
                          .bind("print");
  auto EveryProcessFinding = dynamicFinding("print", [](const MatchResult &Match) {
    const auto *Function = Match.Nodes.getNodeAs<FunctionDecl>("function");
    Finding Result;
    Result.Kind = Finding::Warning;
    Result.OnlyWhereRewritten = true;
    Result.Message = "this runs on every process, so its output appears once per process: " +
                     printsWithoutAccelerator(Function, *Match.Context);
    return Result;
  });
  return applyFirst<Finding>(
      {makeRule(EveryProcess, noEdits(), EveryProcessFinding),
       makeRule(Cout, changeTo(node("cout"), cat("accelerator.print()")),
                explain("cout", "accelerator.print() is std::cout on the main process and "
                                "discards the text on the others: " +
                                    Once)),
       makeRule(Printf, changeTo(node("callee"), cat("accelerator.printf")),
                explain("call", "accelerator.printf prints on the main process only: " + Once)),
       makeRule(FprintfStdout, DropStream,
                explain("call", "accelerator.printf prints on the main process only: " + Once)),
       makeRule(Streamed, changeTo(node("call"), run(StreamedText)),
                explain("call", "accelerator.print() writes to standard output on the main "
                                "process only: " +
                                    Once)),
       makeRule(ResultRead, noEdits(),
                warn("call", "this writes to standard output on every process, and what it "
                             "returns is read, so accel-print leaves it; print the text with "
                             "accelerator.print() << text (the main process only) by hand"))});
}

} // namespace accel::rewrites
