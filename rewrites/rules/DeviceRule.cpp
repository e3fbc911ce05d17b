//===- DeviceRule.cpp - accel-device --------------------------------------===//
//
// The device comes from the accelerator: the setup function's device variable is initialised
// from accelerator.device() (later uses stay valid); `model->to(device)` on prepared models
// is dropped (prepare places them); `.to(device)` / `.cuda()` on tensors of a prepared
// loader's batches are dropped (the batches arrive on the device); a dtype is kept; elsewhere
// `.cuda()` and `.to(torch::kCUDA)` move to the accelerator's device instead. See
// docs/rules/accel-device.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "analysis/AnalysisContext.h"
#include "analysis/MemberTraining.h"
#include "analysis/SetupFunction.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

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
/// `model_->to(...)` on a member model that a method of its class prepares (a trainer class,
/// analysis/MemberTraining.h): that prepare moves it to the accelerator's device, so a move
/// in the constructor is harmless and needs no accelerator there.
AST_MATCHER(CXXMemberCallExpr, onPreparedMemberModel) {
  const FieldDecl *Model = memberObject(Node.getImplicitObjectArgument());
  if (!Model) {
    return false;
  }
  AnalysisContext &Analyses = AnalysisContext::of(Finder->getASTContext());
  for (const Decl *Member : Model->getParent()->decls()) {
    const auto *Method = dyn_cast<CXXMethodDecl>(Member);
    if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Member)) {
      Method = dyn_cast<CXXMethodDecl>(Template->getTemplatedDecl());
    }
    if (Method && Method->hasBody()) {
      const MemberTraining &Members = Analyses.memberTraining(Method);
      if (Members.sound() && llvm::is_contained(Members.Models, Model)) {
        return true;
      }
    }
  }
  return false;
}
/// The written first argument names a device (torch::Device or torch::kCUDA).
AST_MATCHER(CallExpr, firstArgIsDevice) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(&Node);
  if (Args.empty()) {
    return false;
  }
  QualType Type = spelled(Args[0])->getType();
  return isDeviceType(Type) || isDeviceTypeEnum(Type);
}

/// A torch::Device member that every constructor sets from one of its parameters: the
/// caller's device, which accel-device rewrites (or warns about) where the caller chooses it.
bool isPassedInDevice(const FieldDecl *Member) {
  if (!isDeviceType(Member->getType())) {
    return false;
  }
  auto Initializers = memberInitializers(Member);
  if (!Initializers || Initializers->empty()) {
    return false;
  }
  for (const Expr *Init : *Initializers) {
    Init = spelled(Init);
    if (const auto *Copy = dyn_cast_or_null<CXXConstructExpr>(Init);
        Copy && Copy->getNumArgs() == 1) {
      Init = spelled(Copy->getArg(0)); // device_(device): a copy
    }
    const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Init);
    if (!Ref || !isa<ParmVarDecl>(Ref->getDecl())) {
      return false;
    }
  }
  return true;
}

/// The first argument is a variable that is, or accel-device makes, the accelerator's device:
/// a torch::Device variable, or a DeviceType variable set from a torch::cuda::is_available()
/// test.
AST_MATCHER(CallExpr, firstArgIsDeviceVariable) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(&Node);
  if (const FieldDecl *Member = Args.empty() ? nullptr : memberObject(spelled(Args[0]))) {
    return isPassedInDevice(Member);
  }
  const auto *Ref = Args.empty() ? nullptr : dyn_cast<DeclRefExpr>(spelled(Args[0]));
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  if (!Var) {
    return false;
  }
  if (isDeviceType(Var->getType())) {
    return true;
  }
  auto CudaTest = callExpr(callee(functionDecl(hasName("::torch::cuda::is_available"))));
  return Var->getInit() && !match(expr(anyOf(CudaTest, hasDescendant(CudaTest))), *Var->getInit(),
                                  Finder->getASTContext())
                                .empty();
}

