//===- MemberTraining.cpp - Training in a class's method ------------------===//
#include "analysis/MemberTraining.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Templates.h"

#include "clang/AST/ExprCXX.h"
#include "clang/AST/RecursiveASTVisitor.h"
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
    auto IsMake = [](const Expr *Made) {
      const auto *Call = dyn_cast_or_null<CallExpr>(Made);
      const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
      return Callee && (qualifiedName(Callee) == "std::make_unique" ||
                        qualifiedName(Callee) == "std::make_shared");
    };
    if (const auto *Construct = dyn_cast<CXXConstructExpr>(E)) {
      // std::unique_ptr<SGD>(new SGD(...)), or a smart pointer to the base class made from
      // one to the optimizer (`return std::make_unique<SGD>(...);` as a unique_ptr<Optimizer>).
      if (Construct->getNumArgs() == 1 && (isa<CXXNewExpr>(spelled(Construct->getArg(0))) ||
                                           IsMake(spelled(Construct->getArg(0))))) {
        E = spelled(Construct->getArg(0));
        continue;
      }
      return {Construct->arg_begin(), Construct->arg_end()};
    }
    if (IsMake(E)) {
      const auto *Call = cast<CallExpr>(E);
      return {Call->arg_begin(), Call->arg_end()};
    }
    E = spelled(E) != E ? spelled(E) : nullptr;
  }
  return {};
}

/// Through std::move: `params` in `std::move(params)`.
const Expr *moved(const Expr *E) {
  const auto *Move = dyn_cast_or_null<CallExpr>(E ? spelled(E) : nullptr);
  if (Move && Move->getNumArgs() == 1 && Move->getDirectCallee() &&
      qualifiedName(Move->getDirectCallee()) == "std::move") {
    return spelled(Move->getArg(0));
  }
  return E ? spelled(E) : nullptr;
}

/// The argument of a call to a factory function of the main file that every optimizer it
/// returns is built from (`make_optimizer(kind, net_->parameters(), lr)`, where each `return`
/// is `std::make_unique<torch::optim::SGD>(std::move(params), ...)` or the like on the same
/// parameter); null for anything else.
const Expr *factoryParametersArgument(const Expr *Init) {
  const auto *Call = dyn_cast_or_null<CallExpr>(Init ? spelled(Init) : nullptr);
  const FunctionDecl *Factory = Call ? Call->getDirectCallee() : nullptr;
  const FunctionDecl *Definition = nullptr;
  if (!Factory || !Factory->hasBody(Definition) ||
      !Definition->getASTContext().getSourceManager().isWrittenInMainFile(
          Definition->getLocation())) {
    return nullptr;
  }
  const ParmVarDecl *From = nullptr;
  bool Every = true, Any = false;
  forEachStmt(Definition->getBody(), [&](const Stmt *S) {
    const auto *Return = dyn_cast<ReturnStmt>(S);
    if (!Return || !Every) {
      return;
    }
    llvm::SmallVector<const Expr *, 4> Args = constructionArgs(Return->getRetValue());
    const auto *Ref = Args.empty() ? nullptr : dyn_cast_or_null<DeclRefExpr>(moved(Args[0]));
    const auto *Parameter = Ref ? dyn_cast<ParmVarDecl>(Ref->getDecl()) : nullptr;
    if (!Parameter || Parameter->getDeclContext() != Definition || (From && From != Parameter)) {
      Every = false; // a `return nullptr;` too: no optimizer to follow
      return;
    }
    From = Parameter;
    Any = true;
  });
  if (!Any || !Every || From->getFunctionScopeIndex() >= Call->getNumArgs()) {
    return nullptr;
  }
  return Call->getArg(From->getFunctionScopeIndex());
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
    if (const Expr *Parameters = factoryParametersArgument(Init)) {
      Args.push_back(Parameters);
    }
  }
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

