//===- MemberTraining.cpp - Training in a class's method ------------------===//
#include "analysis/MemberTraining.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/ExprCXX.h"
#include "llvm/ADT/STLExtras.h"

using namespace clang;

namespace accel::rewrites {
namespace {

/// Through `->` on a smart pointer or a holder: `model_` in `model_->parameters()`.
const Expr *objectOf(const Expr *E) {
  E = E ? E->IgnoreParenImpCasts() : nullptr;
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(E);
      Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
    return Arrow->getArg(0)->IgnoreParenImpCasts();
  }
  return E;
}

/// The arguments an optimizer is constructed with: of `SGD(args)` itself, or through
/// std::make_unique<SGD>(args), std::make_shared, `new SGD(args)` and a smart pointer made
/// from that.
llvm::SmallVector<const Expr *, 4> constructionArgs(const Expr *Init) {
  const Expr *E = Init ? Init->IgnoreImplicit() : nullptr;
  for (int Depth = 0; E && Depth < 4; ++Depth) {
    if (const auto *New = dyn_cast<CXXNewExpr>(E)) {
      E = New->getConstructExpr();
      continue;
    }
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
      if (Construct->getNumArgs() == 1 && isa<CXXNewExpr>(spelled(Construct->getArg(0)))) {
        E = spelled(Construct->getArg(0)); // std::unique_ptr<SGD>(new SGD(...))
        continue;
      }
      return {Construct->arg_begin(), Construct->arg_end()};
    }
    const auto *Call = dyn_cast<CallExpr>(E);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (Callee && (qualifiedName(Callee) == "std::make_unique" ||
                   qualifiedName(Callee) == "std::make_shared")) {
      return {Call->arg_begin(), Call->arg_end()};
    }
    E = spelled(E) != E ? spelled(E) : nullptr;
  }
  return {};
}

/// The model member a constructor initialises with the model its parameter holds, when
/// Object names that parameter: `Trainer(Net net) : model_(net), optimizer_(net->parameters())`
/// builds the optimizer from model_'s parameters, since a holder or shared_ptr copy shares its
/// module. Null for anything else (a module taken by value is a copy).
const FieldDecl *memberSharingParameter(const Expr *Object) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Object ? spelled(Object) : nullptr);
  const auto *Parameter = Ref ? dyn_cast<ParmVarDecl>(Ref->getDecl()) : nullptr;
  const auto *Constructor =
      Parameter ? dyn_cast<CXXConstructorDecl>(Parameter->getDeclContext()) : nullptr;
  const QualType Type = Parameter ? Parameter->getType().getNonReferenceType() : QualType();
  if (!Constructor || !isModelType(Type) || isClassOrDerived(Type, "torch::nn::Module")) {
    return nullptr;
  }
  for (const CXXCtorInitializer *Initializer : Constructor->inits()) {
    const FieldDecl *Member = Initializer->getMember();
    const Expr *Value = Initializer->getInit()->IgnoreImplicit();
    if (const auto *Copy = dyn_cast<CXXConstructExpr>(Value); Copy && Copy->getNumArgs() == 1) {
      Value = Copy->getArg(0); // model_(model): the holder's copy constructor
    }
    const auto *Init = dyn_cast_or_null<DeclRefExpr>(spelled(Value));
    if (Member && isModelType(Member->getType()) &&
        !isClassOrDerived(Member->getType(), "torch::nn::Module") && Init &&
        Init->getDecl() == Parameter) {
      return Member;
    }
  }
  return nullptr;
}

/// The member model whose parameters an optimizer is built from: `model_` in
/// `optimizer_(model_->parameters(), options)` (a constructor's initializer, the member's own,
/// or an assignment in the constructor's body, through a smart pointer too); null when it is
/// built from anything else.
const FieldDecl *modelOfInitializer(const Expr *Init) {
  llvm::SmallVector<const Expr *, 4> Args = constructionArgs(Init);
  if (Args.empty()) {
    return nullptr;
  }
  const auto *Parameters = dyn_cast<CXXMemberCallExpr>(spelled(Args[0]));
  const CXXMethodDecl *Called = Parameters ? Parameters->getMethodDecl() : nullptr;
  if (!Called || !Called->getDeclName().isIdentifier() || Called->getName() != "parameters") {
    return nullptr;
  }
  if (const FieldDecl *Member = memberObject(Parameters->getImplicitObjectArgument())) {
    return Member;
  }
  return memberSharingParameter(objectOf(Parameters->getImplicitObjectArgument()));
}

