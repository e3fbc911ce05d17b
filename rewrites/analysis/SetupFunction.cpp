//===- SetupFunction.cpp - The function that sets up training -------------===//
#include "analysis/SetupFunction.h"

#include "analysis/AcceleratorParameter.h"
#include "analysis/AnalysisContext.h"
#include "analysis/EntryFunction.h"
#include "analysis/MemberTraining.h"
#include "analysis/TrainingLoops.h"
#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ParentMapContext.h"
#include "clang/AST/StmtCXX.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

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
/// The model variable (a local or a parameter) whose submodule Member names (`model->head`,
/// `net->body->fc`), or null when Member's object is no such variable.
const VarDecl *modelVariableOwning(const MemberExpr *Member) {
  const Expr *Object = Member->getBase()->IgnoreParenImpCasts();
  while (true) {
    if (const auto *Inner = dyn_cast<MemberExpr>(Object)) {
      Object = Inner->getBase()->IgnoreParenImpCasts();
    } else if (const auto *Arrow = dyn_cast<CXXOperatorCallExpr>(Object);
               Arrow && Arrow->getOperator() == OO_Arrow && Arrow->getNumArgs() == 1) {
      Object = Arrow->getArg(0)->IgnoreParenImpCasts(); // a module holder's operator->
    } else if (const auto *Call = dyn_cast<CXXMemberCallExpr>(Object);
               Call && Call->getNumArgs() == 0 && Call->getMethodDecl() &&
               (Call->getMethodDecl()->getName() == "get" ||
                Call->getMethodDecl()->getName() == "ptr")) {
      Object = Call->getImplicitObjectArgument()->IgnoreParenImpCasts();
    } else {
      break;
    }
  }
  const auto *Ref = dyn_cast<DeclRefExpr>(Object);
  const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
  return Var && (Var->isLocalVarDecl() || isa<ParmVarDecl>(Var)) &&
                 isModelType(Var->getType().getNonReferenceType())
             ? Var
             : nullptr;
}

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

/// The innermost block (compound statement) that has S as one of its own statements.
const CompoundStmt *blockHolding(const Stmt *S, ASTContext &Ctx) {
  auto Parents = Ctx.getParents(*S);
  return Parents.empty() ? nullptr : Parents[0].get<CompoundStmt>();
}

/// A model held in a global of the main file (`std::shared_ptr<Net> net;` at file scope) that
/// only Block changes, before Before (`net = std::make_shared<Net>();` in main), or nothing
/// does: preparing it after Before is preparing what is trained. A global another function
/// sets or passes on to be changed may be replaced after prepare: not followed.
bool globalModelSetUpBefore(const VarDecl *Model, const CompoundStmt *Block, const Stmt *Before,
                            ASTContext &Ctx);

size_t positionIn(const CompoundStmt *Block, const Stmt *S) {
  return llvm::find(Block->body(), S) - Block->body_begin();
}

