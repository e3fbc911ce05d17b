//===- RuleSupport.cpp - What the rules share -----------------------------===//
#include "RuleSupport.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

std::string qualifiedName(const NamedDecl *D) { return D ? D->getQualifiedNameAsString() : ""; }

const CXXRecordDecl *recordOf(QualType Type) {
  if (Type.isNull()) {
    return nullptr;
  }
  return Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
}

/// The variable an expression names, through one dereference (`loader` or `*loader`).
const VarDecl *namedVar(const Expr *Named) {
  const Expr *E = spelled(Named);
  if (const auto *Deref = dyn_cast_or_null<UnaryOperator>(E);
      Deref && Deref->getOpcode() == UO_Deref) {
    E = spelled(Deref->getSubExpr());
  } else if (const auto *Op = dyn_cast_or_null<CXXOperatorCallExpr>(E);
             Op && Op->getOperator() == OO_Star && Op->getNumArgs() == 1) {
    E = spelled(Op->getArg(0));
  }
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E);
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

/// Calls Visit on S and every statement below it (lambda bodies included).
void forEachStmt(const Stmt *S, llvm::function_ref<void(const Stmt *)> Visit) {
  if (!S) {
    return;
  }
  Visit(S);
  if (const auto *Lambda = dyn_cast<LambdaExpr>(S)) {
    forEachStmt(Lambda->getBody(), Visit);
  }
  for (const Stmt *Child : S->children()) {
    forEachStmt(Child, Visit);
  }
}

bool containsBackward(const Stmt *S) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) { Found = Found || isBackwardCall(Child); });
  return Found;
}

/// The statement of Body that holds S (S itself when it is one), or null.
const Stmt *bodyStatementOf(const DynTypedNode &Node, const CompoundStmt *Body, ASTContext &Ctx) {
  DynTypedNode Current = Node;
  for (int Depth = 0; Depth < 256; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return nullptr;
    }
    if (const auto *Parent = Parents[0].get<Stmt>(); Parent == Body) {
      return Current.get<Stmt>();
    }
    Current = Parents[0];
  }
  return nullptr;
}

AST_MATCHER(QualType, isOptimizer) { return isOptimizerType(Node); }
AST_MATCHER(QualType, isAccelerator) { return isAcceleratorType(Node); }

} // namespace

// ---- types -------------------------------------------------------------------------------

bool isClassOrDerived(QualType Type, llvm::StringRef QualifiedName) {
  const CXXRecordDecl *Record = recordOf(Type);
  if (!Record) {
    return false;
  }
  if (qualifiedName(Record) == QualifiedName) {
    return true;
  }
  const CXXRecordDecl *Definition = Record->getDefinition();
  if (!Definition) {
    return false;
  }
  // forallBases is true when the callback is true for every base.
  return !Definition->forallBases(
      [&](const CXXRecordDecl *Base) { return qualifiedName(Base) != QualifiedName; });
}

static bool isEnum(QualType Type, llvm::StringRef QualifiedName) {
  if (Type.isNull()) {
    return false;
  }
  const auto *Enum = Type.getNonReferenceType().getCanonicalType()->getAs<EnumType>();
  return Enum && qualifiedName(Enum->getDecl()) == QualifiedName;
}

bool isTensorType(QualType Type) { return isClassOrDerived(Type, "at::Tensor"); }
bool isDeviceType(QualType Type) { return isClassOrDerived(Type, "c10::Device"); }
bool isDeviceTypeEnum(QualType Type) { return isEnum(Type, "c10::DeviceType"); }
bool isScalarTypeEnum(QualType Type) { return isEnum(Type, "c10::ScalarType"); }
bool isOptimizerType(QualType Type) {
  return !Type.isNull() && !Type->isReferenceType() &&
         isClassOrDerived(Type, "torch::optim::Optimizer");
}
bool isSchedulerType(QualType Type) {
  return !Type.isNull() && !Type->isReferenceType() &&
         isClassOrDerived(Type, "torch::optim::LRScheduler");
}
bool isAcceleratorType(QualType Type) { return isClassOrDerived(Type, "accelerate::Accelerator"); }

