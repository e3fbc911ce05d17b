//===- Devices.cpp - Whether a program computes on the CPU only -----------===//
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

bool inMainFile(const Decl *D, const SourceManager &SM) {
  return D && SM.isInMainFile(SM.getExpansionLoc(D->getLocation()));
}

/// A string given to a Device: only the literal "cpu" (with or without an index) is known.
bool isCpuString(const Expr *Argument) {
  const auto *Literal = dyn_cast<StringLiteral>(spelled(Argument));
  return Literal && Literal->getCharByteWidth() == 1 &&
         (Literal->getString() == "cpu" || Literal->getString().starts_with("cpu:"));
}

/// Whether one device-valued expression could bring in a device other than the CPU by
/// itself; the expressions inside it and the declarations it refers to in the main file are
/// checked on their own.
bool bringsOtherDevice(const Expr *E, const SourceManager &SM) {
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const ValueDecl *Target = Ref->getDecl();
    if (inMainFile(Target, SM)) {
      return false;
    }
    if (const auto *Enumerator = dyn_cast<EnumConstantDecl>(Target)) {
      return Enumerator->getName() != "CPU";
    }
    return qualifiedName(Target) != "c10::kCPU";
  }
  if (const auto *Member = dyn_cast<MemberExpr>(E)) {
    return !inMainFile(Member->getMemberDecl(), SM);
  }
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
    for (const Expr *Argument : Construct->arguments()) {
      QualType Type = Argument->getType();
      if (!isDeviceType(Type) && !isDeviceTypeEnum(Type) && !Type->isIntegerType() &&
          !isa<CXXDefaultArgExpr>(Argument) && !isCpuString(Argument)) {
        return true;
      }
    }
    return false;
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    if (!Callee) {
      return true;
    }
    // The device a tensor, module or device already has; a helper of the main file is checked
    // through its own body.
    return !inMainFile(Callee, SM) && Callee->getName() != "device" && Callee->getName() != "type";
  }
  return false;
}

} // namespace

bool namesOnlyTheCpu(ASTContext &Ctx) {
  auto NamesGpu =
      stmt(isExpansionInMainFile(), anyOf(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("cuda")))),
                                          callExpr(callee(functionDecl(isInTorchCuda())))));
  // Over the unit's traversal scope: the main file's declarations (RuleRunner::match).
  if (!match(NamesGpu, Ctx).empty()) {
    return false;
  }
  for (const BoundNodes &Found :
       match(expr(isExpansionInMainFile(), hasDeviceType()).bind("device"), Ctx)) {
    if (bringsOtherDevice(Found.getNodeAs<Expr>("device")->IgnoreImplicit(),
                          Ctx.getSourceManager())) {
      return false;
    }
  }
  return true;
}

} // namespace accel::rewrites