/// Whether Use may put another model in the variable it names: assigned, reset, swapped,
/// passed on by non-const reference or pointer. Calls through it (`net->forward(x)`) change
/// the model, not which one it is.
bool replacesHolder(const DeclRefExpr *Use, ASTContext &Ctx) {
  auto Parents = Ctx.getParents(*Use);
  const Stmt *Parent = Parents.empty() ? nullptr : Parents[0].get<Stmt>();
  while (const auto *Cast = dyn_cast_or_null<ImplicitCastExpr>(Parent)) {
    if (Cast->getCastKind() != CK_NoOp) {
      return false;
    }
    Parents = Ctx.getParents(*Cast);
    Parent = Parents.empty() ? nullptr : Parents[0].get<Stmt>();
  }
  if (const auto *Member = dyn_cast_or_null<MemberExpr>(Parent)) {
    // `net.reset(...)`, `net.swap(other)`; `net->...` goes through operator->.
    const NamedDecl *Method = Member->getMemberDecl();
    return !Member->isArrow() && Method->getDeclName().isIdentifier() &&
           (Method->getName() == "reset" || Method->getName() == "swap");
  }
  if (isa_and_nonnull<CXXOperatorCallExpr>(Parent)) {
    const auto *Operator = cast<CXXOperatorCallExpr>(Parent);
    return Operator->isAssignmentOp() && Operator->getArg(0)->IgnoreImplicit() == Use;
  }
  if (const auto *Assign = dyn_cast_or_null<BinaryOperator>(Parent)) {
    return Assign->isAssignmentOp() && Assign->getLHS()->IgnoreImplicit() == Use;
  }
  if (const auto *Unary = dyn_cast_or_null<UnaryOperator>(Parent)) {
    return Unary->getOpcode() == UO_AddrOf;
  }
  if (const auto *Call = dyn_cast_or_null<CallExpr>(Parent)) {
    const FunctionDecl *Callee = Call->getDirectCallee();
    for (unsigned I = 0; Callee && I < Call->getNumArgs() && I < Callee->getNumParams(); ++I) {
      const QualType Type = Callee->getParamDecl(I)->getType();
      if (Call->getArg(I) == Use && Type->isReferenceType() &&
          !Type.getNonReferenceType().isConstQualified()) {
        return true;
      }
    }
    return !Callee; // unknown callee: may change it
  }
  return false;
}

/// Whether S trains only through calls that prepare what they train themselves: methods of
/// trainer classes that prepare their own members (analysis/MemberTraining.h), and functions
/// that create their own optimizer and can prepare it (`fit_teacher(teacher, *loader)`,
/// whose optimizer is made inside). That training is prepared where it runs, so it may come
/// before the optimizers of this function are created (a teacher or a class trains first,
/// `main` trains a student or fine-tunes after).
bool trainsOnlyThroughSelfPreparingCalls(const Stmt *S, ASTContext &Ctx) {
  if (containsBackward(S)) {
    return false;
  }
  bool Any = false, Only = true;
  forEachStmt(S, [&](const Stmt *Child) {
    const auto *Call = dyn_cast<CallExpr>(Child);
    const FunctionDecl *Callee = Call ? Call->getDirectCallee() : nullptr;
    if (!Callee || !Callee->getDefinition() || !Callee->getDefinition()->getBody() ||
        !trains(Callee->getDefinition()->getBody(), Ctx)) {
      return;
    }
    const FunctionDecl *Definition = Callee->getDefinition();
    if (isa<CXXMemberCallExpr>(Call) && AnalysisContext::of(Ctx).memberTraining(Callee).sound()) {
      Any = true;
    } else if (const SetupInfo *Own = createsOptimizer(Definition)
                                          ? &AnalysisContext::of(Ctx).setup(Definition)
                                          : nullptr;
               Own && Own->Problem.empty() && !Own->Groups.empty()) {
      Any = true;
    } else {
      Only = false;
    }
  });
  return Any && Only;
}

/// Whether a method of Class (of its template, for a specialization) trains members that
/// accel-rewrite cannot prepare, so that its training is left as written
/// (analysis/MemberTraining.h).
bool trainsMembersDeclined(const CXXRecordDecl *Class, ASTContext &Ctx) {
  if (const auto *Specialization = dyn_cast<ClassTemplateSpecializationDecl>(Class)) {
    Class = Specialization->getSpecializedTemplate()->getTemplatedDecl();
  }
  for (const Decl *Member : Class->decls()) {
    const auto *Method = dyn_cast<CXXMethodDecl>(Member);
    if (const auto *Template = dyn_cast<FunctionTemplateDecl>(Member)) {
      Method = dyn_cast<CXXMethodDecl>(Template->getTemplatedDecl());
    }
    if (Method && Method->hasBody() &&
        !AnalysisContext::of(Ctx).memberTraining(Method).Problem.empty()) {
      return true;
    }
  }
  return false;
}

