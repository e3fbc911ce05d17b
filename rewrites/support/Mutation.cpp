//===- Mutation.cpp - What code changes -----------------------------------===//
#include "support/Mutation.h"

#include "support/Calls.h"
#include "clang/AST/DeclCXX.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"

#include <functional>
#include <optional>

using namespace clang;

namespace accel::rewrites {

namespace {

/// Whether binding an argument to Type lets the callee change it: a reference or a pointer to
/// something not const.
bool bindsForChange(QualType Type) {
  if (Type->isReferenceType()) {
    return !Type.getNonReferenceType().isConstQualified();
  }
  return Type->isPointerType() && !Type->getPointeeType().isConstQualified();
}

/// std::vector, std::array or std::deque: an element taken by [] changes nothing (a map's []
/// inserts the key).
bool isSequenceContainer(QualType Type) {
  const auto *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
  const std::string Name = Record ? qualifiedName(Record) : "";
  return Name == "std::vector" || Name == "std::array" || Name == "std::deque";
}

/// The parameter Arg (an argument of Call) binds to, or null (a variadic argument).
const ParmVarDecl *parameterOf(const CallExpr *Call, const Expr *Arg) {
  const FunctionDecl *Callee = Call->getDirectCallee();
  if (!Callee) {
    return nullptr;
  }
  unsigned Shift = 0;
  // A member operator's object is its first argument; the parameters start after it.
  if (isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Callee)) {
    Shift = 1;
  }
  for (unsigned I = 0; I < Call->getNumArgs(); ++I) {
    if (Call->getArg(I) == Arg && I >= Shift && I - Shift < Callee->getNumParams()) {
      return Callee->getParamDecl(I - Shift);
    }
  }
  return nullptr;
}

/// Whether an argument bound to Param may be changed, where Param belongs to a module call
/// (`model(x)`, torch::nn::ModuleHolder::operator()): that call forwards its arguments to the
/// module's forward, whose parameters say. Null when Param is no module call's.
std::optional<bool> moduleCallChanges(const ParmVarDecl *Param) {
  const auto *Call = dyn_cast<CXXMethodDecl>(Param->getDeclContext());
  const auto *Holder =
      Call ? dyn_cast<ClassTemplateSpecializationDecl>(Call->getParent()) : nullptr;
  if (!Holder || !Call->isOverloadedOperator() || Call->getOverloadedOperator() != OO_Call ||
      qualifiedName(Holder) != "torch::nn::ModuleHolder" || Holder->getTemplateArgs().size() < 1) {
    return std::nullopt;
  }
  const CXXRecordDecl *Impl = Holder->getTemplateArgs()[0].getAsType()->getAsCXXRecordDecl();
  if (!Impl || !Impl->hasDefinition()) {
    return std::nullopt;
  }
  const unsigned Index = Param->getFunctionScopeIndex();
  bool Found = false, Changes = false;
  for (const CXXMethodDecl *Method : Impl->methods()) {
    if (Method->getDeclName().isIdentifier() && Method->getName() == "forward" &&
        Index < Method->getNumParams()) {
      Found = true;
      Changes = Changes || bindsForChange(Method->getParamDecl(Index)->getType());
    }
  }
  return Found ? std::optional<bool>(Changes) : std::nullopt;
}

} // namespace

bool changesWhatItNames(const Expr *Named, ASTContext &Ctx) {
  const Expr *E = Named;
  while (true) {
    const DynTypedNodeList Parents = Ctx.getParents(*E);
    if (Parents.empty()) {
      return false;
    }
    if (const auto *Var = Parents[0].get<VarDecl>()) {
      // A range-for's hidden range variable binds the range whatever the loop does with it:
      // the loop variable says whether elements are changed.
      if (Var->isImplicit()) {
        for (const DynTypedNode &Up : Ctx.getParents(*Var)) {
          if (const auto *Loop = Up.get<DeclStmt>()) {
            for (const DynTypedNode &Stmt : Ctx.getParents(*Loop)) {
              if (const auto *For = Stmt.get<CXXForRangeStmt>()) {
                return bindsForChange(For->getLoopVariable()->getType());
              }
            }
          }
        }
      }
      return bindsForChange(Var->getType());
    }
    const auto *Parent = Parents[0].get<Expr>();
    if (!Parent) {
      return false;
    }
    if (const auto *Cast = dyn_cast<ImplicitCastExpr>(Parent)) {
      if (Cast->getCastKind() == CK_LValueToRValue) {
        return false;
      }
    } else if (const auto *Member = dyn_cast<MemberExpr>(Parent)) {
      if (const auto *Method = dyn_cast<CXXMethodDecl>(Member->getMemberDecl())) {
        return !Method->isConst() && !Method->isStatic();
      }
    } else if (const auto *Unary = dyn_cast<UnaryOperator>(Parent)) {
      if (Unary->isIncrementDecrementOp() || Unary->getOpcode() == UO_AddrOf) {
        return true;
      }
    } else if (const auto *Binary = dyn_cast<BinaryOperator>(Parent)) {
      return Binary->isAssignmentOp() && Binary->getLHS()->IgnoreParenImpCasts() == E;
    } else if (const auto *Call = dyn_cast<CallExpr>(Parent)) {
      const FunctionDecl *Callee = Call->getDirectCallee();
      const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call);
      if (Operator && Callee && isa<CXXMethodDecl>(Callee) && Call->getNumArgs() > 0 &&
          Call->getArg(0) == E) {
        // `model->weight`, `*holder`, a vector's element `list[i]` (whose operator[] is not
        // const but changes nothing): what is done with the object reached says.
        if (Operator->getOperator() == OO_Arrow || Operator->getOperator() == OO_Star ||
            (Operator->getOperator() == OO_Subscript && isSequenceContainer(E->getType()))) {
          E = Parent;
          continue;
        }
        return !cast<CXXMethodDecl>(Callee)->isConst();
      }
      if (Call->getCallee() == E) {
        return false;
      }
      const ParmVarDecl *Param = parameterOf(Call, E);
      if (!Param) {
        return false;
      }
      return moduleCallChanges(Param).value_or(bindsForChange(Param->getType()));
    } else if (const auto *Construct = dyn_cast<CXXConstructExpr>(Parent)) {
      const CXXConstructorDecl *Constructor = Construct->getConstructor();
      // std::optional takes its value by forwarding reference and copies it (a tensor
      // method's optional start or end).
      if (qualifiedName(Constructor->getParent()) == "std::optional") {
        return false;
      }
      for (unsigned I = 0; I < Construct->getNumArgs() && I < Constructor->getNumParams(); ++I) {
        if (Construct->getArg(I) == E) {
          return bindsForChange(Constructor->getParamDecl(I)->getType());
        }
      }
      return false;
    } else if (const auto *Subscript = dyn_cast<ArraySubscriptExpr>(Parent)) {
      if (Subscript->getBase() != E) {
        return false;
      }
    } else if (!isa<ParenExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ExprWithCleanups>(
                   Parent)) {
      return false;
    }
    E = Parent;
  }
}

