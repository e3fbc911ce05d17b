//===- BatchCoupling.cpp - Losses that couple the rows of a batch ---------===//
#include "analysis/BatchCoupling.h"

#include "analysis/BatchValues.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/ExprCXX.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace clang;

namespace accel::rewrites {
namespace {

/// How many variables and functions deep the loss is followed.
constexpr int MaxDepth = 4;

/// The function of LibTorch's that Call calls, without its namespace (`mm` of torch::mm), or
/// "".
llvm::StringRef libTorchFunction(const CallExpr *Call) {
  const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
  if (!Callee || isa<CXXMethodDecl>(Callee) || !Callee->getDeclName().isIdentifier()) {
    return "";
  }
  const llvm::StringRef Name = qualifiedName(Callee);
  return Name.starts_with("torch::") || Name.starts_with("at::") ? Callee->getName() : "";
}

/// An integer literal as written, or -1000 (no dimension).
int64_t literalDim(const Expr *E) {
  E = E->IgnoreParenImpCasts();
  if (const auto *Negative = dyn_cast<UnaryOperator>(E);
      Negative && Negative->getOpcode() == UO_Minus) {
    const auto *Literal = dyn_cast<IntegerLiteral>(Negative->getSubExpr()->IgnoreParenImpCasts());
    return Literal ? -Literal->getValue().getSExtValue() : -1000;
  }
  const auto *Literal = dyn_cast<IntegerLiteral>(E);
  return Literal ? Literal->getValue().getSExtValue() : -1000;
}

/// The tensor E transposes so that its rows become columns (`z.t()`, `z.T()`,
/// `z.transpose(0, 1)`, `torch::transpose(z, 1, 0)`), or null.
const Expr *transposedRows(const Expr *E) {
  E = spelled(E);
  const llvm::StringRef Method = tensorMethodName(E);
  if (Method == "t" || Method == "T") {
    return cast<CXXMemberCallExpr>(E)->getImplicitObjectArgument();
  }
  if (Method == "transpose") {
    const auto *Call = cast<CXXMemberCallExpr>(E);
    if (Call->getNumArgs() == 2) {
      const int64_t A = literalDim(Call->getArg(0)), B = literalDim(Call->getArg(1));
      if ((A == 0 && B == 1) || (A == 1 && B == 0)) {
        return Call->getImplicitObjectArgument();
      }
    }
    return nullptr;
  }
  const auto *Call = dyn_cast_or_null<CallExpr>(E);
  const llvm::StringRef Function = libTorchFunction(Call);
  if (Function == "t" && Call->getNumArgs() == 1) {
    return Call->getArg(0);
  }
  if (Function == "transpose" && Call->getNumArgs() == 3) {
    const int64_t A = literalDim(Call->getArg(1)), B = literalDim(Call->getArg(2));
    return (A == 0 && B == 1) || (A == 1 && B == 0) ? Call->getArg(0) : nullptr;
  }
  return nullptr;
}

struct CouplingSearch {
  ASTContext &Ctx;
  llvm::SmallPtrSet<const Decl *, 8> Followed;
  const Expr *Found = nullptr;

  bool rowsOfBatch(const Expr *E) { return classifyBatchValue(E, Ctx) == BatchValue::PerSample; }

  /// A value reduced over the batch (a mean or a sum of it), not a count of its samples.
  bool reducedOverBatch(const Expr *E) {
    const BatchValue Kind = classifyBatchValue(E, Ctx);
    return (Kind == BatchValue::Mean || Kind == BatchValue::Sum) && !countsBatchSamples(E);
  }

  /// Rows, the other operand of a transposed product, or a local variable holding one
  /// (`auto zt = z2.t();`).
  const Expr *transposedOperand(const Expr *E) {
    if (const Expr *Rows = transposedRows(E)) {
      return Rows;
    }
    const VarDecl *Var = namedVar(E);
    return Var && Var->isLocalVarDecl() && Var->getInit() ? transposedRows(Var->getInit())
                                                          : nullptr;
  }

