//===- BatchValues.cpp - What a value computed from a batch is ------------===//
#include "analysis/BatchValues.h"

#include "analysis/CallGraph.h"
#include "analysis/DivergentSteps.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"

#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

using namespace clang;

namespace accel::rewrites {
namespace {

/// How many local variables deep a value is followed (through their initializers or
/// assignments); the expressions themselves are walked whole.
constexpr int MaxDepth = 6;

/// A written integer literal argument, or -1.
int64_t literalArg(llvm::ArrayRef<const Expr *> Args, size_t Index) {
  if (Index >= Args.size()) {
    return -1;
  }
  // `sum(1)` passes an at::IntArrayRef made from the literal.
  const Expr *Arg = Args[Index]->IgnoreImplicit();
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(Arg);
      Construct && !isa<CXXTemporaryObjectExpr>(Construct) && Construct->getNumArgs() == 1) {
    Arg = Construct->getArg(0)->IgnoreImplicit();
  }
  const auto *Literal = dyn_cast<IntegerLiteral>(Arg->IgnoreParenImpCasts());
  return Literal ? Literal->getValue().getSExtValue() : -1;
}

/// Visits every statement of Arguments, and of the initializer of a local options variable
/// they name (`auto options = CrossEntropyFuncOptions().ignore_index(0);` passed to
/// cross_entropy), a few levels deep.
void forEachOptionStmt(const Stmt *Arguments, const std::function<void(const Stmt *)> &Visit,
                       int Depth = 0) {
  forEachStmt(Arguments, [&](const Stmt *S) {
    Visit(S);
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    const CXXRecordDecl *Type = Var ? Var->getType()->getAsCXXRecordDecl() : nullptr;
    if (Depth < 3 && Var && Var->isLocalVarDecl() && Var->getInit() && Type &&
        Type->getDeclName().isIdentifier() && Type->getName().ends_with("Options")) {
      forEachOptionStmt(Var->getInit(), Visit, Depth + 1);
    }
  });
}

/// Whether the options among Arguments weigh classes or ignore some (`weight(w)`,
/// `ignore_index(k)` of CrossEntropyLoss's or NLLLoss's options).
bool weighsClasses(const Stmt *Arguments) {
  bool Found = false;
  forEachOptionStmt(Arguments, [&](const Stmt *S) {
    const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
    const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
    if (Found || !Method || !Method->getDeclName().isIdentifier() ||
        !Method->getParent()->getDeclName().isIdentifier()) {
      return;
    }
    llvm::StringRef Class = Method->getParent()->getName();
    Found = (Method->getName() == "weight" || Method->getName() == "ignore_index") &&
            (Class.starts_with("CrossEntropy") || Class.starts_with("NLLLoss")) &&
            Class.ends_with("Options");
  });
  return Found;
}

/// What a loss computes, from the reduction named among its arguments or options: a sum
/// (Reduction::Sum, torch::kSum), a value per sample (None, kNone), else the default mean,
/// unless classes are weighed: that mean divides by the weights of the batch's targets, which
/// no rule combines.
BatchValue lossReduction(const Stmt *Arguments) {
  BatchValue Found = BatchValue::Mean;
  forEachOptionStmt(Arguments, [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    if (!Ref || !Ref->getDecl()->getDeclName().isIdentifier()) {
      return;
    }
    llvm::StringRef Name = Ref->getDecl()->getName();
    if (Name == "kSum" || (isa<EnumConstantDecl>(Ref->getDecl()) && Name == "Sum")) {
      Found = BatchValue::Sum;
    } else if (Name == "kNone" || (isa<EnumConstantDecl>(Ref->getDecl()) && Name == "None")) {
      Found = BatchValue::PerSample;
    }
  });
  return Found == BatchValue::Mean && weighsClasses(Arguments) ? BatchValue::Unknown : Found;
}

/// A loss function of LibTorch's (torch::nn::functional::mse_loss, torch::cross_entropy_loss,
/// at::nll_loss, ...).
bool isLossFunction(const FunctionDecl *Function) {
  if (!Function || !Function->getDeclName().isIdentifier()) {
    return false;
  }
  std::string Name = qualifiedName(Function);
  if (!llvm::StringRef(Name).starts_with("torch::") && !llvm::StringRef(Name).starts_with("at::")) {
    return false;
  }
  llvm::StringRef Short = Function->getName();
  return Short.contains("loss") || Short.starts_with("cross_entropy") ||
         Short.starts_with("binary_cross_entropy") || Short == "kl_div";
}

/// A loss module (torch::nn::MSELoss, CrossEntropyLoss, ... or their Impl).
bool isLossModuleType(QualType Type) {
  Type = Type.getNonReferenceType();
  if (Type->isPointerType()) {
    Type = Type->getPointeeType();
  }
  const auto *Record = Type->getAsCXXRecordDecl();
  return Record && Record->getDeclName().isIdentifier() && Record->getName().contains("Loss") &&
         llvm::StringRef(qualifiedName(Record)).starts_with("torch::nn::");
}

/// The variable or field a call is made on: `criterion` in `criterion(x, y)` and
/// `criterion->forward(x, y)`.
const ValueDecl *calledObject(const Expr *Object) {
  Object = Object ? Object->IgnoreParenImpCasts() : nullptr;
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(Object);
      Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
    Object = Arrow->getArg(0)->IgnoreParenImpCasts();
  }
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Object)) {
    return Ref->getDecl();
  }
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(Object)) {
    return Member->getMemberDecl();
  }
  return nullptr;
}