/// Whether Body uses Optimizer only to hand it to constructors of trainer classes whose
/// training is left as written (`Trainer trainer(net, sgd);` where Trainer's members cannot
/// be prepared): what it trains is left as written too, so it is not prepared here either.
bool onlyHandedToDeclinedTrainers(const VarDecl *Optimizer, const CompoundStmt *Body,
                                  ASTContext &Ctx) {
  size_t Uses = 0, Handed = 0;
  bool Declined = true;
  forEachStmt(Body, [&](const Stmt *S) {
    if (const auto *Ref = dyn_cast<DeclRefExpr>(S); Ref && Ref->getDecl() == Optimizer) {
      ++Uses;
    }
    const auto *Construct = dyn_cast<CXXConstructExpr>(S);
    if (!Construct) {
      return;
    }
    for (const Expr *Arg : Construct->arguments()) {
      const auto *Ref = dyn_cast_or_null<DeclRefExpr>(spelled(Arg));
      if (Ref && Ref->getDecl() == Optimizer) {
        ++Handed;
        Declined = Declined && trainsMembersDeclined(Construct->getConstructor()->getParent(), Ctx);
      }
    }
  });
  return Uses > 0 && Uses == Handed && Declined;
}

bool globalModelSetUpBefore(const VarDecl *Model, const CompoundStmt *Block, const Stmt *Before,
                            ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  if (!Model->isFileVarDecl() || !SM.isWrittenInMainFile(Model->getLocation())) {
    return false;
  }
  bool Sound = true;
  for (const Decl *D : Ctx.getTranslationUnitDecl()->decls()) {
    const auto *Function = D->getAsFunction();
    if (!Function || !Function->hasBody() || !SM.isWrittenInMainFile(Function->getLocation())) {
      continue;
    }
    forEachStmt(Function->getBody(), [&](const Stmt *S) {
      const auto *Use = dyn_cast<DeclRefExpr>(S);
      if (!Sound || !Use || Use->getDecl() != Model || !replacesHolder(Use, Ctx)) {
        return;
      }
      const Stmt *Top = bodyStatementOf(DynTypedNode::create(*Use), Block, Ctx);
      Sound = Top && positionIn(Block, Top) < positionIn(Block, Before);
    });
  }
  return Sound;
}

} // namespace

const PrepareGroup *SetupInfo::groupOf(const VarDecl *Optimizer) const {
  for (const PrepareGroup &Group : Groups) {
    if (llvm::is_contained(Group.Optimizers, Optimizer)) {
      return &Group;
    }
  }
  return nullptr;
}

bool SetupInfo::prepares(const VarDecl *Model) const { return llvm::is_contained(models(), Model); }

llvm::SmallVector<const VarDecl *, 2> SetupInfo::models() const {
  llvm::SmallVector<const VarDecl *, 2> Result;
  auto Add = [&](const VarDecl *Model) {
    if (!llvm::is_contained(Result, Model)) {
      Result.push_back(Model);
    }
  };
  llvm::for_each(PreparedModels, Add);
  for (const PrepareGroup &Group : Groups) {
    llvm::for_each(Group.Models, Add);
  }
  return Result;
}

