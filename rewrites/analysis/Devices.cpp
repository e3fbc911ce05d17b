//===- Devices.cpp - Whether a program places anything on a device --------===//
#include "analysis/Devices.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/ExprCXX.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

AST_MATCHER(Expr, hasDeviceType) {
  return isDeviceType(Node.getType()) || isDeviceTypeEnum(Node.getType());
}

AST_MATCHER(FunctionDecl, isInTorchCuda) {
  return llvm::StringRef(qualifiedName(&Node)).starts_with("torch::cuda::");
}

} // namespace

bool namesNoDevice(ASTContext &Ctx) {
  auto Names =
      stmt(isExpansionInMainFile(),
           anyOf(expr(hasDeviceType()), cxxMemberCallExpr(callee(cxxMethodDecl(hasName("cuda")))),
                 callExpr(callee(functionDecl(isInTorchCuda())))));
  // Over the unit's traversal scope: the main file's declarations (RuleRunner::match).
  return match(Names, Ctx).empty();
}

} // namespace accel::rewrites