/// An expression that names the CPU: torch::kCPU, DeviceType::CPU, torch::Device(torch::kCPU)
/// or torch::Device("cpu"). Moving a result to the CPU stays as written.
bool namesCpu(const Expr *E) {
  E = spelled(E);
  if (const auto *Ref = dyn_cast_or_null<DeclRefExpr>(E)) {
    llvm::StringRef Name = Ref->getDecl()->getName();
    return Name == "kCPU" || (isa<EnumConstantDecl>(Ref->getDecl()) && Name == "CPU");
  }
  if (const auto *Text = dyn_cast_or_null<StringLiteral>(E)) {
    return Text->getString().starts_with("cpu");
  }
  if (const auto *Construct = dyn_cast_or_null<CXXConstructExpr>(E)) {
    return Construct->getNumArgs() >= 1 && namesCpu(Construct->getArg(0));
  }
  if (const auto *Cast = dyn_cast_or_null<CXXFunctionalCastExpr>(E)) {
    return namesCpu(Cast->getSubExpr());
  }
  return false;
}
AST_MATCHER(CallExpr, firstArgNamesCpu) {
  llvm::SmallVector<const Expr *, 4> Args = writtenArgs(&Node);
  return !Args.empty() && namesCpu(Args[0]);
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

/// The DeviceType variables the device variable's initializer reads that nothing else in the
/// function reads (an `if` that sets them is all that is left): once the initializer is
/// replaced they would be "set but not used".
llvm::SmallVector<const VarDecl *, 1> orphanedDeviceTypes(const VarDecl *Device, ASTContext &Ctx) {
  llvm::SmallVector<const VarDecl *, 1> Result;
  const auto *Function = dyn_cast<FunctionDecl>(Device->getDeclContext());
  const Expr *Init = Device->getInit();
  if (!Function || !Function->hasBody() || !Init) {
    return Result;
  }
  const SourceManager &SM = Ctx.getSourceManager();
  auto RefsTo = [&](const Decl *D, const Stmt &Within) {
    return match(findAll(declRefExpr(to(decl(equalsNode(D)))).bind("ref")), Within, Ctx);
  };
  for (const BoundNodes &Read :
       match(findAll(
                 declRefExpr(to(varDecl(hasType(isDeviceEnum()), hasLocalStorage()).bind("var")))),
             *Init, Ctx)) {
    const auto *Var = Read.getNodeAs<VarDecl>("var");
    if (Var->hasAttr<UnusedAttr>() || llvm::is_contained(Result, Var) ||
        !SM.isWrittenInMainFile(Var->getLocation())) {
      continue;
    }
    bool ReadElsewhere = false;
    for (const BoundNodes &Use : RefsTo(Var, *Function->getBody())) {
      const auto *Ref = Use.getNodeAs<DeclRefExpr>("ref");
      if (SM.isPointWithin(Ref->getBeginLoc(), Init->getBeginLoc(), Init->getEndLoc())) {
        continue;
      }
      auto Parents = Ctx.getParents(*Ref);
      const auto *Assign = Parents.empty() ? nullptr : Parents[0].get<BinaryOperator>();
      ReadElsewhere = ReadElsewhere || !Assign || Assign->getOpcode() != BO_Assign ||
                      Assign->getLHS()->IgnoreParens() != Ref;
    }
    if (!ReadElsewhere) {
      Result.push_back(Var);
    }
  }
  return Result;
}

/// The variable a member call is on: `model` for `model.to(...)` and `model->to(...)`,
/// `batch` for `batch.data.to(...)`; Through says whether it went through a member.
const VarDecl *calledOnVar(const CXXMemberCallExpr *Call, bool &Through) {
  const Expr *Object = spelled(Call->getImplicitObjectArgument());
  Through = false;
  if (const auto *Arrow = dyn_cast_or_null<CXXOperatorCallExpr>(Object);
      Arrow && Arrow->getOperator() == OO_Arrow) {
    Object = spelled(Arrow->getArg(0));
  } else if (const auto *Member = dyn_cast_or_null<MemberExpr>(Object)) {
    Object = spelled(Member->getBase());
    Through = true;
  }
  const auto *Ref = dyn_cast_or_null<DeclRefExpr>(Object);
  return Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
}

/// Whether rules 2 and 3 below take this use of the device variable out: it is the device
/// of `model->to(device)` on a prepared model or of `batch.data.to(device)` on a training
/// batch.
bool useIsDropped(const DeclRefExpr *Use, ASTContext &Ctx) {
  DynTypedNode Node = DynTypedNode::create(*Use);
  for (int Depth = 0; Depth < 8; ++Depth) {
    auto Parents = Ctx.getParents(Node);
    if (Parents.empty() || !Parents[0].get<Expr>()) {
      return false;
    }
    if (const auto *Call = Parents[0].get<CXXMemberCallExpr>()) {
      llvm::SmallVector<const Expr *, 4> Args = writtenArgs(Call);
      const CXXMethodDecl *Method = Call->getMethodDecl();
      if (Args.empty() || spelled(Args[0]) != Use || !Method ||
          !Method->getDeclName().isIdentifier() || Method->getName() != "to") {
        return false;
      }
      bool ThroughMember = false;
      const VarDecl *On = calledOnVar(Call, ThroughMember);
      if (!On) {
        return false;
      }
      if (ThroughMember) {
        return isTrainingBatch(On, Ctx);
      }
      auto CallParents = Ctx.getParents(*Call);
      return isPreparedModel(On, Ctx) && !CallParents.empty() &&
             CallParents[0].get<CompoundStmt>() && !modelUsedBeforePrepare(On, Call, Ctx);
    }
    Node = Parents[0];
  }
  return false;
}

/// The device variable has uses and the other edits take every one out: it would be left
/// unused ("set but not used"), so it goes too.
bool everyUseDropped(const VarDecl *Device, ASTContext &Ctx) {
  const auto *Function = dyn_cast<FunctionDecl>(Device->getDeclContext());
  if (!Function || !Function->hasBody()) {
    return false;
  }
  auto Uses = match(findAll(declRefExpr(to(varDecl(equalsNode(Device)))).bind("use")),
                    *Function->getBody(), Ctx);
  return !Uses.empty() && llvm::all_of(Uses, [&](const BoundNodes &Use) {
    return useIsDropped(Use.getNodeAs<DeclRefExpr>("use"), Ctx);
  });
}

/// `model->to(device)` whose model is used before its prepare (a demonstration forward, a
/// first phase): the move stays.
AST_MATCHER(CXXMemberCallExpr, movesModelUsedBeforePrepare) {
  bool ThroughMember = false;
  const VarDecl *Model = calledOnVar(&Node, ThroughMember);
  return Model && !ThroughMember && modelUsedBeforePrepare(Model, &Node, Finder->getASTContext());
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
          unless(hasInitializer(ignoringImplicit(
              cxxMemberCallExpr(callsMethod("accelerate::Accelerator", "device"))))),
          hasParent(declStmt(hasSingleDecl(anything()), hasParent(compoundStmt())).bind("decl")))
          .bind("var");
  auto DeviceEdits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Var = Match.Nodes.getNodeAs<VarDecl>("var");
    auto Edits = everyUseDropped(Var, *Match.Context)
                     ? edit(changeTo(wholeStatementLine("decl"), cat("")))(Match)
                     : edit(changeTo(node("decl"),
                                     cat((Var->getType().isConstQualified() ? "const " : "") +
                                         std::string("torch::Device ") + Var->getNameAsString() +
                                         " = accelerator.device();")))(Match);
    if (!Edits) {
      return Edits.takeError();
    }
    // `torch::DeviceType device_type; if (...) device_type = ...;` that only fed the device.
    for (const VarDecl *Orphan : orphanedDeviceTypes(Var, *Match.Context)) {
      Edits->push_back(insertionAt(Orphan->getOuterLocStart(), "[[maybe_unused]] "));
    }
    return Edits;
  };
  auto DeviceRule = makeRule(varDecl(DeviceVar, hasDeclContext(acceleratorFunction())), DeviceEdits,
                             explain("var", DeviceExplanation.str()));
  // 1b. A later assignment to that variable (`device = torch::Device(torch::kCUDA, gpu_id)`):
  // every process would compute on that one device; it is the accelerator's too.
  auto AcceleratorDevice =
      ignoringImplicit(cxxMemberCallExpr(callsMethod("accelerate::Accelerator", "device")));
  auto Reassigned = declRefExpr(
      to(varDecl(hasDeclContext(acceleratorFunction()),
                 anyOf(DeviceVar, allOf(hasType(isDevice()), hasInitializer(AcceleratorDevice))))));
  auto Reassignment =
      expr(
          inUserCode(), unless(isInTemplateInstantiation()),
          anyOf(binaryOperator(hasOperatorName("="), hasLHS(ignoringParenImpCasts(Reassigned)),
                               hasRHS(expr(unless(AcceleratorDevice)).bind("value"))),
                cxxOperatorCallExpr(hasOverloadedOperatorName("="),
                                    hasArgument(0, ignoringParenImpCasts(Reassigned)),
                                    hasArgument(1, expr(unless(AcceleratorDevice)).bind("value")))))
          .bind("assignment");
  auto ReassignRule =
      makeRule(Reassignment, changeTo(node("value"), cat("accelerator.device()")),
               explain("assignment", "the device variable is the accelerator's: a device "
                                     "chosen here would be the same one on every process"));
  auto ForeignDevice = noAcceleratorRule(
      varDecl(DeviceVar, hasDeclContext(functionDecl().bind("function"))), "var", "device chosen",
      "with several processes it must be the accelerator's device; pass accelerator.device() in");

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
          hasParent(compoundStmt()), unless(movesModelUsedBeforePrepare()))
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
  auto BatchTo = cxxMemberCallExpr(inUserCode(),
                                   anyOf(allOf(callsMethod("at::Tensor", "to"), firstArgIsDevice()),
                                         callsMethod("at::Tensor", "cuda")),
                                   on(BatchTensor))
                     .bind("call");
  auto BatchText = [](const MatchResult &Match) -> llvm::Expected<std::string> {
    return withoutDevice(Match.Nodes.getNodeAs<CXXMemberCallExpr>("call"),
                         Match.Nodes.getNodeAs<Expr>("object"), *Match.Context);
  };
  auto BatchRule = makeRule(BatchTo, changeTo(node("call"), run(BatchText)),
                            explain("call", "a prepared loader delivers its batches on the "
                                            "accelerator's device"));

  // 4. Elsewhere, `.cuda()` and `.to(torch::kCUDA)` (any device but the device variable and
  // the CPU) on tensors and other modules move to the accelerator's device instead.
  auto ToFixedDevice =
      cxxMemberCallExpr(
          inUserCode(),
          anyOf(
              allOf(callsMethod("at::Tensor", "cuda"), argumentCountIs(0)),
              allOf(callee(cxxMethodDecl(
                        hasName("to"), ofClass(anyOf(hasName("::at::Tensor"),
                                                     isSameOrDerivedFrom("::torch::nn::Module"))))),
                    firstArgIsDevice(), unless(firstArgIsDeviceVariable()),
                    unless(firstArgNamesCpu()))))
          .bind("call");
  auto RetargetEdits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    const auto *Call = Match.Nodes.getNodeAs<CXXMemberCallExpr>("call");
    const auto *Member = dyn_cast<MemberExpr>(Call->getCallee()->IgnoreImplicit());
    Edit Change;
    if (Call->getMethodDecl()->getName() == "cuda" && Member) {
      Change.Range = CharSourceRange::getTokenRange(Member->getMemberLoc(), Call->getRParenLoc());
      Change.Replacement = "to(accelerator.device())";
    } else {
      Change.Range = CharSourceRange::getTokenRange(writtenArgs(Call)[0]->getSourceRange());
      Change.Replacement = "accelerator.device()";
    }
    if (Change.Range.getBegin().isMacroID() || Change.Range.getEnd().isMacroID()) {
      return llvm::SmallVector<Edit, 1>();
    }
    return llvm::SmallVector<Edit, 1>{Change};
  };
  auto RetargetRule =
      makeRule(cxxMemberCallExpr(ToFixedDevice, forFunction(acceleratorFunction())), RetargetEdits,
               explain("call", "each process computes on its own device: the accelerator's, not "
                               "a fixed one"));
  auto ForeignRetarget = noAcceleratorRule(
      cxxMemberCallExpr(ToFixedDevice, unless(onPreparedMemberModel()),
                        forFunction(functionDecl().bind("function"))),
      "call", "moves to a fixed device",
      "with several processes each has its own device; pass accelerator.device() in and move to "
      "that");

  return applyFirst<Finding>({DeviceRule, ReassignRule, ForeignDevice, ModelRule, BatchRule,
                              RetargetRule, ForeignRetarget});
}

} // namespace accel::rewrites