namespace {
/// A local list of tensors made whole from models and never filled again (`auto dec =
/// decoder->parameters();`, then `params.insert(params.end(), dec.begin(), dec.end())`, the
/// usual way to join two models' parameters): its models are those of its initializer, which
/// Collect records.
bool takenWholeFromModels(const VarDecl *Local, const CompoundStmt *Block,
                          llvm::function_ref<void(const Stmt *)> Collect) {
  if (!Local->getInit()) {
    return false;
  }
  bool Refilled = false;
  forEachStmt(Block, [&](const Stmt *S) {
    const Expr *Target = assignmentTarget(S);
    if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S); !Target && Member) {
      const CXXMethodDecl *Method = Member->getMethodDecl();
      if (Method && Method->getDeclName().isIdentifier() &&
          llvm::is_contained({"push_back", "emplace_back", "insert", "emplace"},
                             Method->getName())) {
        Target = Member->getImplicitObjectArgument();
      }
    }
    const auto *Ref =
        dyn_cast_or_null<DeclRefExpr>(Target ? Target->IgnoreParenImpCasts() : nullptr);
    Refilled = Refilled || (Ref && Ref->getDecl() == Local);
  });
  bool FromModel = false;
  forEachStmt(Local->getInit(), [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    FromModel = FromModel || (Ref && isModelType(Ref->getType().getNonReferenceType()));
  });
  if (Refilled || !FromModel) {
    return false;
  }
  forEachStmt(Local->getInit(), Collect);
  return true;
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
            Info.PreparedModels.push_back(Var);
          }
        }
      }
    }
    return Info;
  }

  // Each optimizer with its models and schedulers, and the statement of its block after which
  // all of them exist.
  struct Candidate {
    const VarDecl *Optimizer;
    const CompoundStmt *Block;
    const Stmt *Statement; ///< the optimizer's statement of Block
    const Stmt *Last;      ///< the last of its definitions among Block's statements
    llvm::SmallVector<const VarDecl *, 2> Models, Schedulers;
  };
  std::vector<Candidate> Candidates;
  for (const VarDecl *Var : Vars) {
    if (!isOptimizerOrPointerTo(Var->getType()) || onlyHandedToDeclinedTrainers(Var, Body, Ctx)) {
      continue;
    }
    const auto *Declaration = dyn_cast_or_null<DeclStmt>([&]() -> const Stmt * {
      auto Parents = Ctx.getParents(*Var);
      return Parents.empty() ? nullptr : Parents[0].get<DeclStmt>();
    }());
    const CompoundStmt *Block = Declaration ? blockHolding(Declaration, Ctx) : nullptr;
    if (!Block) {
      Problem(Var->getLocation(), "optimizer '" + Var->getNameAsString() +
                                      "' is created in a statement that accelerator.prepare "
                                      "cannot follow; create it in a statement of its own and "
                                      "call accelerator.prepare after it, before training");
      continue;
    }
    Candidate Entry{Var, Block, Declaration, Declaration, {}, {}};
    auto Later = [&](const Stmt *S) {
      if (positionIn(Block, S) > positionIn(Block, Entry.Last)) {
        Entry.Last = S;
      }
    };
    bool Outside = false;
    auto CollectModels = [&](const Stmt *S) {
      const ValueDecl *Used = nullptr;
      if (const auto *Ref = dyn_cast<DeclRefExpr>(S)) {
        Used = Ref->getDecl();
      } else if (const auto *Member = dyn_cast<MemberExpr>(S);
                 Member && isa<FieldDecl>(Member->getMemberDecl())) {
        // A submodule of a model variable (`model->head->parameters()`): the model is that
        // variable, which the walk meets too, and preparing it covers the submodule.
        if (modelVariableOwning(Member)) {
          return;
        }
        Used = Member->getMemberDecl();
      }
      if (!Used || !isModelType(Used->getType().getNonReferenceType())) {
        return;
      }
      const auto *Model = dyn_cast<VarDecl>(Used);
      // A parameter that refers to the caller's model (a reference, a module holder, a
      // shared_ptr) is that model: prepare it here (again, if the caller prepared it too,
      // which is harmless). A plain module taken by value is a copy.
      bool SharedParameter = isa_and_nonnull<ParmVarDecl>(Model) &&
                             (Model->getType()->isReferenceType() ||
                              !isClassOrDerived(Model->getType(), "torch::nn::Module"));
      const bool SetUpGlobal = Model && globalModelSetUpBefore(Model, Block, Declaration, Ctx);
      if (!Model || (!SharedParameter && !SetUpGlobal &&
                     (isa<ParmVarDecl>(Model) || !Model->isLocalVarDecl()))) {
        Outside = true;
        const std::string Where =
            Model && Model->isFileVarDecl()
                ? "is a global variable that is set or passed on outside '" + FunctionName +
                      "' or after optimizer '" + Var->getNameAsString() +
                      "' is created, so it may hold another model by the time it trains"
                : "is created outside '" + FunctionName + "'";
        Problem(S->getBeginLoc(), "model '" + Used->getNameAsString() + "' " + Where +
                                      "; call accelerator.prepare(" + Used->getNameAsString() +
                                      ", " + Var->getNameAsString() +
                                      ") where both are in scope, before training");
        return;
      }
      if (!llvm::is_contained(Entry.Models, Model)) {
        Entry.Models.push_back(Model);
      }
    };
    forEachStmt(Var->getInit(), CollectModels);
    if (Entry.Models.empty() && !Outside) {
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
      const VarDecl *Unfollowed = nullptr;
      for (const Stmt *S : Block->body()) {
        if (S == Declaration) {
          break;
        }
        bool Fills = false;
        forEachStmt(S, [&](const Stmt *Child) {
          const auto *Ref = dyn_cast<DeclRefExpr>(Child);
          Fills = Fills || (Ref && Containers.count(dyn_cast<VarDecl>(Ref->getDecl())));
          // Its own declaration fills it too: `std::vector<Tensor> params = body->parameters();`
          if (const auto *Decls = dyn_cast<DeclStmt>(Child)) {
            for (const Decl *D : Decls->decls()) {
              Fills = Fills || Containers.count(dyn_cast<VarDecl>(D));
            }
          }
        });
        if (!Fills) {
          continue;
        }
        forEachStmt(S, CollectModels);
        // Filled from a variable of tensors that is no model (another vector, a tensor): which
        // models those come from, the analysis does not follow.
        forEachStmt(S, [&](const Stmt *Child) {
          const auto *Ref = dyn_cast<DeclRefExpr>(Child);
          const auto *Local = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
          std::string Type =
              Local ? Local->getType().getNonReferenceType().getCanonicalType().getAsString() : "";
          if (Local && !Unfollowed && Local->isLocalVarDecl() && !Containers.count(Local) &&
              !isModelType(Local->getType().getNonReferenceType()) &&
              (llvm::StringRef(Type).contains("at::Tensor") ||
               llvm::StringRef(Type).contains("OptimizerParamGroup")) &&
              !S->getSourceRange().fullyContains(Local->getSourceRange()) &&
              !takenWholeFromModels(Local, Block, CollectModels)) {
            Unfollowed = Local;
          }
        });
      }
      if (Unfollowed) {
        Outside = true;
        Problem(Unfollowed->getLocation(),
                "cannot tell which models the parameters of optimizer '" + Var->getNameAsString() +
                    "' come from: they are gathered from '" + Unfollowed->getNameAsString() +
                    "', which accel-rewrite does not follow; call accelerator.prepare with every "
                    "model whose parameters it holds and the optimizer, before training");
      }
    }
    // Parameters added after construction (`opt.add_param_group(...)`): the models they come
    // from are not followed, so none is guessed.
    forEachStmt(Body, [&](const Stmt *S) {
      const auto *Call = dyn_cast<CXXMemberCallExpr>(S);
      const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
      if (Outside || !Method || Method->getName() != "add_param_group" ||
          namedVar(Call->getImplicitObjectArgument()->IgnoreParenImpCasts()) != Var) {
        return;
      }
      Outside = true;
      Problem(Call->getBeginLoc(),
              "optimizer '" + Var->getNameAsString() +
                  "' gets more parameters from add_param_group, and accel-rewrite does not "
                  "follow which models they come from; call accelerator.prepare with every model "
                  "whose parameters it holds and the optimizer, after this line, before training");
    });
    if (Entry.Models.empty() && !Outside) {
      // Tensors of no model (`Adagrad opt({w, b}, ...)`): prepare synchronises a module's
      // gradients, so there is no model to name.
      std::string Tensors;
      forEachStmt(Var->getInit(), [&](const Stmt *S) {
        const auto *Ref = dyn_cast<DeclRefExpr>(S);
        const auto *Local = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
        if (Local && Local->isLocalVarDecl() && isClassOrDerived(Local->getType(), "at::Tensor")) {
          Tensors += (Tensors.empty() ? "'" : ", '") + Local->getNameAsString() + "'";
        }
      });
      Problem(Var->getLocation(),
              Tensors.empty()
                  ? "cannot tell which model optimizer '" + Var->getNameAsString() +
                        "' trains; call accelerator.prepare(model, " + Var->getNameAsString() +
                        ") after both are created"
                  : "optimizer '" + Var->getNameAsString() + "' trains tensors of no model (" +
                        Tensors +
                        "), and accelerator.prepare synchronises the gradients of a model's "
                        "parameters; hold them in a torch::nn::Module (register_parameter) and "
                        "prepare it with the optimizer");
    }
    for (const VarDecl *Model : Entry.Models) {
      if (const Stmt *Top = bodyStatementOf(DynTypedNode::create(*Model), Block, Ctx)) {
        Later(Top); // a model of the same block; one of an enclosing block is made earlier
      }
    }
    Candidates.push_back(std::move(Entry));
  }
  // Schedulers go with the optimizer they name, after it in its block.
  for (const VarDecl *Var : Vars) {
    if (!isSchedulerType(Var->getType())) {
      continue;
    }
    Candidate *Scheduled = nullptr;
    forEachStmt(Var->getInit(), [&](const Stmt *S) {
      const auto *Ref = dyn_cast<DeclRefExpr>(S);
      for (Candidate &Entry : Candidates) {
        if (Ref && Ref->getDecl() == Entry.Optimizer && !Scheduled) {
          Scheduled = &Entry;
        }
      }
    });
    const Stmt *Top =
        Scheduled ? bodyStatementOf(DynTypedNode::create(*Var), Scheduled->Block, Ctx) : nullptr;
    if (!Top || !isa<DeclStmt>(Top)) {
      Problem(Var->getLocation(),
              "scheduler '" + Var->getNameAsString() +
                  "' is not created in the block of the optimizer it schedules; create it "
                  "right after the optimizer and call accelerator.prepare on both there");
      continue;
    }
    Scheduled->Schedulers.push_back(Var);
    if (positionIn(Scheduled->Block, Top) > positionIn(Scheduled->Block, Scheduled->Last)) {
      Scheduled->Last = Top;
    }
  }

  // A group per block and training statement: the optimizers that the same statement is the
  // first to train are prepared together, after the last of their definitions.
  for (const Candidate &Entry : Candidates) {
    const CompoundStmt *Block = Entry.Block;
    const Stmt *Training = nullptr;
    for (const Stmt *S : Block->body()) {
      size_t Position = positionIn(Block, S);
      if (Position <= positionIn(Block, Entry.Statement)) {
        continue;
      }
      if (Position <= positionIn(Block, Entry.Last)) {
        // Between the optimizer and its scheduler: a training loop here would run before
        // prepare. A backward outside any loop is a demonstration (a gradient check), not
        // training.
        if (trainsInLoop(S, Ctx) || callsTraining(S, Ctx)) {
          Problem(S->getBeginLoc(),
                  "the training loop starts before the model, optimizer and scheduler are all "
                  "created; call accelerator.prepare on them after they are created, before "
                  "training");
        }
        continue;
      }
      if (trains(S, Ctx)) {
        Training = S;
        break;
      }
    }
    PrepareGroup *Group = nullptr;
    for (PrepareGroup &Existing : Info.Groups) {
      if (Existing.Block == Block && Existing.TrainingLoop == Training) {
        Group = &Existing;
      }
    }
    if (!Group) {
      Group = &Info.Groups.emplace_back();
      Group->Block = Block;
      Group->TrainingLoop = Training;
      Group->LastDefinition = Entry.Last;
    }
    for (const VarDecl *Model : Entry.Models) {
      if (!llvm::is_contained(Group->Models, Model)) {
        Group->Models.push_back(Model);
      }
    }
    Group->Optimizers.push_back(Entry.Optimizer);
    llvm::append_range(Group->Schedulers, Entry.Schedulers);
    Group->ScheduledOptimizers.append(Entry.Schedulers.size(), Entry.Optimizer);
    if (positionIn(Block, Entry.Last) > positionIn(Block, Group->LastDefinition)) {
      Group->LastDefinition = Entry.Last;
    }
  }
  llvm::sort(Info.Groups, [&](const PrepareGroup &A, const PrepareGroup &B) {
    return Ctx.getSourceManager().isBeforeInTranslationUnit(A.LastDefinition->getBeginLoc(),
                                                            B.LastDefinition->getBeginLoc());
  });
  // A loop that trains before the first prepare of its block trains what nothing prepares
  // yet (a warm-up loop before the optimizer exists).
  llvm::SmallPtrSet<const CompoundStmt *, 2> Checked;
  for (const PrepareGroup &Group : Info.Groups) {
    if (!Checked.insert(Group.Block).second) {
      continue;
    }
    for (const Stmt *S : Group.Block->body()) {
      if (positionIn(Group.Block, S) >= positionIn(Group.Block, Group.LastDefinition)) {
        break;
      }
      // A loop that prepares what it trains (a k-fold loop before the final fit) is fine.
      bool PreparesInside = llvm::any_of(Info.Groups, [&](const PrepareGroup &Inner) {
        return bodyStatementOf(DynTypedNode::create(*Inner.Block), Group.Block, Ctx) == S;
      });
      if (!PreparesInside && !trainsOnlyThroughSelfPreparingCalls(S, Ctx) &&
          (trainsInLoop(S, Ctx) || callsTraining(S, Ctx))) {
        Problem(S->getBeginLoc(),
                "the training loop starts before the model, optimizer and scheduler are all "
                "created; call accelerator.prepare on them after they are created, before "
                "training");
      }
    }
  }
  if (!Info.Problem.empty()) {
    Info.Groups.clear();
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
  const SourceManager &SM = Ctx.getSourceManager();
  auto Before = [&](SourceLocation A, SourceLocation B) {
    return SM.isBeforeInTranslationUnit(SM.getExpansionLoc(A), SM.getExpansionLoc(B));
  };
  if (Info.AlreadyPrepared) {
    const Stmt *Holder = bodyStatementOf(DynTypedNode::create(*Call), Body, Ctx);
    return Info.PreparedAt && Holder &&
           positionIn(Body, Holder) < positionIn(Body, Info.PreparedAt);
  }
  // Before prepare: inside a block where a group is prepared, and before every such prepare
  // (the loop of an earlier group of the same block runs after that group's prepare).
  bool Enclosed = false;
  for (const PrepareGroup &Group : Info.Groups) {
    if (!bodyStatementOf(DynTypedNode::create(*Call), Group.Block, Ctx)) {
      continue;
    }
    Enclosed = true;
    if (!Before(Call->getBeginLoc(), Group.LastDefinition->getEndLoc())) {
      return false;
    }
  }
  return Enclosed;
}