bool isModelType(QualType Type) {
  if (Type.isNull() || Type->isReferenceType() || Type->isPointerType()) {
    return false;
  }
  if (isClassOrDerived(Type, "torch::nn::Module") ||
      isClassOrDerived(Type, "torch::nn::ModuleHolder")) {
    return true;
  }
  const auto *Shared = dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Type));
  if (!Shared || qualifiedName(Shared) != "std::shared_ptr" ||
      Shared->getTemplateArgs().size() < 1 ||
      Shared->getTemplateArgs()[0].getKind() != TemplateArgument::Type) {
    return false;
  }
  return isClassOrDerived(Shared->getTemplateArgs()[0].getAsType(), "torch::nn::Module");
}

const Expr *spelled(const Expr *E) {
  return E ? E->IgnoreUnlessSpelledInSource()->IgnoreParens() : nullptr;
}

// ---- calls -------------------------------------------------------------------------------

bool isBackwardCall(const Stmt *S) {
  if (const auto *Member = dyn_cast_or_null<CXXMemberCallExpr>(S)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    return Method && Method->getDeclName().isIdentifier() && Method->getName() == "backward" &&
           qualifiedName(Method->getParent()) == "at::Tensor";
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(S)) {
    return qualifiedName(Call->getDirectCallee()) == "torch::autograd::backward";
  }
  return false;
}

llvm::SmallVector<const Expr *, 4> writtenArgs(const CallExpr *Call) {
  llvm::SmallVector<const Expr *, 4> Args;
  for (const Expr *Arg : Call->arguments()) {
    if (!isa<CXXDefaultArgExpr>(Arg)) {
      Args.push_back(Arg);
    }
  }
  return Args;
}

std::string calledObject(const CXXMemberCallExpr *Call, const ASTContext &Ctx) {
  const Expr *Object = Call->getImplicitObjectArgument();
  // A smart pointer's `opt->`: the object is `opt`, not the operator-> call.
  if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object->IgnoreImplicit());
      Arrow && Arrow->getOperator() == OO_Arrow) {
    Object = Arrow->getArg(0);
  }
  std::string Text = sourceText(Object, Ctx);
  const auto *Member = dyn_cast<MemberExpr>(Call->getCallee());
  return !Text.empty() && Member && Member->isArrow() ? "*" + Text : Text;
}

std::string functionLabel(const FunctionDecl *Function) {
  if (!Function) {
    return "this function";
  }
  if (const auto *Method = dyn_cast<CXXMethodDecl>(Function);
      Method && Method->getParent()->isLambda()) {
    return "a lambda";
  }
  return "'" + Function->getNameAsString() + "'";
}

std::string sourceText(const Stmt *S, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  CharSourceRange Range = Lexer::makeFileCharRange(
      CharSourceRange::getTokenRange(S->getSourceRange()), SM, Ctx.getLangOpts());
  if (Range.isInvalid()) {
    return "";
  }
  return Lexer::getSourceText(Range, SM, Ctx.getLangOpts()).str();
}

// ---- the setup function ------------------------------------------------------------------

const VarDecl *iteratedVar(const CXXForRangeStmt *Loop) { return namedVar(Loop->getRangeInit()); }

const CallExpr *makeDataLoaderInit(const VarDecl *Var) {
  if (!Var || !Var->isLocalVarDecl() || !Var->getInit()) {
    return nullptr;
  }
  const auto *Call = dyn_cast_or_null<CallExpr>(spelled(Var->getInit()));
  if (!Call || qualifiedName(Call->getDirectCallee()) != "torch::data::make_data_loader") {
    return nullptr;
  }
  // The stateless overloads return unique_ptr<StatelessDataLoader<...>>; a stateful
  // dataset has no sampler to shard.
  const auto *Pointer =
      dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Call->getType()));
  if (!Pointer || Pointer->getTemplateArgs().size() < 1 ||
      Pointer->getTemplateArgs()[0].getKind() != TemplateArgument::Type ||
      !isClassOrDerived(Pointer->getTemplateArgs()[0].getAsType(),
                        "torch::data::StatelessDataLoader")) {
    return nullptr;
  }
  return Call;
}