/// What a loss module's call computes, from the options it was made with.
BatchValue lossModuleCall(const ValueDecl *Module, ASTContext &Ctx) {
  // A parameter (`train(..., torch::nn::CrossEntropyLoss &criterion)`): the modules its
  // callers pass, which must agree; a caller passing something else cannot be told.
  if (const auto *Param = dyn_cast_or_null<ParmVarDecl>(Module)) {
    const auto *Function = dyn_cast<FunctionDecl>(Param->getDeclContext());
    llvm::ArrayRef<const CallExpr *> Calls =
        Function ? callsInMainFile(Function, Ctx) : llvm::ArrayRef<const CallExpr *>();
    std::optional<BatchValue> Passed;
    const unsigned Index = Param->getFunctionScopeIndex();
    for (const CallExpr *Call : Calls) {
      const VarDecl *Var = Index < Call->getNumArgs() ? namedVar(Call->getArg(Index)) : nullptr;
      const BatchValue Kind = Var && Var->isLocalVarDecl() && !isa<ParmVarDecl>(Var)
                                  ? lossReduction(Var->getInit())
                                  : BatchValue::Unknown;
      Passed = !Passed || *Passed == Kind ? Kind : BatchValue::Unknown;
    }
    return Passed.value_or(BatchValue::Unknown);
  }
  if (const auto *Var = dyn_cast_or_null<VarDecl>(Module)) {
    return lossReduction(Var->getInit());
  }
  if (const auto *Field = dyn_cast_or_null<FieldDecl>(Module)) {
    return lossReduction(Field->getInClassInitializer());
  }
  return BatchValue::Mean;
}

BatchValue product(BatchValue A, BatchValue B) {
  if (A == BatchValue::Constant) {
    return B;
  }
  if (B == BatchValue::Constant) {
    return A;
  }
  // A mean times the batch size is the batch's sum.
  if ((A == BatchValue::Mean && B == BatchValue::Sum) ||
      (A == BatchValue::Sum && B == BatchValue::Mean)) {
    return BatchValue::Sum;
  }
  if (A == BatchValue::PerSample && B == BatchValue::PerSample) {
    return BatchValue::PerSample;
  }
  return BatchValue::Unknown;
}

BatchValue quotient(BatchValue A, BatchValue B) {
  if (B == BatchValue::Constant) {
    return A;
  }
  // A sum over the batch divided by the batch size (or by another sum over it) is a mean.
  if (A == BatchValue::Sum && B == BatchValue::Sum) {
    return BatchValue::Mean;
  }
  if (A == BatchValue::PerSample && B == BatchValue::PerSample) {
    return BatchValue::PerSample;
  }
  return BatchValue::Unknown;
}

/// std::vector<torch::data::Example<...>>: the samples of one batch.
bool isExampleList(QualType Type) {
  const auto *List = dyn_cast_or_null<ClassTemplateSpecializationDecl>(
      Type.getNonReferenceType()->getAsCXXRecordDecl());
  if (!List || List->getQualifiedNameAsString() != "std::vector" ||
      List->getTemplateArgs().size() < 1 ||
      List->getTemplateArgs()[0].getKind() != TemplateArgument::Type) {
    return false;
  }
  const auto *Element = List->getTemplateArgs()[0].getAsType()->getAsCXXRecordDecl();
  return Element && Element->getQualifiedNameAsString() == "torch::data::Example";
}