/// Whether Record is Class or a specialization of Class's template.
bool isOrSpecializes(const CXXRecordDecl *Record, const CXXRecordDecl *Class) {
  if (Record == Class) {
    return true;
  }
  const auto *Specialization = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  return Specialization && Specialization->getSpecializedTemplate()->getTemplatedDecl() == Class;
}

/// The objects of a class made in the main file's code (template instantiations included):
/// each construction, and whether one is made where its arguments cannot be read
/// (std::make_unique<Trainer>(...), std::make_shared).
class Constructions : public RecursiveASTVisitor<Constructions> {
public:
  Constructions(const CXXRecordDecl *Class, const SourceManager &SM) : Class(Class), SM(SM) {}
  bool shouldVisitTemplateInstantiations() const { return true; }

  bool TraverseDecl(Decl *D) {
    if (D && !isa<TranslationUnitDecl>(D) &&
        !SM.isWrittenInMainFile(SM.getExpansionLoc(D->getLocation()))) {
      return true;
    }
    return RecursiveASTVisitor::TraverseDecl(D);
  }
  bool VisitCXXConstructExpr(CXXConstructExpr *Construct) {
    const CXXConstructorDecl *Constructor = Construct->getConstructor();
    if (isOrSpecializes(Constructor->getParent(), Class) &&
        !Constructor->isCopyOrMoveConstructor()) {
      Found.push_back(Construct);
    }
    return true;
  }
  bool VisitCallExpr(CallExpr *Call) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    const TemplateArgumentList *Args = Callee ? Callee->getTemplateSpecializationArgs() : nullptr;
    if (Args && Args->size() > 0 && Args->get(0).getKind() == TemplateArgument::Type &&
        isOrSpecializes(Args->get(0).getAsType()->getAsCXXRecordDecl(), Class) &&
        (qualifiedName(Callee) == "std::make_unique" ||
         qualifiedName(Callee) == "std::make_shared")) {
      Opaque = true;
    }
    return true;
  }

  const CXXRecordDecl *Class;
  const SourceManager &SM;
  llvm::SmallVector<const CXXConstructExpr *, 2> Found;
  bool Opaque = false;
};

/// The constructor parameter a member is set from in Constructor's initializer list: bound to
/// it (`opt_(opt)`) or a holder's copy of it (`net_(net)`); null for anything else.
const ParmVarDecl *parameterSetting(const CXXConstructorDecl *Constructor, llvm::StringRef Member) {
  for (const CXXCtorInitializer *Initializer : Constructor->inits()) {
    const FieldDecl *Field = Initializer->getMember();
    if (!Field || !Field->getDeclName().isIdentifier() || Field->getName() != Member) {
      continue;
    }
    const Expr *Value = Initializer->getInit()->IgnoreImplicit();
    if (const auto *Copy = dyn_cast<CXXConstructExpr>(Value); Copy && Copy->getNumArgs() == 1) {
      Value = Copy->getArg(0); // net_(net), net_(std::move(net)): a holder's copy or move
    }
    if (const auto *Move = dyn_cast<CallExpr>(spelled(Value));
        Move && Move->getNumArgs() == 1 && Move->getDirectCallee() &&
        qualifiedName(Move->getDirectCallee()) == "std::move") {
      Value = Move->getArg(0);
    }
    const auto *Ref = dyn_cast_or_null<DeclRefExpr>(spelled(Value));
    const auto *Parameter = Ref ? dyn_cast<ParmVarDecl>(Ref->getDecl()) : nullptr;
    return Parameter && Parameter->getDeclContext() == Constructor ? Parameter : nullptr;
  }
  return nullptr;
}

/// The local variable an argument names, or null.
const VarDecl *variableNamed(const Expr *Arg) {
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Arg ? spelled(Arg) : nullptr);
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  return Var && Var->isLocalVarDecl() ? Var : nullptr;
}