namespace {
/// Whether a range-for in Body iterates Var, and whether one that does calls backward.
void rangeForsOver(const Stmt *Body, const VarDecl *Var, bool &Iterated, bool &Trains) {
  forEachStmt(Body, [&](const Stmt *S) {
    if (const auto *Loop = dyn_cast<CXXForRangeStmt>(S); Loop && iteratedVar(Loop) == Var) {
      Iterated = true;
      Trains = Trains || containsBackward(Loop->getBody());
    }
  });
}

/// A parameter whose type is deduced from the argument (`Loader &`, `auto &`), so it accepts
/// the sharded loader as well as LibTorch's.
bool isDeducedParameter(const FunctionDecl *Callee, unsigned Index) {
  const FunctionDecl *Pattern = Callee->getTemplateInstantiationPattern();
  if (!Pattern || Index >= Pattern->getNumParams()) {
    return false;
  }
  QualType Type = Pattern->getParamDecl(Index)->getType().getNonReferenceType();
  return isa<TemplateTypeParmType>(Type.getUnqualifiedType().getCanonicalType().getTypePtr());
}
} // namespace

llvm::SmallVector<LoaderHandOff, 2> loaderHandOffs(const VarDecl *Loader) {
  llvm::SmallVector<LoaderHandOff, 2> Result;
  const auto *Function = dyn_cast<FunctionDecl>(Loader->getDeclContext());
  if (!Function || !Function->hasBody()) {
    return Result;
  }
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Call = dyn_cast<CallExpr>(S);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (!Callee || !Callee->hasBody() || Callee == Function) {
      return;
    }
    // A call of a lambda or another call operator lists the object as argument 0.
    unsigned Skip = isa<CXXOperatorCallExpr>(Call) && isa<CXXMethodDecl>(Callee) ? 1 : 0;
    for (unsigned I = Skip; I < Call->getNumArgs(); ++I) {
      if (namedVar(Call->getArg(I)) != Loader || I - Skip >= Callee->getNumParams()) {
        continue;
      }
      LoaderHandOff HandOff;
      HandOff.Callee = Callee;
      HandOff.AcceptsShardedLoader = isDeducedParameter(Callee, I - Skip);
      rangeForsOver(Callee->getBody(), Callee->getParamDecl(I - Skip), HandOff.Iterates,
                    HandOff.Trains);
      Result.push_back(HandOff);
    }
  });
  return Result;
}

bool isTrainingLoader(const VarDecl *Loader, ASTContext &Ctx) {
  if (!makeDataLoaderInit(Loader)) {
    return false;
  }
  const auto *Function = dyn_cast<FunctionDecl>(Loader->getDeclContext());
  if (!Function || !Function->hasBody() || match(acceleratorFunction(), *Function, Ctx).empty()) {
    return false;
  }
  bool Iterated = false, Trains = false;
  rangeForsOver(Function->getBody(), Loader, Iterated, Trains);
  for (const LoaderHandOff &HandOff : loaderHandOffs(Loader)) {
    Trains = Trains || (HandOff.Trains && HandOff.AcceptsShardedLoader);
  }
  return Trains;
}

bool isTrainingBatch(const VarDecl *Var, ASTContext &Ctx) {
  for (const DynTypedNode &Parent : Ctx.getParents(*Var)) {
    for (const DynTypedNode &Grand : Ctx.getParents(Parent)) {
      if (const auto *Loop = Grand.get<CXXForRangeStmt>(); Loop && Loop->getLoopVariable() == Var) {
        const VarDecl *Loader = iteratedVar(Loop);
        return Loader && isTrainingLoader(Loader, Ctx);
      }
    }
  }
  return false;
}

namespace {
/// The nearest ancestor of Node (following first parents) for which Stop holds, or nullopt.
std::optional<DynTypedNode> nearestAncestor(const DynTypedNode &Node, ASTContext &Ctx,
                                            llvm::function_ref<bool(const DynTypedNode &)> Stop) {
  DynTypedNode Current = Node;
  for (int Depth = 0; Depth < 512; ++Depth) {
    auto Parents = Ctx.getParents(Current);
    if (Parents.empty()) {
      return std::nullopt;
    }
    Current = Parents[0];
    if (Stop(Current)) {
      return Current;
    }
  }
  return std::nullopt;
}

bool isFunctionBoundary(const DynTypedNode &Node) {
  return Node.get<FunctionDecl>() || Node.get<LambdaExpr>();
}

bool isLoop(const Stmt *S) {
  return S && (isa<ForStmt>(S) || isa<CXXForRangeStmt>(S) || isa<WhileStmt>(S) || isa<DoStmt>(S));
}
} // namespace