/// Whether E is a comparison of tensors (`pred.eq(target)`, `x > 0`), as a mask of samples.
bool isMask(const Expr *E, int Depth) {
  E = E ? spelled(E) : nullptr;
  if (!E || Depth > MaxDepth) {
    return false;
  }
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E)) {
    OverloadedOperatorKind Kind = Operator->getOperator();
    return Kind == OO_EqualEqual || Kind == OO_ExclaimEqual || Kind == OO_Less ||
           Kind == OO_Greater || Kind == OO_LessEqual || Kind == OO_GreaterEqual;
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    llvm::StringRef Method = tensorMethodName(Call);
    if (Method == "eq" || Method == "ne" || Method == "gt" || Method == "lt" || Method == "ge" ||
        Method == "le") {
      return true;
    }
    return (Method == "to" || Method == "toType" || Method == "float" || Method == "double" ||
            Method == "detach" || Method == "type_as") &&
           isMask(Call->getImplicitObjectArgument(), Depth + 1);
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    return Var && Var->hasLocalStorage() && !isa<ParmVarDecl>(Var) &&
           isMask(Var->getInit(), Depth + 1);
  }
  return false;
}

/// Whether E counts the batch's samples: its size (`x.size(0)`, `numel()`), a mask's sum
/// (`mask.sum()`), or a local variable holding one.
bool countsSamples(const Expr *E, int Depth) {
  E = E ? spelled(E) : nullptr;
  if (!E || Depth > MaxDepth) {
    return false;
  }
  if (const auto *Cast = dyn_cast<ExplicitCastExpr>(E)) {
    return countsSamples(Cast->getSubExpr(), Depth + 1);
  }
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E)) {
    llvm::StringRef Method = tensorMethodName(Call);
    // A tensor's size or numel, or a batch's that is a list of samples (`batch.size()`).
    const CXXMethodDecl *Declared = Call->getMethodDecl();
    if (Method == "size" || Method == "numel" ||
        (Declared && Declared->getDeclName().isIdentifier() && Declared->getName() == "size" &&
         isExampleList(Call->getImplicitObjectArgument()->getType()))) {
      return true;
    }
    if (Method == "sum") {
      return isMask(Call->getImplicitObjectArgument(), Depth + 1);
    }
    return (Method == "item" || Method == "to" || Method == "float" || Method == "double" ||
            Method == "toType" || Method == "detach" || Method == "cpu") &&
           countsSamples(Call->getImplicitObjectArgument(), Depth + 1);
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const std::string Name = qualifiedName(Call->getDirectCallee());
    return (Name == "torch::sum" || Name == "at::sum") && Call->getNumArgs() >= 1 &&
           isMask(Call->getArg(0), Depth + 1);
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    if (!Var || !Var->hasLocalStorage() || isa<ParmVarDecl>(Var)) {
      return false;
    }
    auto Values = assignedValues(Var);
    return (Var->getInit() || !Values.empty()) &&
           (!Var->getInit() || declaredEmpty(Var) || countsSamples(Var->getInit(), Depth + 1)) &&
           llvm::all_of(Values, [&](const Expr *V) { return countsSamples(V, Depth + 1); });
  }
  return false;
}

/// Dividend / Divisor: a sum over the batch divided by a count of its samples is a mean; by
/// another sum (R² as `1 - ss_res / ss_tot`) it is a ratio no rule combines.
BatchValue division(const Expr *Dividend, const Expr *Divisor, ASTContext &Ctx, int Depth) {
  BatchValue A = classifyBatchValue(Dividend, Ctx, Depth);
  BatchValue B = classifyBatchValue(Divisor, Ctx, Depth);
  if (A == BatchValue::Sum && B == BatchValue::Sum && !countsSamples(Divisor, 0)) {
    return BatchValue::Unknown;
  }
  return quotient(A, B);
}

BatchValue sumOf(BatchValue A, BatchValue B) {
  if (A == B) {
    return A;
  }
  // 1 - accuracy is a mean too; a sum plus a constant is not a sum over the samples.
  if ((A == BatchValue::Mean && B == BatchValue::Constant) ||
      (A == BatchValue::Constant && B == BatchValue::Mean)) {
    return BatchValue::Mean;
  }
  return BatchValue::Unknown;
}