const Expr *assignmentTarget(const Stmt *S, const Expr **Value) {
  const Expr *Target = nullptr, *Assigned = nullptr;
  if (const auto *Assign = dyn_cast_or_null<BinaryOperator>(S);
      Assign && Assign->isAssignmentOp()) {
    Target = Assign->getLHS();
    Assigned = Assign->getRHS();
  } else if (const auto *Call = dyn_cast_or_null<CXXOperatorCallExpr>(S);
             Call && Call->isAssignmentOp() && Call->getNumArgs() == 2) {
    Target = Call->getArg(0);
    Assigned = Call->getArg(1);
  }
  if (Value) {
    *Value = Assigned;
  }
  return Target;
}

bool changedInside(const VarDecl *Var, const Stmt *Scope, ASTContext &Ctx) {
  bool Changed = false;
  forEachStmt(Scope, [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    Changed = Changed || (Ref && Ref->getDecl() == Var && changesWhatItNames(Ref, Ctx));
  });
  return Changed;
}

bool changeReaches(const VarDecl *Var, const Expr *Use, ASTContext &Ctx) {
  const SourceManager &Sources = Ctx.getSourceManager();
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function || !Function->getBody()) {
    return false;
  }
  // The loops around Use inside Var's scope: those whose body does not hold the declaration
  // (a for statement declaring Var in its init counts; the block declaring it ends the walk).
  llvm::SmallVector<const Stmt *, 4> LoopsAroundUse;
  const Stmt *Current = Use;
  while (Current) {
    const auto Parents = Ctx.getParents(*Current);
    const Stmt *Parent = Parents.empty() ? nullptr : Parents[0].get<Stmt>();
    if (!Parent) {
      break;
    }
    if (const Stmt *Body = loopBody(Parent);
        Body && !Body->getSourceRange().fullyContains(Var->getSourceRange())) {
      LoopsAroundUse.push_back(Parent);
    }
    if (Parent->getSourceRange().fullyContains(Var->getSourceRange())) {
      break;
    }
    Current = Parent;
  }
  bool Reaches = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    if (Reaches || !Ref || Ref->getDecl() != Var || !changesWhatItNames(Ref, Ctx)) {
      return;
    }
    // Compared where macros expand: a change inside a macro argument is placed at its use.
    Reaches = !Sources.isBeforeInTranslationUnit(Sources.getExpansionLoc(Use->getEndLoc()),
                                                 Sources.getExpansionLoc(Ref->getBeginLoc())) ||
              llvm::any_of(LoopsAroundUse, [&](const Stmt *Loop) {
                return Loop->getSourceRange().fullyContains(Ref->getSourceRange());
              });
  });
  return Reaches;
}

bool leavesEarly(const Stmt *Body) {
  bool Leaves = false;
  std::function<void(const Stmt *, bool)> Walk = [&](const Stmt *S, bool Nested) {
    if (!S || Leaves) {
      return;
    }
    if (isa<ReturnStmt, GotoStmt, CXXThrowExpr>(S) || (!Nested && isa<BreakStmt>(S))) {
      Leaves = true;
      return;
    }
    const bool Inner = Nested || isa<ForStmt, CXXForRangeStmt, WhileStmt, DoStmt, SwitchStmt>(S);
    for (const Stmt *Child : S->children()) {
      Walk(Child, Inner);
    }
  };
  for (const Stmt *Child : Body->children()) {
    Walk(Child, false);
  }
  return Leaves;
}

} // namespace accel::rewrites