namespace {
/// A use of Model that does not need it on its device yet: `model->parameters()` (the
/// optimizer holds the parameters, which prepare moves in place), `model->to(...)`.
bool isHarmlessUse(const DeclRefExpr *Ref, ASTContext &Ctx) {
  DynTypedNode Node = DynTypedNode::create(*Ref);
  for (int Depth = 0; Depth < 8; ++Depth) {
    auto Parents = Ctx.getParents(Node);
    if (Parents.empty()) {
      return false;
    }
    if (const auto *Call = Parents[0].get<CXXMemberCallExpr>()) {
      const CXXMethodDecl *Method = Call->getMethodDecl();
      return Method && Method->getDeclName().isIdentifier() &&
             llvm::is_contained({"parameters", "named_parameters", "to"}, Method->getName());
    }
    if (!Parents[0].get<ImplicitCastExpr>() && !Parents[0].get<MemberExpr>() &&
        !Parents[0].get<CXXOperatorCallExpr>()) {
      return false;
    }
    Node = Parents[0];
  }
  return false;
}
} // namespace

bool modelUsedBeforePrepare(const VarDecl *Model, const Stmt *Move, ASTContext &Ctx) {
  const auto *Function = dyn_cast<FunctionDecl>(Model->getDeclContext());
  if (!Function || !Function->getBody()) {
    return false;
  }
  const SetupInfo &Info = AnalysisContext::of(Ctx).setup(Function);
  const SourceManager &SM = Ctx.getSourceManager();
  auto Offset = [&](SourceLocation Loc) { return SM.getFileOffset(SM.getExpansionLoc(Loc)); };
  const unsigned From = Offset(Move->getEndLoc());
  std::optional<unsigned> To;
  for (const PrepareGroup &Group : Info.Groups) {
    if (!Group.LastDefinition || !llvm::is_contained(Group.Models, Model)) {
      continue;
    }
    unsigned End = Offset(Group.LastDefinition->getEndLoc());
    if (End >= From && (!To || End < *To)) {
      To = End;
    }
  }
  if (Info.AlreadyPrepared && Info.PreparedAt && llvm::is_contained(Info.PreparedModels, Model)) {
    To = Offset(Info.PreparedAt->getBeginLoc()); // a rewritten file, read again
  }
  if (!To || *To < From) {
    return false;
  }
  bool Used = false;
  forEachStmt(Function->getBody(), [&](const Stmt *S) {
    const auto *Ref = dyn_cast<DeclRefExpr>(S);
    if (Used || !Ref || Ref->getDecl() != Model) {
      return;
    }
    unsigned At = Offset(Ref->getBeginLoc());
    Used = At > From && At <= *To && !isHarmlessUse(Ref, Ctx);
  });
  return Used;
}