BatchValue arithmetic(BinaryOperatorKind Op, BatchValue A, BatchValue B) {
  // A maximum scaled or shifted may turn into a minimum (by a negative number) or stop being
  // either: not followed.
  auto Extreme = [](BatchValue V) { return V == BatchValue::Max || V == BatchValue::Min; };
  if (Extreme(A) || Extreme(B)) {
    return BatchValue::Unknown;
  }
  // One sample's values with constants stay one sample's; with anything else, not followed.
  if (A == BatchValue::Row || B == BatchValue::Row) {
    auto RowOrConstant = [](BatchValue V) {
      return V == BatchValue::Row || V == BatchValue::Constant;
    };
    return RowOrConstant(A) && RowOrConstant(B) ? BatchValue::Row : BatchValue::Unknown;
  }
  switch (Op) {
  case BO_Mul:
    return product(A, B);
  case BO_Div:
    return quotient(A, B);
  case BO_Add:
  case BO_Sub:
    return sumOf(A, B);
  default:
    return BatchValue::Unknown;
  }
}

/// Whether E reads a local variable that a change reaches (a loop counter `i` stepped by the
/// loop): its initializer does not say what E is.
bool readsChangedVariable(const Expr *E, ASTContext &Ctx) {
  bool Changed = false;
  forEachStmt(E, [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
    Changed = Changed || (Var && Var->hasLocalStorage() && changeReaches(Var, Ref, Ctx));
  });
  return Changed;
}

BatchValue tensorMethodCall(const CXXMemberCallExpr *Call, llvm::StringRef Method, ASTContext &Ctx,
                            int Depth) {
  auto Args = writtenArgs(Call);
  auto Object = [&] { return classifyBatchValue(Call->getImplicitObjectArgument(), Ctx, Depth); };
  if (Method == "grad" || Method == "mutable_grad") {
    // A parameter's gradient, read after accelerator.backward: synchronised, the same on
    // every process (a gradient norm logged by hand is no batch statistic).
    return BatchValue::Constant;
  }
  // Conversions, copies and new shapes of the same values (`counts.view({2, 2})`) are what
  // they convert.
  if (Method == "item" || Method == "to" || Method == "cpu" || Method == "cuda" ||
      Method == "detach" || Method == "clone" || Method == "contiguous" || Method == "toType" ||
      Method == "type" || Method == "float" || Method == "double" || Method == "squeeze" ||
      Method == "view" || Method == "reshape" || Method == "view_as" || Method == "reshape_as" ||
      Method == "flatten" || Method == "unsqueeze") {
    return Object();
  }
  if (Object() == BatchValue::Constant) {
    // What is the same everywhere stays so (g.pow(2).sum()), unless an argument is not:
    // `X.slice(0, i, i + bs)` of data every process holds whole is this process's batch
    // once the loop over i is sharded.
    if (llvm::all_of(Args, [&](const Expr *Arg) {
          return classifyBatchValue(Arg, Ctx, Depth) == BatchValue::Constant &&
                 !readsChangedVariable(Arg, Ctx);
        })) {
      return BatchValue::Constant;
    }
    return Method == "slice" || Method == "narrow" || Method == "index_select" || Method == "index"
               ? BatchValue::PerSample
               : BatchValue::Unknown;
  }
  if (Object() == BatchValue::Row) {
    // A sum, mean or maximum of one sample's values is still that sample's.
    return Method == "size" || Method == "numel" ? BatchValue::Constant : BatchValue::Row;
  }
  if (const auto *Taken = dyn_cast<CXXOperatorCallExpr>(spelled(Call->getImplicitObjectArgument()));
      Taken && Taken->getOperator() == OO_Subscript) {
    return BatchValue::Unknown; // a row chosen at run time, or the last one (`out[-1].sum()`)
  }
  if (Method == "sum" || Method == "nansum" || Method == "mean" || Method == "nanmean") {
    BatchValue Reduced = Method.ends_with("sum") ? BatchValue::Sum : BatchValue::Mean;
    if (Args.empty() || literalArg(Args, 0) == 0) {
      return Reduced; // over the whole tensor, or over the batch's dimension
    }
    return literalArg(Args, 0) > 0 ? BatchValue::PerSample : BatchValue::Unknown;
  }
  if ((Method == "max" || Method == "min" || Method == "amax" || Method == "amin") &&
      Args.empty()) {
    // Over the whole tensor: over the batch's samples for values per sample; a number that
    // is one already stays what it is.
    BatchValue Of = Object();
    if (Of == BatchValue::PerSample) {
      return Method.ends_with("max") ? BatchValue::Max : BatchValue::Min;
    }
    return Of == BatchValue::Sum || Of == BatchValue::Mean || Of == BatchValue::Max ||
                   Of == BatchValue::Min
               ? Of
               : BatchValue::Unknown;
  }
  if (Method == "size") {
    int64_t Dim = literalArg(Args, 0);
    return Dim == 0 ? BatchValue::Sum : Dim > 0 ? BatchValue::Constant : BatchValue::Unknown;
  }
  if (Method == "numel") {
    return BatchValue::Sum;
  }
  // Any other operation on data not yet reduced over the batch (eq, argmax(1), pow, a row)
  // keeps a value per sample; on a reduced value it is not a sum or a mean any more.
  BatchValue Of = Object();
  return Of == BatchValue::PerSample ? BatchValue::PerSample : BatchValue::Unknown;
}

} // namespace

