//===- Templates.cpp - A template's pattern and its instantiations ------===//
#include "support/Templates.h"

#include "support/Calls.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "llvm/ADT/STLExtras.h"

using namespace clang;

namespace accel::rewrites {

llvm::SmallVector<const FunctionDecl *, 2> instantiationsOf(const FunctionDecl *Pattern) {
  llvm::SmallVector<const FunctionDecl *, 2> Result;
  if (!Pattern) {
    return Result;
  }
  if (const FunctionDecl *Defined = Pattern->getDefinition()) {
    Pattern = Defined;
  }
  auto Consider = [&](const FunctionDecl *Function) {
    const FunctionDecl *Of = Function ? Function->getTemplateInstantiationPattern() : nullptr;
    if (Of && Of->getCanonicalDecl() == Pattern->getCanonicalDecl() && Function->hasBody() &&
        !llvm::is_contained(Result, Function)) {
      Result.push_back(Function);
    }
  };
  auto OfTemplate = [&](const FunctionTemplateDecl *Template) {
    for (const FunctionDecl *Specialization : Template->specializations()) {
      Consider(Specialization);
    }
  };
  if (const FunctionTemplateDecl *Template = Pattern->getDescribedFunctionTemplate()) {
    OfTemplate(Template);
  }
  const auto *Method = dyn_cast<CXXMethodDecl>(Pattern);
  const ClassTemplateDecl *Class =
      Method ? Method->getParent()->getDescribedClassTemplate() : nullptr;
  if (Class) {
    for (const ClassTemplateSpecializationDecl *Specialization : Class->specializations()) {
      for (const Decl *Member : Specialization->decls()) {
        if (const auto *Copy = dyn_cast<CXXMethodDecl>(Member)) {
          Consider(Copy);
        } else if (const auto *MemberTemplate = dyn_cast<FunctionTemplateDecl>(Member)) {
          OfTemplate(MemberTemplate);
        }
      }
    }
  }
  return Result;
}

bool isInstantiatedPattern(const FunctionDecl *Function) {
  return Function && Function->isDependentContext() && !instantiationsOf(Function).empty();
}

llvm::SmallVector<const Stmt *, 2> instantiatedCopies(const Stmt *S, const FunctionDecl *Pattern) {
  llvm::SmallVector<const Stmt *, 2> Result;
  for (const FunctionDecl *Instance : instantiationsOf(Pattern)) {
    forEachStmt(Instance->getBody(), [&](const Stmt *Copy) {
      if (Copy->getStmtClass() == S->getStmtClass() && Copy->getBeginLoc() == S->getBeginLoc() &&
          Copy->getEndLoc() == S->getEndLoc()) {
        Result.push_back(Copy);
      }
    });
  }
  return Result;
}

} // namespace accel::rewrites