/// The model that every constructor of the class builds Optimizer from, or null when they
/// build it from something else, from different models, or a constructor is defined in
/// another file.
const FieldDecl *modelOf(const FieldDecl *Optimizer) {
  auto Initializers = memberInitializers(Optimizer);
  if (!Initializers) {
    return nullptr;
  }
  if (Initializers->empty()) {
    return modelOfInitializer(Optimizer->getInClassInitializer());
  }
  const FieldDecl *Model = nullptr;
  for (const Expr *Init : *Initializers) {
    const FieldDecl *Found = modelOfInitializer(Init);
    if (!Found || (Model && Found != Model)) {
      return nullptr;
    }
    Model = Found;
  }
  return Model;
}

} // namespace

std::optional<llvm::SmallVector<const Expr *, 2>> memberInitializers(const FieldDecl *Member) {
  llvm::SmallVector<const Expr *, 2> Result;
  const auto *Class = dyn_cast<CXXRecordDecl>(Member->getParent());
  if (!Class) {
    return std::nullopt;
  }
  for (const CXXConstructorDecl *Declared : Class->ctors()) {
    if (Declared->isImplicit() || Declared->isCopyOrMoveConstructor() || Declared->isDeleted()) {
      continue;
    }
    const auto *Defined = dyn_cast_or_null<CXXConstructorDecl>(Declared->getDefinition());
    if (!Defined) {
      return std::nullopt;
    }
    const Expr *Init = nullptr;
    for (const CXXCtorInitializer *Initializer : Defined->inits()) {
      if (Initializer->getMember() == Member) {
        Init = Initializer->getInit();
      }
    }
    if (Init && isa<CXXDefaultInitExpr>(Init->IgnoreImplicit())) {
      Init = Member->getInClassInitializer();
    }
    // `optimizer_ = std::make_unique<Adam>(...)` or `optimizer_.reset(new Adam(...))` in the
    // body: the last one counts.
    forEachStmt(Defined->getBody(), [&](const Stmt *S) {
      if (const auto *Assign = dyn_cast<CXXOperatorCallExpr>(S);
          Assign && Assign->getOperator() == OO_Equal && Assign->getNumArgs() == 2 &&
          memberObject(Assign->getArg(0)) == Member) {
        Init = Assign->getArg(1);
      } else if (const auto *Reset = dyn_cast<CXXMemberCallExpr>(S);
                 Reset && Reset->getMethodDecl() &&
                 Reset->getMethodDecl()->getDeclName().isIdentifier() &&
                 Reset->getMethodDecl()->getName() == "reset" && Reset->getNumArgs() == 1 &&
                 memberObject(Reset->getImplicitObjectArgument()) == Member) {
        Init = Reset->getArg(0);
      }
    });
    Result.push_back(Init);
  }
  return Result;
}

const FieldDecl *memberObject(const Expr *Object) {
  const Expr *E = objectOf(Object);
  if (const auto *Star = dyn_cast_or_null<CXXOperatorCallExpr>(E);
      Star && Star->getOperator() == OO_Star && Star->getNumArgs() == 1) {
    E = Star->getArg(0)->IgnoreParenImpCasts(); // `*optimizer_` on a smart pointer
  }
  const auto *Member = dyn_cast_or_null<MemberExpr>(E);
  if (!Member || !isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts())) {
    return nullptr;
  }
  return dyn_cast<FieldDecl>(Member->getMemberDecl());
}