bool countsBatchSamples(const Expr *E) { return countsSamples(E, 0); }

bool declaredEmpty(const VarDecl *Var) {
  const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(
      Var->getInit() ? Var->getInit()->IgnoreImplicit() : nullptr);
  return !Var->getInit() || (Construct && Construct->getNumArgs() == 0);
}

llvm::SmallVector<const Expr *, 2> assignedValues(const VarDecl *Var) {
  llvm::SmallVector<const Expr *, 2> Values;
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  forEachStmt(Function ? Function->getBody() : nullptr, [&](const Stmt *S) {
    const Expr *Target = nullptr, *Value = nullptr;
    if (const auto *Assign = dyn_cast<BinaryOperator>(S);
        Assign && Assign->getOpcode() == BO_Assign) {
      Target = Assign->getLHS();
      Value = Assign->getRHS();
    } else if (const auto *Call = dyn_cast<CXXOperatorCallExpr>(S);
               Call && Call->getOperator() == OO_Equal && Call->getNumArgs() == 2) {
      Target = Call->getArg(0);
      Value = Call->getArg(1);
    }
    const auto *Ref =
        dyn_cast_or_null<DeclRefExpr>(Target ? Target->IgnoreParenImpCasts() : nullptr);
    if (Ref && Ref->getDecl() == Var) {
      Values.push_back(Value);
    }
  });
  return Values;
}

namespace {
bool isScalarType(QualType Type) {
  const auto *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
  return Record && Record->getQualifiedNameAsString() == "c10::Scalar";
}

/// The variable of a range-for over a module's parameters (`for (auto &p :
/// model->parameters())`).
bool iteratesModuleParameters(const VarDecl *Var, ASTContext &Ctx) {
  const CXXForRangeStmt *Loop = rangeForDeclaring(Var, Ctx);
  if (!Loop) {
    return false;
  }
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(spelled(Loop->getRangeInit()));
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  return Method && Method->getDeclName().isIdentifier() && Method->getName() == "parameters" &&
         Method->getParent()->getQualifiedNameAsString() == "torch::nn::Module";
}
} // namespace