const FunctionDecl *enclosingFunction(const DynTypedNode &Node, ASTContext &Ctx) {
  auto Found = nearestAncestor(Node, Ctx, isFunctionBoundary);
  if (!Found) {
    return nullptr;
  }
  if (const auto *Lambda = Found->get<LambdaExpr>()) {
    return Lambda->getCallOperator();
  }
  return Found->get<FunctionDecl>();
}

const Stmt *innermostLoop(const DynTypedNode &Node, ASTContext &Ctx) {
  auto Found = nearestAncestor(Node, Ctx, [](const DynTypedNode &Ancestor) {
    return isFunctionBoundary(Ancestor) || isLoop(Ancestor.get<Stmt>());
  });
  return Found && isLoop(Found->get<Stmt>()) ? Found->get<Stmt>() : nullptr;
}

bool isTrainingStepLoop(const Stmt *Loop, ASTContext &Ctx) {
  bool Found = false;
  forEachStmt(Loop, [&](const Stmt *S) {
    Found = Found || (isBackwardCall(S) && innermostLoop(DynTypedNode::create(*S), Ctx) == Loop);
  });
  return Found;
}

namespace {
AST_MATCHER(Stmt, holdsTrainingStep) { return isTrainingStepLoop(&Node, Finder->getASTContext()); }
} // namespace

StatementMatcher trainingStepLoop() {
  auto Body = hasBody(compoundStmt().bind("body"));
  return stmt(inUserCode(),
              anyOf(forStmt(Body), cxxForRangeStmt(Body), whileStmt(Body), doStmt(Body)),
              holdsTrainingStep(), forFunction(acceleratorFunction()))
      .bind("loop");
}