bool isPreparedModel(const VarDecl *Var, ASTContext &Ctx) {
  const auto *Function = dyn_cast<FunctionDecl>(Var->getDeclContext());
  if (!Function) {
    return false;
  }
  return AnalysisContext::of(Ctx).setup(Function).prepares(Var);
}

DeclarationMatcher setupFunction() {
  return functionDecl(isDefinition(),
                      hasBody(compoundStmt(hasDescendant(varDecl(hasType(holdsOptimizer()))))));
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

namespace {
AST_MATCHER(FunctionDecl, isHostedByEntry) {
  return AnalysisContext::of(Finder->getASTContext())
      .entryHosting()
      .Hosted.count(Node.getCanonicalDecl());
}
AST_MATCHER(FunctionDecl, isEntryHostingSetups) {
  return AnalysisContext::of(Finder->getASTContext()).entryHosting().Main ==
         Node.getCanonicalDecl();
}
} // namespace

DeclarationMatcher hostedByEntry() { return functionDecl(isHostedByEntry()); }
DeclarationMatcher hostsAcceleratorOfSetups() { return functionDecl(isEntryHostingSetups()); }

DeclarationMatcher declaresAccelerator() {
  auto Named = varDecl(hasName("accelerator"), hasType(isAccelerator()));
  auto Any = varDecl(hasType(isAccelerator()));
  auto Own = functionDecl(anyOf(hasDescendant(Named), hasAnyParameter(Named),
                                allOf(setupFunction(), unless(hasDescendant(Any)),
                                      unless(hasAnyParameter(Any)), unless(hostedByEntry())),
                                hostsAcceleratorOfSetups()));
  return functionDecl(anyOf(Own, isByReferenceLambdaIn(Own)));
}

DeclarationMatcher acceleratorFunction() {
  auto HasAccelerator = functionDecl(anyOf(declaresAccelerator(), receivesAccelerator()));
  return functionDecl(
      anyOf(HasAccelerator, isByReferenceLambdaIn(HasAccelerator), capturesTheAccelerator()));
}

clang::ast_matchers::internal::Matcher<Stmt> inUserCode() {
  // Template instantiations included: in a template, `loss.backward()` on a dependent `loss`
  // is a call only the instantiation resolves. An instantiated statement has its pattern's
  // source range, so its edits are the pattern's (the engine keeps one of identical edits).
  return stmt(isExpansionInMainFile());
}

} // namespace accel::rewrites