BatchValue classifyBatchValue(const Expr *E, ASTContext &Ctx, int Depth) {
  if (!E || Depth > MaxDepth) {
    return BatchValue::Unknown;
  }
  E = E->IgnoreParenImpCasts();
  if (const auto *Cast = dyn_cast<ExplicitCastExpr>(E)) {
    return classifyBatchValue(Cast->getSubExpr(), Ctx, Depth);
  }
  if (const auto *Temporary = dyn_cast<MaterializeTemporaryExpr>(E)) {
    return classifyBatchValue(Temporary->getSubExpr(), Ctx, Depth);
  }
  if (const auto *Bind = dyn_cast<CXXBindTemporaryExpr>(E)) {
    return classifyBatchValue(Bind->getSubExpr(), Ctx, Depth);
  }
  if (const auto *Construct = dyn_cast<CXXConstructExpr>(E);
      Construct && Construct->getNumArgs() == 1 &&
      (isTensorType(E->getType()) || isScalarType(E->getType()))) {
    // A copy, or a number made a c10::Scalar (`loss * batch.data.size(0)` on a tensor).
    return classifyBatchValue(Construct->getArg(0), Ctx, Depth);
  }
  if (!E->isValueDependent() && !E->isTypeDependent() && E->isEvaluatable(Ctx)) {
    return BatchValue::Constant;
  }
  // What the accelerator returns from a collective is the same on every process: the global
  // norm of the synchronised gradients (a clipping accel-clip makes the accelerator's), a
  // reduce. Added up, it is like a step counter's increment.
  if (isGradientClipping(E) || isMethodCall(E, "accelerate::Accelerator", "clip_grad_norm_") ||
      isMethodCall(E, "accelerate::Accelerator", "reduce")) {
    return BatchValue::Constant;
  }
  if (const auto *Unary = dyn_cast<UnaryOperator>(E);
      Unary && (Unary->getOpcode() == UO_Minus || Unary->getOpcode() == UO_Plus)) {
    return classifyBatchValue(Unary->getSubExpr(), Ctx, Depth);
  }
  if (const auto *Binary = dyn_cast<BinaryOperator>(E)) {
    if (Binary->getOpcode() == BO_Div) {
      return division(Binary->getLHS(), Binary->getRHS(), Ctx, Depth);
    }
    return arithmetic(Binary->getOpcode(), classifyBatchValue(Binary->getLHS(), Ctx, Depth),
                      classifyBatchValue(Binary->getRHS(), Ctx, Depth));
  }
  if (const auto *Choice = dyn_cast<ConditionalOperator>(E)) {
    BatchValue A = classifyBatchValue(Choice->getTrueExpr(), Ctx, Depth);
    return A == classifyBatchValue(Choice->getFalseExpr(), Ctx, Depth) ? A : BatchValue::Unknown;
  }
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(E)) {
    OverloadedOperatorKind Kind = Operator->getOperator();
    if (Kind == OO_Call && Operator->getNumArgs() >= 1) {
      const ValueDecl *Callee = calledObject(Operator->getArg(0));
      if (Callee && isLossModuleType(Callee->getType())) {
        return lossModuleCall(Callee, Ctx);
      }
    }
    if (Kind == OO_Subscript) {
      // One row of the batch. Row k of process 0's part is row k of the batch only for a
      // small literal k under split_batches; the last row (`x[-1]`, `x[x.size(0) - 1]`) or a
      // row chosen at run time is another sample than the original's: not followed.
      const auto *Index = Operator->getNumArgs() == 2
                              ? dyn_cast<IntegerLiteral>(spelled(Operator->getArg(1)))
                              : nullptr;
      if (!Index) {
        return BatchValue::Unknown;
      }
      // `x[0][1]`: an element of the row the inner subscript takes.
      if (const auto *Inner = dyn_cast<CXXOperatorCallExpr>(spelled(Operator->getArg(0)));
          Inner && Inner->getOperator() == OO_Subscript) {
        return classifyBatchValue(Inner, Ctx, Depth);
      }
      return BatchValue::Row;
    }
    if (Operator->getNumArgs() == 2) {
      BinaryOperatorKind Op = Kind == OO_Star    ? BO_Mul
                              : Kind == OO_Slash ? BO_Div
                              : Kind == OO_Plus  ? BO_Add
                              : Kind == OO_Minus ? BO_Sub
                                                 : BO_Comma;
      if (Op == BO_Div) {
        return division(Operator->getArg(0), Operator->getArg(1), Ctx, Depth);
      }
      if (Op != BO_Comma) {
        return arithmetic(Op, classifyBatchValue(Operator->getArg(0), Ctx, Depth),
                          classifyBatchValue(Operator->getArg(1), Ctx, Depth));
      }
    }
  }
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(E)) {
    if (llvm::StringRef Method = tensorMethodName(Member); !Method.empty()) {
      return tensorMethodCall(Member, Method, Ctx, Depth);
    }
    // `loss.item().toDouble()` converts the c10::Scalar that item() returns: it is classified
    // as that scalar, as `loss.item<double>()` is.
    if (const CXXMethodDecl *Method = Member->getMethodDecl();
        Method && isScalarType(Member->getImplicitObjectArgument()->getType()) &&
        Method->getDeclName().isIdentifier() && Method->getName().starts_with("to")) {
      return classifyBatchValue(Member->getImplicitObjectArgument(), Ctx, Depth);
    }
    // A batch of a loader without Stack is a std::vector of its samples (Examples): its
    // size() is the batch's size.
    if (const CXXMethodDecl *Method = Member->getMethodDecl();
        Method && Method->getDeclName().isIdentifier() && Method->getName() == "size" &&
        Member->getNumArgs() == 0 &&
        isExampleList(Member->getImplicitObjectArgument()->getType())) {
      return BatchValue::Sum;
    }
    const ValueDecl *Object = calledObject(Member->getImplicitObjectArgument());
    if (Object && isLossModuleType(Object->getType())) {
      return lossModuleCall(Object, Ctx); // criterion->forward(output, target)
    }
  }
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    std::string Name = qualifiedName(Callee);
    auto Args = writtenArgs(Call);
    // A function of values that are the same everywhere (std::sqrt of a norm made of
    // synchronised gradients) gives one too.
    if (Callee && !Args.empty() && llvm::all_of(Args, [&](const Expr *Arg) {
          return classifyBatchValue(Arg, Ctx, Depth) == BatchValue::Constant;
        })) {
      return BatchValue::Constant;
    }
    if (isLossFunction(Callee)) {
      return lossReduction(Call);
    }
    if ((Name == "torch::sum" || Name == "at::sum") && Args.size() == 1) {
      return BatchValue::Sum;
    }
    if ((Name == "torch::mean" || Name == "at::mean") && Args.size() == 1) {
      return BatchValue::Mean;
    }
    // How often each class occurs among the batch's values: counts of samples.
    if ((Name == "torch::bincount" || Name == "at::bincount") && !Args.empty() &&
        classifyBatchValue(Args[0], Ctx, Depth + 1) == BatchValue::PerSample) {
      return BatchValue::Sum;
    }
    // A helper of this file (a training step returning `loss.item<float>()`): what all its
    // returns agree on.
    const SourceManager &SM = Ctx.getSourceManager();
    if (const Stmt *Body = Callee ? Callee->getBody() : nullptr;
        Body && SM.isWrittenInMainFile(SM.getExpansionLoc(Body->getBeginLoc()))) {
      std::optional<BatchValue> Returned;
      forEachStmt(Body, [&](const Stmt *S) {
        if (const auto *Return = dyn_cast<ReturnStmt>(S); Return && Return->getRetValue()) {
          BatchValue Kind = classifyBatchValue(Return->getRetValue(), Ctx, Depth + 1);
          Returned = !Returned || *Returned == Kind ? Kind : BatchValue::Unknown;
        }
      });
      if (Returned) {
        return *Returned;
      }
    }
  }
  // A tensor member of a model (`model->weight`, `net->fc->bias`): a parameter or buffer, the
  // same on every process once the model is prepared (a penalty on the weights).
  if (const auto *Member = dyn_cast<MemberExpr>(E); Member && isTensorType(Member->getType())) {
    QualType Base = Member->getBase()->getType();
    if (Member->isArrow() && Base->isPointerType()) {
      Base = Base->getPointeeType();
    }
    if (isModelType(Base)) {
      return BatchValue::Constant;
    }
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    if (Var && heldWholeByEveryProcess(Var, Ctx)) {
      // Data every process holds whole (the tensors a loop cuts its batches from, a
      // validation set): what is computed from it alone, and the prepared model, is the same
      // everywhere.
      return BatchValue::Constant;
    }
    if (Var && iteratesModuleParameters(Var, Ctx)) {
      // A parameter of a model (`for (auto &p : model->parameters()) l2 += p.pow(2).sum();`,
      // a penalty): the same on every process, as the prepared model is.
      return BatchValue::Constant;
    }
    if (Var && Var->isLocalVarDecl() && !isa<ParmVarDecl>(Var)) {
      if (!declaredEmpty(Var)) {
        // A tensor given a first value and then changed (`torch::Tensor loss = zeros({});`,
        // then `loss = loss + step_loss` per time step): its first value does not say what
        // it holds where a change reaches this read.
        if (isTensorType(Var->getType()) && changeReaches(Var, Ref, Ctx)) {
          return BatchValue::Unknown;
        }
        return classifyBatchValue(Var->getInit(), Ctx, Depth + 1);
      }
      // `torch::Tensor loss;` assigned in the loop: what every assignment gives it.
      std::optional<BatchValue> Assigned;
      for (const Expr *Value : assignedValues(Var)) {
        BatchValue Kind = classifyBatchValue(Value, Ctx, Depth + 1);
        Assigned = !Assigned || *Assigned == Kind ? Kind : BatchValue::Unknown;
      }
      if (Assigned) {
        return *Assigned;
      }
    }
  }
  // Tensors not reduced by anything above (the batch's data, a model's output) hold a value
  // per sample.
  return isTensorType(E->getType()) ? BatchValue::PerSample : BatchValue::Unknown;
}