  /// Whether E relates the batch's rows to each other (BatchCoupling.h).
  bool couples(const Expr *E) {
    const Expr *Left = nullptr, *Right = nullptr;
    bool Arithmetic = false, Product = false, Distances = false;
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E);
        Operator && Operator->getNumArgs() == 2) {
      const OverloadedOperatorKind Kind = Operator->getOperator();
      Arithmetic = Kind == OO_Plus || Kind == OO_Minus || Kind == OO_Star || Kind == OO_Slash;
      Left = Operator->getArg(0);
      Right = Operator->getArg(1);
    } else if (const llvm::StringRef Method = tensorMethodName(E); !Method.empty()) {
      const auto *Call = cast<CXXMemberCallExpr>(E);
      if (Call->getNumArgs() >= 1) {
        Left = Call->getImplicitObjectArgument();
        Right = Call->getArg(0);
        Arithmetic = Method == "add" || Method == "sub" || Method == "mul" || Method == "div";
        Product = Method == "mm" || Method == "matmul";
      }
    } else if (const auto *Call = dyn_cast<CallExpr>(E); Call && Call->getNumArgs() >= 2) {
      const llvm::StringRef Function = libTorchFunction(Call);
      Left = Call->getArg(0);
      Right = Call->getArg(1);
      Arithmetic = Function == "add" || Function == "sub" || Function == "mul" || Function == "div";
      Product = Function == "mm" || Function == "matmul";
      Distances = Function == "cdist";
    }
    if (Arithmetic) {
      return (rowsOfBatch(Left) && reducedOverBatch(Right)) ||
             (reducedOverBatch(Left) && rowsOfBatch(Right));
    }
    if (Product) {
      const Expr *Rows = transposedOperand(Right);
      return Rows && rowsOfBatch(Left) && rowsOfBatch(Rows);
    }
    return Distances && rowsOfBatch(Left) && rowsOfBatch(Right);
  }

  /// Searches E, the local variables of Scope it reads (their initializers and the values
  /// assigned to them inside Scope), and the bodies of the main file's functions it calls.
  void search(const Expr *E, const Stmt *Scope, int Depth) {
    if (!E || Found || Depth > MaxDepth) {
      return;
    }
    const SourceManager &SM = Ctx.getSourceManager();
    auto Inside = [&](SourceLocation Loc) {
      return SM.isPointWithin(SM.getExpansionLoc(Loc), SM.getExpansionLoc(Scope->getBeginLoc()),
                              SM.getExpansionLoc(Scope->getEndLoc()));
    };
    forEachStmt(E, [&](const Stmt *S) {
      const auto *X = dyn_cast<Expr>(S);
      if (Found || !X) {
        return;
      }
      if (couples(X)) {
        Found = X;
        return;
      }
      if (const auto *Ref = dyn_cast<DeclRefExpr>(X)) {
        const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
        if (!Var || !Var->isLocalVarDecl() || !Inside(Var->getLocation()) ||
            !Followed.insert(Var).second) {
          return;
        }
        search(Var->getInit(), Scope, Depth + 1);
        for (const Expr *Value : assignedValues(Var)) {
          if (Inside(Value->getBeginLoc())) {
            search(Value, Scope, Depth + 1);
          }
        }
        return;
      }
      // A helper of the program (`nt_xent(z1, z2, tau)`, a model's forward): what it returns.
      const auto *Call = dyn_cast<CallExpr>(X);
      const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
      const Stmt *Body = Callee ? Callee->getBody() : nullptr;
      if (!Body || !SM.isWrittenInMainFile(SM.getExpansionLoc(Body->getBeginLoc())) ||
          !Followed.insert(Callee).second) {
        return;
      }
      forEachStmt(Body, [&](const Stmt *Inner) {
        if (const auto *Return = dyn_cast<ReturnStmt>(Inner); Return && Return->getRetValue()) {
          search(Return->getRetValue(), Body, Depth + 1);
        }
      });
    });
  }
};

} // namespace

const Expr *rowCoupling(const Expr *Loss, const Stmt *Scope, ASTContext &Ctx) {
  if (!Loss || !Scope) {
    return nullptr;
  }
  CouplingSearch Search{Ctx, {}, nullptr};
  Search.search(Loss, Scope, 0);
  return Search.Found;
}

} // namespace accel::rewrites
