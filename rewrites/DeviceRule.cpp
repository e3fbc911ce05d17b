//===- DeviceRule.cpp - accel-device --------------------------------------===//
//
// The device comes from the accelerator: the setup function's device variable is initialised
// from accelerator.device() (later uses stay valid); `model->to(device)` on prepared models
// is dropped (prepare places them); `.to(device)` / `.cuda()` on tensors of a prepared
// loader's batches are dropped (the batches arrive on the device); a dtype is kept. See
// docs/rules/accel-device.md.
//
//===----------------------------------------------------------------------===//
#include "RuleSupport.h"

#include "clang/AST/ExprCXX.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

AST_MATCHER(QualType, isDevice) { return isDeviceType(Node); }
AST_MATCHER(QualType, isDeviceEnum) { return isDeviceTypeEnum(Node); }
AST_MATCHER(VarDecl, isPrepared) { return isPreparedModel(&Node, Finder->getASTContext()); }
AST_MATCHER(VarDecl, isBatch) { return isTrainingBatch(&Node, Finder->getASTContext()); }
/// The written first argument names a device (torch::Device or torch::kCUDA).
AST_MATCHER(CallExpr, firstArgIsDevice) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(&Node);
  if (Args.empty()) {
    return false;
  }
  QualType Type = spelled(Args[0])->getType();
  return isDeviceType(Type) || isDeviceTypeEnum(Type);
}

/// The arguments after the first as written, comments included.
std::string argsAfterFirst(const CallExpr *Call, ASTContext &Ctx) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
  const SourceManager &SM = Ctx.getSourceManager();
  SourceLocation From = Lexer::getLocForEndOfToken(Args[0]->getEndLoc(), 0, SM, Ctx.getLangOpts());
  CharSourceRange Range = CharSourceRange::getCharRange(From, Call->getRParenLoc());
  llvm::StringRef Text = Lexer::getSourceText(Range, SM, Ctx.getLangOpts()).trim();
  Text.consume_front(",");
  return Text.trim().str();
}

/// "obj.to(dtype, rest...)" for a call "obj.to(device, dtype, rest...)", "obj" for
/// "obj.to(device[, non_blocking...])", from the source text.
std::string withoutDevice(const CXXMemberCallExpr *Call, const Expr *Object, ASTContext &Ctx) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
  std::string Text = sourceText(Object, Ctx);
  if (Args.size() >= 2 && isScalarTypeEnum(spelled(Args[1])->getType())) {
    Text += ".to(" + argsAfterFirst(Call, Ctx) + ")";
  }
  return Text;
}

constexpr llvm::StringLiteral DeviceExplanation =
    "the accelerator chooses each process's device (cuda:LOCAL_RANK or the CPU)";

} // namespace

Rule makeDeviceRule() {
  // 1. The device variable of a function that has (or gets) the accelerator.
  auto CudaTest = callExpr(callee(functionDecl(hasName("::torch::cuda::is_available"))));
  auto DeviceVar =
      varDecl(
          isExpansionInMainFile(), unless(isInstantiated()), unless(parmVarDecl()),
          hasInitializer(expr()),
          anyOf(hasType(isDevice()),
                allOf(hasType(isDeviceEnum()), hasInitializer(hasDescendant(CudaTest)))),
          unless(hasInitializer(ignoringImplicit(cxxMemberCallExpr(callee(
              cxxMethodDecl(hasName("device"), ofClass(hasName("::accelerate::Accelerator")))))))),
          hasParent(declStmt(hasSingleDecl(anything()), hasParent(compoundStmt())).bind("decl")))
          .bind("var");
  auto DeviceText = [](const MatchResult &Match) -> llvm::Expected<std::string> {
    const auto *Var = Match.Nodes.getNodeAs<VarDecl>("var");
    return (Var->getType().isConstQualified() ? "const " : "") + std::string("torch::Device ") +
           Var->getNameAsString() + " = accelerator.device();";
  };
  auto DeviceRule =
      makeRule(varDecl(DeviceVar, hasDeclContext(acceleratorFunction())),
               changeTo(node("decl"), run(DeviceText)), explain("var", DeviceExplanation.str()));
  auto ForeignDevice =
      makeRule(varDecl(DeviceVar, hasDeclContext(functionDecl().bind("function"))), noEdits(),
               finding(Finding::Warning, "var", [](const MatchResult &Match) {
                 return "device chosen in " +
                        functionLabel(Match.Nodes.getNodeAs<FunctionDecl>("function")) +
                        ", which has no accelerator: with several processes it must be the "
                        "accelerator's device; pass accelerator.device() in";
               }));

  // 2. model->to(device) / model.to(device) on a model that prepare places.
  auto ModelRef = declRefExpr(to(varDecl(isPrepared()).bind("model")));
  auto ModelTo =
      cxxMemberCallExpr(
          inUserCode(),
          callee(cxxMethodDecl(hasName("to"), ofClass(isSameOrDerivedFrom("::torch::nn::Module")))),
          firstArgIsDevice(),
          on(expr(
              anyOf(ModelRef, cxxOperatorCallExpr(hasOverloadedOperatorName("->"),
                                                  hasArgument(0, ignoringImplicit(ModelRef)))))),
          hasParent(compoundStmt()))
          .bind("call");
  auto ModelToText = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Call = Match.Nodes.getNodeAs<CXXMemberCallExpr>("call");
    llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
    if (Args.size() >= 2 && isScalarTypeEnum(spelled(Args[1])->getType())) {
      return edit(changeTo(callArgs("call"), cat(argsAfterFirst(Call, *Match.Context))))(Match);
    }
    return edit(changeTo(wholeStatementLine("call"), cat("")))(Match);
  };
  auto ModelRule = makeRule(ModelTo, ModelToText,
                            explain("call", "accelerator.prepare moves the model to the "
                                            "accelerator's device"));

  // 3. batch.data.to(device) / batch.target.cuda() on a prepared loader's batches.
  auto BatchTensor =
      memberExpr(hasObjectExpression(ignoringImpCasts(declRefExpr(to(varDecl(isBatch()))))))
          .bind("object");
  auto BatchTo =
      cxxMemberCallExpr(
          inUserCode(),
          anyOf(allOf(callee(cxxMethodDecl(hasName("to"), ofClass(hasName("::at::Tensor")))),
                      firstArgIsDevice()),
                callee(cxxMethodDecl(hasName("cuda"), ofClass(hasName("::at::Tensor"))))),
          on(BatchTensor))
          .bind("call");
  auto BatchText = [](const MatchResult &Match) -> llvm::Expected<std::string> {
    return withoutDevice(Match.Nodes.getNodeAs<CXXMemberCallExpr>("call"),
                         Match.Nodes.getNodeAs<Expr>("object"), *Match.Context);
  };
  auto BatchRule = makeRule(BatchTo, changeTo(node("call"), run(BatchText)),
                            explain("call", "a prepared loader delivers its batches on the "
                                            "accelerator's device"));

  return applyFirst<Finding>({DeviceRule, ForeignDevice, ModelRule, BatchRule});
}

} // namespace accel::rewrites