namespace {

/// How many local variables deep computedFromTensors follows a value; deeper counts as
/// computed from tensors (the callers decline or warn on that, which is safe).
constexpr int MaxTensorDepth = 6;

struct TensorOrigins {
  const Stmt *FunctionBody;
  /// The caller's answer for an expression before the rules below (computedFromTensors).
  const TensorOriginOverride *Override = nullptr;
  /// The variables being followed: a value that reads itself (`x = x + 1`) adds nothing.
  llvm::SmallPtrSet<const VarDecl *, 8> Following;

  bool fromTensors(const Expr *E, int Depth);

  /// Whether a local variable holds a value computed from tensors: its initializer or any
  /// value stored into it (`=`, `+=`, ...) in its function.
  bool variableFromTensors(const VarDecl *Var, int Depth) {
    if (!Var->hasLocalStorage() || isa<ParmVarDecl>(Var) || Following.contains(Var)) {
      return false; // A parameter or a global: the same on every process.
    }
    if (Depth >= MaxTensorDepth || isTensorType(Var->getType())) {
      return true;
    }
    Following.insert(Var);
    bool Found = Var->getInit() && fromTensors(Var->getInit(), Depth + 1);
    forEachStmt(FunctionBody, [&](const Stmt *S) {
      const auto *Store = dyn_cast<BinaryOperator>(S);
      if (Found || !Store || !Store->isAssignmentOp()) {
        return;
      }
      const auto *Ref = dyn_cast<DeclRefExpr>(Store->getLHS()->IgnoreParenImpCasts());
      Found = Ref && Ref->getDecl() == Var && fromTensors(Store->getRHS(), Depth + 1);
    });
    Following.erase(Var);
    return Found;
  }
};

bool TensorOrigins::fromTensors(const Expr *E, int Depth) {
  if (!E) {
    return false;
  }
  if (Override && *Override) {
    if (std::optional<bool> Answer = (*Override)(E)) {
      return *Answer;
    }
  }
  // What a collective of the accelerator returns is the same on every process
  // (`accelerator.reduce(loss.item<float>(), "mean") < 0.25f`).
  if (const auto *Call = dyn_cast<CXXMemberCallExpr>(E);
      Call && isAcceleratorType(Call->getObjectType())) {
    return false;
  }
  if (isTensorType(E->getType())) {
    return true;
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    return Var && variableFromTensors(Var, Depth);
  }
  for (const Stmt *Child : E->children()) {
    if (fromTensors(dyn_cast_or_null<Expr>(Child), Depth)) {
      return true;
    }
  }
  return false;
}

} // namespace