Rule loopGuardRule(std::string Method, std::string Statement, std::string Explanation) {
  transformer::EditGenerator Edits =
      [Method, Statement](
          const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<transformer::Edit, 1>> {
    const auto *Body = Match.Nodes.getNodeAs<CompoundStmt>("body");
    llvm::SmallVector<transformer::Edit, 1> Result;
    bool Present = false;
    forEachStmt(Body, [&](const Stmt *S) {
      if (const auto *Call = dyn_cast<CXXMemberCallExpr>(S)) {
        const CXXMethodDecl *Callee = Call->getMethodDecl();
        Present = Present ||
                  (Callee && Callee->getDeclName().isIdentifier() && Callee->getName() == Method &&
                   qualifiedName(Callee->getParent()) == "accelerate::Accelerator");
      }
    });
    if (Present || Body->getLBracLoc().isMacroID()) {
      return Result;
    }
    bool AtLineStart = false;
    SourceLocation At = lineStartAfter(Body->getLBracLoc(), *Match.SourceManager,
                                       Match.Context->getLangOpts(), AtLineStart);
    std::string Text = Statement;
    const auto *Function = enclosingFunction(DynTypedNode::create(*Body), *Match.Context);
    // A [&] lambda's models are those of the function it is defined in.
    while (Function && isa<CXXMethodDecl>(Function) &&
           cast<CXXMethodDecl>(Function)->getParent()->isLambda()) {
      Function =
          dyn_cast<FunctionDecl>(cast<CXXMethodDecl>(Function)->getParent()->getDeclContext());
    }
    if (Text.find("$models") != std::string::npos) {
      std::string Models;
      if (Function) {
        for (const VarDecl *Model : analyzeSetup(Function, *Match.Context).Models) {
          Models += (Models.empty() ? "" : ", ") + Model->getNameAsString();
        }
      }
      Text.replace(Text.find("$models"), 7, Models);
    }
    Result.push_back(insertionAt(At, AtLineStart ? Text + "\n" : "\n" + Text));
    return Result;
  };
  return transformer::makeRule(trainingStepLoop(), Edits, explain("body", std::move(Explanation)));
}

SetupInfo analyzeSetup(const FunctionDecl *Function, ASTContext &Ctx) {
  SetupInfo Info;
  Info.Function = Function;
  const auto *Body = dyn_cast_or_null<CompoundStmt>(Function ? Function->getBody() : nullptr);
  if (!Body) {
    Info.Problem = "no function body";
    return Info;
  }
  auto Problem = [&](SourceLocation Loc, const std::string &Text) {
    if (Info.Problem.empty()) {
      Info.Problem = Text;
      Info.ProblemLoc = Loc;
    }
  };
  std::string FunctionName = Function->getNameAsString();
  auto Position = [&](const Stmt *S) -> size_t {
    return llvm::find(Body->body(), S) - Body->body_begin();
  };
  const Stmt *Last = nullptr;
  auto Define = [&](const VarDecl *Var, llvm::SmallVectorImpl<const VarDecl *> &Into,
                    llvm::StringRef What) {
    if (llvm::is_contained(Into, Var)) {
      return;
    }
    const Stmt *Top = bodyStatementOf(DynTypedNode::create(*Var), Body, Ctx);
    if (!Top || !isa<DeclStmt>(Top)) {
      Problem(Var->getLocation(), (What + " '" + Var->getName() +
                                   "' is created inside a loop or block of '" + FunctionName +
                                   "'; create it once before the training loop and call "
                                   "accelerator.prepare on it there")
                                      .str());
      return;
    }
    Into.push_back(Var);
    if (!Last || Position(Top) > Position(Last)) {
      Last = Top;
    }
  };

  llvm::SmallVector<const CXXMemberCallExpr *, 1> PrepareCalls;
  llvm::SmallVector<const VarDecl *, 4> Vars;
  forEachStmt(Body, [&](const Stmt *S) {
    if (const auto *Decls = dyn_cast<DeclStmt>(S)) {
      for (const Decl *D : Decls->decls()) {
        if (const auto *Var = dyn_cast<VarDecl>(D)) {
          Vars.push_back(Var);
        }
      }
    }
    if (const auto *Call = dyn_cast<CXXMemberCallExpr>(S)) {
      if (const CXXMethodDecl *Method = Call->getMethodDecl();
          Method && Method->getDeclName().isIdentifier() && Method->getName() == "prepare" &&
          qualifiedName(Method->getParent()) == "accelerate::Accelerator") {
        PrepareCalls.push_back(Call);
      }
    }
  });

  if (!PrepareCalls.empty()) {
    Info.AlreadyPrepared = true;
    for (const CXXMemberCallExpr *Call : PrepareCalls) {
      for (const Expr *Arg : Call->arguments()) {
        if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(spelled(Arg))) {
          if (const auto *Var = dyn_cast<VarDecl>(Ref->getDecl());
              Var && isModelType(Var->getType())) {
            Info.Models.push_back(Var);
          }
        }
      }
    }
    return Info;
  }

  for (const VarDecl *Var : Vars) {
    if (!isOptimizerType(Var->getType())) {
      continue;
    }
    Define(Var, Info.Optimizers, "optimizer");
    size_t ModelsBefore = Info.Models.size();
    bool Outside = false;
    auto CollectModels = [&](const Stmt *S) {
      const ValueDecl *Used = nullptr;
      if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
        Used = Ref->getDecl();
      } else if (const auto *Member = dyn_cast<MemberExpr>(S);
                 Member && isa<FieldDecl>(Member->getMemberDecl())) {
        Used = Member->getMemberDecl();
      }
      if (!Used || !isModelType(Used->getType().getNonReferenceType())) {
        return;
      }
      const auto *Model = dyn_cast<VarDecl>(Used);
      if (!Model || isa<ParmVarDecl>(Model) || !Model->isLocalVarDecl()) {
        Outside = true;
        Problem(S->getBeginLoc(), "model '" + Used->getNameAsString() + "' is created outside '" +
                                      FunctionName + "'; call accelerator.prepare(" +
                                      Used->getNameAsString() + ", " + Var->getNameAsString() +
                                      ") where both are in scope, before training");
        return;
      }
      Define(Model, Info.Models, "model");
    };
    forEachStmt(Var->getInit(), CollectModels);
    if (Info.Models.size() == ModelsBefore && !Outside) {
      // The parameters were gathered first in a local container (a vector of tensors or of
      // parameter groups): the models are those the statements filling it read.
      llvm::SmallPtrSet<const VarDecl *, 2> Containers;
      forEachStmt(Var->getInit(), [&](const Stmt *S) {
        if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
          if (const auto *Local = dyn_cast<VarDecl>(Ref->getDecl());
              Local && Local->isLocalVarDecl() && !isModelType(Local->getType())) {
            Containers.insert(Local);
          }
        }
      });
      const Stmt *OptimizerStmt = bodyStatementOf(DynTypedNode::create(*Var), Body, Ctx);
      for (const Stmt *S : Body->body()) {
        if (S == OptimizerStmt) {
          break;
        }
        bool Fills = false;
        forEachStmt(S, [&](const Stmt *Child) {
          const auto *Ref = dyn_cast<DeclRefExpr>(Child);
          Fills = Fills || (Ref && Containers.count(dyn_cast<VarDecl>(Ref->getDecl())));
        });
        if (Fills) {
          forEachStmt(S, CollectModels);
        }
      }
    }
    if (Info.Models.size() == ModelsBefore && !Outside) {
      Problem(Var->getLocation(), "cannot tell which model optimizer '" + Var->getNameAsString() +
                                      "' trains; call accelerator.prepare(model, " +
                                      Var->getNameAsString() + ") after both are created");
    }
  }
  for (const VarDecl *Var : Vars) {
    if (isSchedulerType(Var->getType())) {
      Define(Var, Info.Schedulers, "scheduler");
    }
  }
  for (const Stmt *S : Body->body()) {
    if (containsBackward(S)) {
      Info.TrainingLoop = S;
      break;
    }
  }
  if (Info.Problem.empty() && Last && Info.TrainingLoop &&
      Position(Info.TrainingLoop) <= Position(Last)) {
    Problem(Info.TrainingLoop->getBeginLoc(),
            "the training loop starts before the model, optimizer and scheduler are all "
            "created; call accelerator.prepare on them after they are created, before training");
  }
  if (Info.Problem.empty()) {
    Info.LastDefinition = Last;
  }
  return Info;
}