/// The member model an optimizer held by reference trains, followed through every
/// construction of its class: `Trainer(Net &net, torch::optim::Optimizer &opt) : net_(net),
/// opt_(opt)` made as `Trainer trainer(net, optimizer)` where `optimizer` was built from
/// `net->parameters()`: net_. The model member may be a reference too, or a holder (a copy
/// shares the module). Null, with Why, when a construction is made otherwise.
const FieldDecl *modelOfBoundOptimizer(const FieldDecl *Optimizer, std::string &Why) {
  const auto *Class = cast<CXXRecordDecl>(Optimizer->getParent());
  const std::string Name = "'" + Optimizer->getNameAsString() + "'";
  Constructions Made(Class, Optimizer->getASTContext().getSourceManager());
  Made.TraverseDecl(Optimizer->getASTContext().getTranslationUnitDecl());
  if (Made.Opaque || Made.Found.empty()) {
    Why = "optimizer member " + Name + " is a reference, and accel-rewrite cannot see " +
          (Made.Opaque ? "what every object of the class is made from (std::make_unique, "
                         "std::make_shared)"
                       : "where objects of the class are made");
    return nullptr;
  }
  const FieldDecl *Model = nullptr;
  for (const CXXConstructExpr *Construct : Made.Found) {
    const auto *Constructor =
        dyn_cast_or_null<CXXConstructorDecl>(Construct->getConstructor()->getDefinition());
    const ParmVarDecl *OptimizerParameter =
        Constructor ? parameterSetting(Constructor, Optimizer->getName()) : nullptr;
    const unsigned Index = OptimizerParameter ? OptimizerParameter->getFunctionScopeIndex() : 0;
    const VarDecl *OptimizerVar = OptimizerParameter && Index < Construct->getNumArgs()
                                      ? variableNamed(Construct->getArg(Index))
                                      : nullptr;
    // The optimizer's first argument: `net->parameters()` or `net.parameters()`.
    llvm::SmallVector<const Expr *, 4> Args = OptimizerVar
                                                  ? constructionArgs(OptimizerVar->getInit())
                                                  : llvm::SmallVector<const Expr *, 4>();
    const auto *Parameters = Args.empty() ? nullptr : dyn_cast<CXXMemberCallExpr>(spelled(Args[0]));
    const CXXMethodDecl *Called = Parameters ? Parameters->getMethodDecl() : nullptr;
    const VarDecl *ModelVar =
        Called && Called->getDeclName().isIdentifier() && Called->getName() == "parameters"
            ? variableNamed(objectOf(Parameters->getImplicitObjectArgument()))
            : nullptr;
    if (!ModelVar) {
      Why = "optimizer member " + Name + " is a reference, and at line " +
            std::to_string(Optimizer->getASTContext().getSourceManager().getPresumedLineNumber(
                Construct->getBeginLoc())) +
            " accel-rewrite cannot follow what it is bound to back to a local optimizer built "
            "from a model's parameters()";
      return nullptr;
    }
    // The member the same construction sets from that model.
    const FieldDecl *Found = nullptr;
    for (unsigned I = 0; I < Construct->getNumArgs() && !Found; ++I) {
      if (variableNamed(Construct->getArg(I)) != ModelVar) {
        continue;
      }
      for (const FieldDecl *Field : Class->fields()) {
        const ParmVarDecl *Set = parameterSetting(Constructor, Field->getName());
        if (Set && Set->getFunctionScopeIndex() == I) {
          Found = Field;
        }
      }
    }
    const QualType Type = Found ? Found->getType() : QualType();
    const bool Shares =
        Found && (Type->isLValueReferenceType()
                      ? isModelType(Type.getNonReferenceType())
                      : isModelType(Type) && !isClassOrDerived(Type, "torch::nn::Module"));
    if (!Shares || (Model && Found != Model)) {
      Why = "optimizer member " + Name + " is a reference to an optimizer of '" +
            ModelVar->getNameAsString() + "', and " +
            (!Found    ? "no member of the class is set from that model"
             : !Shares ? "member '" + Found->getNameAsString() +
                             "' holds a copy of that model, not the model itself"
                       : "the objects of the class are made with different models");
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

namespace {

/// What one method's body prepares: a pattern's, or an instantiation's where the pattern's
/// steps are on members of dependent types (analyzeMemberTraining maps those back).
MemberTraining analyzeMethod(const CXXMethodDecl *Method) {
  MemberTraining Result;
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
    const QualType Type = Optimizer->getType();
    const bool Smart = isOptimizerType(smartPointee(Type));
    const bool Bound = Type->isLValueReferenceType() && isOptimizerType(Type.getNonReferenceType());
    if (!isOptimizerType(Type) && !Smart && !Bound) {
      Problem("optimizer member " + Name + " is held through a raw pointer, " +
              "which accel-rewrite does not follow to where the optimizer is made");
      continue;
    }
    if (Smart) {
      Result.HeldBySmartPointer.push_back(Optimizer);
    }
    std::string Why;
    const FieldDecl *Model = Bound ? modelOfBoundOptimizer(Optimizer, Why) : modelOf(Optimizer);
    if (!Model) {
      Problem(Bound ? Why
                    : "cannot tell which model optimizer member " + Name +
                          " trains: every constructor must build it from a model member's "
                          "parameters() (" +
                          Optimizer->getNameAsString() + "(model_->parameters(), ...))");
      continue;
    }
    if (!isModelType(Model->getType().getNonReferenceType())) {
      Problem("model member '" + Model->getNameAsString() +
              "' is held through a raw pointer, which prepare does not take");
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

/// The field of Class named as Field (a specialization's field in its template's pattern).
const FieldDecl *fieldNamedAs(const FieldDecl *Field, const CXXRecordDecl *Class) {
  for (const FieldDecl *Candidate : Class->fields()) {
    if (Candidate->getDeclName() == Field->getDeclName()) {
      return Candidate;
    }
  }
  return nullptr;
}

} // namespace

MemberTraining analyzeMemberTraining(const FunctionDecl *Function) {
  const auto *Method = dyn_cast_or_null<CXXMethodDecl>(Function);
  if (!Method || Method->getParent()->isLambda()) {
    return MemberTraining();
  }
  if (const FunctionDecl *Pattern = Method->getTemplateInstantiationPattern()) {
    Method = cast<CXXMethodDecl>(Pattern);
  }
  if (const FunctionDecl *Defined = Method->getDefinition()) {
    Method = cast<CXXMethodDecl>(Defined);
  }
  MemberTraining Result = analyzeMethod(Method);
  if (!Result.Optimizers.empty() || !Method->getParent()->isDependentContext()) {
    return Result;
  }
  // In a class template, a step on a member of a dependent type (`Optimizer &opt_;`) is a
  // call only in the instantiations: each must prepare the same members.
  bool First = true;
  for (const FunctionDecl *Instance : instantiationsOf(Method)) {
    MemberTraining Of = analyzeMethod(cast<CXXMethodDecl>(Instance));
    auto ToPattern = [&](llvm::SmallVector<const FieldDecl *, 2> &Fields) {
      for (const FieldDecl *&Field : Fields) {
        Field = fieldNamedAs(Field, Method->getParent());
      }
    };
    ToPattern(Of.Models);
    ToPattern(Of.Optimizers);
    ToPattern(Of.HeldBySmartPointer);
    Of.Method = Method;
    if (First) {
      Result = std::move(Of);
      First = false;
    } else if (Of.Models != Result.Models || Of.Optimizers != Result.Optimizers ||
               Of.Problem != Result.Problem) {
      Result.Problem = "the instantiations of " + functionLabel(Method) +
                       " train different members; call accelerator.prepare(model, "
                       "optimizer) on the members first in it by hand";
      Result.Models.clear();
      Result.HeldBySmartPointer.clear();
    }
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