MemberTraining analyzeMemberTraining(const FunctionDecl *Function) {
  MemberTraining Result;
  const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Function);
  if (!Method || Method->getParent()->isLambda()) {
    return Result;
  }
  if (const FunctionDecl *Pattern = Method->getTemplateInstantiationPattern()) {
    Method = cast<CXXMethodDecl>(Pattern);
  }
  if (const FunctionDecl *Defined = Method->getDefinition()) {
    Method = cast<CXXMethodDecl>(Defined);
  }
  Result.Method = Method;
  const CXXRecordDecl *Class = Method->getParent();
  llvm::SmallVector<const FieldDecl *, 2> Stepped, Prepared;
  auto AddMember = [&](llvm::SmallVector<const FieldDecl *, 2> &To, const Expr *Object) {
    const FieldDecl *Field = memberObject(Object);
    if (Field && Field->getParent() == Class && !llvm::is_contained(To, Field)) {
      To.push_back(Field);
    }
  };
  forEachStmt(Method->getBody(), [&](const Stmt *S) {
    const CXXMemberCallExpr *Step = nullptr;
    if (isOptimizerStep(S, Step)) {
      AddMember(Stepped, Step->getImplicitObjectArgument());
    }
    if (isMethodCall(S, "accelerate::Accelerator", "prepare")) {
      // A method rewritten before: what its own prepare names.
      Result.AlreadyPrepared = true;
      for (const Expr *Arg : cast<CallExpr>(S)->arguments()) {
        AddMember(Prepared, Arg);
      }
    }
  });
  if (Stepped.empty() && Result.AlreadyPrepared) {
    for (const FieldDecl *Field : Prepared) {
      if (isOptimizerOrPointerTo(Field->getType())) {
        Result.Optimizers.push_back(Field);
      } else if (isModelType(Field->getType())) {
        Result.Models.push_back(Field);
      }
    }
    return Result;
  }
  if (Stepped.empty()) {
    return Result;
  }
  const std::string ByHand = "; call accelerator.prepare(model, optimizer) on the members first "
                             "in " +
                             functionLabel(Method) + " by hand";
  auto Problem = [&](std::string Text) {
    if (Result.Problem.empty()) {
      Result.Problem = std::move(Text) + ByHand;
    }
  };
  if (Method->isStatic() || Method->isVirtual() || Method->isConst()) {
    Problem(functionLabel(Method) + " is " +
            (Method->isStatic()    ? "static"
             : Method->isVirtual() ? "virtual"
                                   : "const") +
            ", so accel-rewrite does not give it the accelerator");
  }
  for (const FieldDecl *Optimizer : Stepped) {
    const std::string Name = "'" + Optimizer->getNameAsString() + "'";
    const bool Smart = isOptimizerType(smartPointee(Optimizer->getType()));
    if (!isOptimizerType(Optimizer->getType()) && !Smart) {
      Problem("optimizer member " + Name + " is held through a raw pointer or a reference, " +
              "which accel-rewrite does not follow to where the optimizer is made");
      continue;
    }
    if (Smart) {
      Result.HeldBySmartPointer.push_back(Optimizer);
    }
    const FieldDecl *Model = modelOf(Optimizer);
    if (!Model) {
      Problem("cannot tell which model optimizer member " + Name +
              " trains: every constructor must build it from a model member's parameters() (" +
              Optimizer->getNameAsString() + "(model_->parameters(), ...))");
      continue;
    }
    if (!isModelType(Model->getType())) {
      Problem("model member '" + Model->getNameAsString() +
              "' is held through a pointer or reference, which prepare does not take");
      continue;
    }
    Result.Optimizers.push_back(Optimizer);
    if (!llvm::is_contained(Result.Models, Model)) {
      Result.Models.push_back(Model);
    }
  }
  if (!Result.Problem.empty()) {
    Result.Optimizers.assign(Stepped.begin(), Stepped.end());
    Result.Models.clear();
    Result.HeldBySmartPointer.clear();
  }
  return Result;
}

std::string MemberTraining::prepareArguments() const {
  std::string Args;
  for (const FieldDecl *Model : Models) {
    Args += (Args.empty() ? "" : ", ") + Model->getNameAsString();
  }
  for (const FieldDecl *Optimizer : Optimizers) {
    Args += (Args.empty() ? "" : ", ") +
            std::string(llvm::is_contained(HeldBySmartPointer, Optimizer) ? "*" : "") +
            Optimizer->getNameAsString();
  }
  return Args;
}

} // namespace accel::rewrites