bool isPreparedModel(const VarDecl *Var, ASTContext &Ctx) {
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function) {
    return false;
  }
  SetupInfo Info = analyzeSetup(Function, Ctx);
  return (Info.AlreadyPrepared || Info.LastDefinition) && llvm::is_contained(Info.Models, Var);
}

DeclarationMatcher setupFunction() {
  return functionDecl(isDefinition(),
                      hasBody(compoundStmt(hasDescendant(varDecl(hasType(isOptimizer()))))));
}

namespace {
/// The call operator of a lambda that captures by reference by default (`[&]`), defined in a
/// function that Outer matches: its body can name that function's `accelerator`.
AST_MATCHER_P(FunctionDecl, isByReferenceLambdaIn, DeclarationMatcher, Outer) {
  const auto *Method = dyn_cast<CXXMethodDecl>(&Node);
  const CXXRecordDecl *Lambda = Method ? Method->getParent() : nullptr;
  if (!Lambda || !Lambda->isLambda() || Lambda->getLambdaCaptureDefault() != LCD_ByRef) {
    return false;
  }
  const auto *Enclosing = dyn_cast<FunctionDecl>(Lambda->getDeclContext());
  return Enclosing && Outer.matches(*Enclosing, Finder, Builder);
}
} // namespace

DeclarationMatcher acceleratorFunction() {
  auto Named = varDecl(hasName("accelerator"), hasType(isAccelerator()));
  auto Any = varDecl(hasType(isAccelerator()));
  auto HasAccelerator = functionDecl(
      anyOf(hasDescendant(Named), hasAnyParameter(Named),
            allOf(setupFunction(), unless(hasDescendant(Any)), unless(hasAnyParameter(Any)))));
  return functionDecl(anyOf(HasAccelerator, isByReferenceLambdaIn(HasAccelerator)));
}

clang::ast_matchers::internal::Matcher<Stmt> inUserCode() {
  return stmt(isExpansionInMainFile(), unless(isInTemplateInstantiation()));
}

// ---- findings and ranges -----------------------------------------------------------------

namespace {
class FindingGenerator : public transformer::MatchComputation<Finding> {
public:
  FindingGenerator(std::string Id, std::function<Finding(const MatchResult &)> Compute)
      : Id(std::move(Id)), Compute(std::move(Compute)) {}

  llvm::Error eval(const MatchResult &Match, Finding *Result) const override {
    *Result = Compute(Match);
    if (Result->Loc.isInvalid()) {
      auto Found = Match.Nodes.getMap().find(Id);
      if (Found != Match.Nodes.getMap().end()) {
        Result->Loc = Found->second.getSourceRange().getBegin();
      }
    }
    return llvm::Error::success();
  }
  std::string toString() const override { return "finding(" + Id + ")"; }

private:
  std::string Id;
  std::function<Finding(const MatchResult &)> Compute;
};
} // namespace

