//===- SetupFunction.cpp - The function that sets up training -------------===//
#include "analysis/SetupFunction.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace clang;
using namespace clang::ast_matchers;

namespace accel::rewrites {
namespace {

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

/// Where a setup function's statements are: its body, or the block of a `try` that holds the
/// whole body (`int main() { try { ... } catch (...) { ... } }`, with at most a `return` after
/// it). Prepare goes there, where the definitions are in scope; the Accelerator stays first in
/// the body, in scope of the handlers too. A function-try-block has no body block for the
/// Accelerator: none.
const CompoundStmt *setupBlock(const FunctionDecl *Function) {
  const auto *Block = dyn_cast_or_null<CompoundStmt>(Function ? Function->getBody() : nullptr);
  if (!Block) {
    return nullptr;
  }
  const CXXTryStmt *Whole = nullptr;
  for (const Stmt *S : Block->body()) {
    if (const auto *Try = dyn_cast<CXXTryStmt>(S); Try && !Whole) {
      Whole = Try;
    } else if (!isa<ReturnStmt>(S) && !isa<NullStmt>(S)) {
      return Block;
    }
  }
  return Whole ? Whole->getTryBlock() : Block;
}

/// A statement with a backward call inside a loop: training runs in loops.
bool trainsInLoop(const Stmt *S, ASTContext &Ctx) {
  bool Found = false;
  forEachStmt(S, [&](const Stmt *Child) {
    Found = Found || (isBackwardCall(Child) && innermostLoop(DynTypedNode::create(*Child), Ctx));
  });
  return Found;
}

} // namespace

SetupInfo analyzeSetup(const FunctionDecl *Function, ASTContext &Ctx) {
  SetupInfo Info;
  Info.Function = Function;
  const CompoundStmt *Body = setupBlock(Function);
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
    if (isMethodCall(S, "accelerate::Accelerator", "prepare")) {
      PrepareCalls.push_back(cast<CXXMemberCallExpr>(S));
    }
  });

  if (!PrepareCalls.empty()) {
    Info.AlreadyPrepared = true;
    Info.PreparedAt = bodyStatementOf(DynTypedNode::create(*PrepareCalls.front()), Body, Ctx);
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
    // A backward outside any loop before the optimizer exists is a demonstration (a gradient
    // check), not training: prepare still goes after the definitions.
    bool Demonstration = Last && Position(S) < Position(Last) && !trainsInLoop(S, Ctx);
    if (containsBackward(S) && !Demonstration) {
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

bool runsBeforePrepare(const Stmt *Call, ASTContext &Ctx) {
  const FunctionDecl *Function = enclosingFunction(DynTypedNode::create(*Call), Ctx);
  const CompoundStmt *Body = setupBlock(Function);
  if (!Body) {
    return false;
  }
  const SetupInfo &Info = AnalysisContext::of(Ctx).setup(Function);
  // Prepare goes after LastDefinition, or is already at PreparedAt.
  const Stmt *Boundary = Info.PreparedAt ? Info.PreparedAt : Info.LastDefinition;
  const Stmt *Holder = bodyStatementOf(DynTypedNode::create(*Call), Body, Ctx);
  if (!Boundary || !Holder) {
    return false;
  }
  auto Position = [&](const Stmt *S) { return llvm::find(Body->body(), S) - Body->body_begin(); };
  return Position(Holder) < Position(Boundary) ||
         (Holder == Info.LastDefinition && !Info.PreparedAt);
}

bool isPreparedModel(const VarDecl *Var, ASTContext &Ctx) {
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function) {
    return false;
  }
  const SetupInfo &Info = AnalysisContext::of(Ctx).setup(Function);
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

DeclarationMatcher declaresAccelerator() {
  auto Named = varDecl(hasName("accelerator"), hasType(isAccelerator()));
  auto Any = varDecl(hasType(isAccelerator()));
  auto Own = functionDecl(
      anyOf(hasDescendant(Named), hasAnyParameter(Named),
            allOf(setupFunction(), unless(hasDescendant(Any)), unless(hasAnyParameter(Any)))));
  return functionDecl(anyOf(Own, isByReferenceLambdaIn(Own)));
}

DeclarationMatcher acceleratorFunction() {
  auto HasAccelerator = functionDecl(anyOf(declaresAccelerator(), receivesAccelerator()));
  return functionDecl(anyOf(HasAccelerator, isByReferenceLambdaIn(HasAccelerator)));
}

clang::ast_matchers::internal::Matcher<Stmt> inUserCode() {
  // Template instantiations included: in a template, `loss.backward()` on a dependent `loss`
  // is a call only the instantiation resolves. An instantiated statement has its pattern's
  // source range, so its edits are the pattern's (the engine keeps one of identical edits).
  return stmt(isExpansionInMainFile());
}

} // namespace accel::rewrites