bool averagesOverClassWeights(const Expr *Loss, ASTContext &Ctx, int Depth) {
  if (!Loss || Depth > MaxDepth) {
    return false;
  }
  const Expr *E = spelled(Loss);
  // Where the options are: a loss function's arguments, a loss module's initializer.
  const Stmt *Options = nullptr;
  if (const auto *Call = dyn_cast<CallExpr>(E)) {
    const ValueDecl *Module = nullptr;
    if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(Call);
        Operator && Operator->getOperator() == OO_Call && Operator->getNumArgs() >= 1) {
      Module = calledObject(Operator->getArg(0));
    } else if (const auto *Member = dyn_cast<CXXMemberCallExpr>(Call)) {
      Module = calledObject(Member->getImplicitObjectArgument());
    }
    if (Module && isLossModuleType(Module->getType())) {
      const auto *Var = dyn_cast<VarDecl>(Module);
      const auto *Field = dyn_cast<FieldDecl>(Module);
      Options = Var ? Var->getInit() : Field ? Field->getInClassInitializer() : nullptr;
    } else if (isLossFunction(Call->getDirectCallee())) {
      Options = Call;
    }
  }
  if (Options) {
    return lossReduction(Options) == BatchValue::Unknown && weighsClasses(Options);
  }
  if (const auto *Ref = dyn_cast<DeclRefExpr>(E)) {
    const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
    if (!Var || !Var->hasLocalStorage() || isa<ParmVarDecl>(Var)) {
      return false;
    }
    if (averagesOverClassWeights(Var->getInit(), Ctx, Depth + 1)) {
      return true;
    }
    return llvm::any_of(assignedValues(Var), [&](const Expr *Value) {
      return averagesOverClassWeights(Value, Ctx, Depth + 1);
    });
  }
  // `loss / accum`, `ce + 0.1 * penalty`: any part.
  return llvm::any_of(E->children(), [&](const Stmt *Child) {
    return averagesOverClassWeights(dyn_cast_or_null<Expr>(Child), Ctx, Depth + 1);
  });
}

bool computedFromTensors(const Expr *E, const Stmt *FunctionBody,
                         const TensorOriginOverride &Override) {
  return TensorOrigins{FunctionBody, &Override, {}}.fromTensors(E, 0);
}

} // namespace accel::rewrites