transformer::Generator<Finding> finding(Finding::KindType Kind, std::string Id,
                                        std::function<std::string(const MatchResult &)> Message) {
  return dynamicFinding(std::move(Id), [Kind, Message](const MatchResult &Match) {
    Finding Result;
    Result.Kind = Kind;
    Result.Message = Message(Match);
    return Result;
  });
}

transformer::Generator<Finding>
dynamicFinding(std::string Id, std::function<Finding(const MatchResult &)> Compute) {
  return std::make_shared<FindingGenerator>(std::move(Id), std::move(Compute));
}

transformer::RangeSelector wholeStatementLine(std::string Id) {
  return [Id](const MatchResult &Match) -> llvm::Expected<CharSourceRange> {
    llvm::Expected<CharSourceRange> Statement = transformer::statement(Id)(Match);
    if (!Statement) {
      return Statement.takeError();
    }
    const SourceManager &SM = *Match.SourceManager;
    CharSourceRange File = Lexer::makeFileCharRange(*Statement, SM, Match.Context->getLangOpts());
    if (File.isInvalid()) {
      return *Statement;
    }
    FileID FID = SM.getFileID(File.getBegin());
    llvm::StringRef Data = SM.getBufferData(FID);
    unsigned Begin = SM.getFileOffset(File.getBegin()), End = SM.getFileOffset(File.getEnd());
    unsigned LineBegin = Begin, LineEnd = End;
    while (LineBegin > 0 && (Data[LineBegin - 1] == ' ' || Data[LineBegin - 1] == '\t')) {
      --LineBegin;
    }
    while (LineEnd < Data.size() &&
           (Data[LineEnd] == ' ' || Data[LineEnd] == '\t' || Data[LineEnd] == '\r')) {
      ++LineEnd;
    }
    bool AloneOnLine = (LineBegin == 0 || Data[LineBegin - 1] == '\n') &&
                       (LineEnd == Data.size() || Data[LineEnd] == '\n');
    if (!AloneOnLine) {
      return File;
    }
    SourceLocation Start = SM.getLocForStartOfFile(FID);
    return CharSourceRange::getCharRange(
        Start.getLocWithOffset(LineBegin),
        Start.getLocWithOffset(std::min<unsigned>(LineEnd + 1, Data.size())));
  };
}

SourceLocation lineStartBefore(SourceLocation Loc, const SourceManager &SM) {
  auto [FID, Offset] = SM.getDecomposedLoc(Loc);
  llvm::StringRef Data = SM.getBufferData(FID);
  unsigned Begin = Offset;
  while (Begin > 0 && (Data[Begin - 1] == ' ' || Data[Begin - 1] == '\t')) {
    --Begin;
  }
  if (Begin == 0 || Data[Begin - 1] == '\n') {
    return Loc.getLocWithOffset(int(Begin) - int(Offset));
  }
  return Loc;
}

SourceLocation lineStartAfter(SourceLocation Loc, const SourceManager &SM,
                              const LangOptions &LangOpts, bool &AtLineStart) {
  SourceLocation End = Lexer::getLocForEndOfToken(Loc, 0, SM, LangOpts);
  auto [FID, Offset] = SM.getDecomposedLoc(End);
  llvm::StringRef Data = SM.getBufferData(FID);
  unsigned Next = Offset;
  while (Next < Data.size() && (Data[Next] == ' ' || Data[Next] == '\t' || Data[Next] == '\r')) {
    ++Next;
  }
  if (Data.substr(Next).starts_with("//")) {
    Next = Data.find('\n', Next);
    if (Next == llvm::StringRef::npos) {
      Next = Data.size();
    }
  }
  if (Next < Data.size() && Data[Next] == '\n') {
    AtLineStart = true;
    return End.getLocWithOffset(int(Next + 1) - int(Offset));
  }
  AtLineStart = false;
  return End;
}

transformer::Edit insertionAt(SourceLocation Loc, std::string Text) {
  transformer::Edit Edit;
  Edit.Range = CharSourceRange::getCharRange(Loc, Loc);
  Edit.Replacement = std::move(Text);
  return Edit;
}

} // namespace accel::rewrites
