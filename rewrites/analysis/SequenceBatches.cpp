//===- SequenceBatches.cpp - Batches that are parts of sequences ----------===//
#include "analysis/SequenceBatches.h"

#include "support/Calls.h"
#include "support/LibTorchTypes.h"
#include "support/Mutation.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"
#include "clang/Lex/Lexer.h"

using namespace clang;

namespace accel::rewrites {

namespace {

/// A module's forward pass: `net->forward(...)` on a torch::nn::Module (a subclass's own
/// forward or a library module's), or `net(...)` on a module holder.
bool isForwardCall(const Stmt *S) {
  if (const auto *Member = dyn_cast<CXXMemberCallExpr>(S)) {
    const CXXMethodDecl *Method = Member->getMethodDecl();
    return Method && Method->getName() == "forward" &&
           isClassOrDerived(Method->getThisType()->getPointeeType(), "torch::nn::Module");
  }
  if (const auto *Operator = dyn_cast<CXXOperatorCallExpr>(S);
      Operator && Operator->getOperator() == OO_Call && Operator->getNumArgs() > 0) {
    return isModelType(Operator->getArg(0)->getType());
  }
  return false;
}

/// A tensor, or a type that holds tensors (std::tuple<Tensor, Tensor>, std::vector<Tensor>).
bool holdsTensors(QualType Type) {
  QualType Plain = Type.getNonReferenceType().getCanonicalType();
  return isClassOrDerived(Plain, "at::Tensor") ||
         llvm::StringRef(Plain.getAsString()).contains("at::Tensor");
}

} // namespace

const CXXRecordDecl *moduleClassOf(QualType Type) {
  const CXXRecordDecl *Record = recordOf(Type);
  const auto *Template = dyn_cast_or_null<ClassTemplateSpecializationDecl>(Record);
  if (Template && Template->getTemplateArgs().size() >= 1 &&
      Template->getTemplateArgs()[0].getKind() == TemplateArgument::Type &&
      (qualifiedName(Template) == "std::shared_ptr" ||
       isClassOrDerived(Type, "torch::nn::ModuleHolder"))) {
    return recordOf(Template->getTemplateArgs()[0].getAsType());
  }
  if (Record && !Template && Record->getDefinition() &&
      isClassOrDerived(Type, "torch::nn::ModuleHolder")) {
    // A TORCH_MODULE(Name) holder: its base ModuleHolder<NameImpl> names the class.
    for (const CXXBaseSpecifier &Base : Record->getDefinition()->bases()) {
      if (const CXXRecordDecl *Inner = moduleClassOf(Base.getType())) {
        return Inner;
      }
    }
  }
  return Record;
}

namespace {

/// The source text of D, or empty.
llvm::StringRef textOf(const Decl *D, const ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  CharSourceRange Range = Lexer::makeFileCharRange(
      CharSourceRange::getTokenRange(D->getSourceRange()), SM, Ctx.getLangOpts());
  return Range.isValid() ? Lexer::getSourceText(Range, SM, Ctx.getLangOpts()) : "";
}

/// LibTorch's attention modules read (time, batch, features) and have no batch_first option.
bool alwaysSequenceFirst(llvm::StringRef Name) {
  return Name == "torch::nn::TransformerImpl" || Name == "torch::nn::TransformerEncoderImpl" ||
         Name == "torch::nn::TransformerDecoderImpl" ||
         Name == "torch::nn::TransformerEncoderLayerImpl" ||
         Name == "torch::nn::TransformerDecoderLayerImpl" ||
         Name == "torch::nn::MultiheadAttentionImpl";
}

/// Whether Class is, or holds as a member (to Depth more levels), a module that reads
/// dimension 0 as time: an attention module, or a recurrent one not built batch_first, as far
/// as the class's own text says.
bool holdsSequenceFirst(const CXXRecordDecl *Class, const ASTContext &Ctx, int Depth,
                        bool &Always) {
  if (!Class) {
    return false;
  }
  std::string Name = qualifiedName(Class);
  // A cell is stepped over time by the model's own forward, which may take (time, batch, ...)
  // as readily as (batch, time, ...): not told apart, so counted as time first.
  if (alwaysSequenceFirst(Name) || Name == "torch::nn::LSTMCellImpl" ||
      Name == "torch::nn::GRUCellImpl" || Name == "torch::nn::RNNCellImpl") {
    Always = true;
    return true;
  }
  if (Name == "torch::nn::LSTMImpl" || Name == "torch::nn::GRUImpl" ||
      Name == "torch::nn::RNNImpl") {
    return true;
  }
  const CXXRecordDecl *Definition = Class->getDefinition();
  if (!Definition || Depth == 0 || llvm::StringRef(Name).starts_with("torch::")) {
    return false;
  }
  for (const FieldDecl *Field : Definition->fields()) {
    bool FieldAlways = false;
    if (holdsSequenceFirst(moduleClassOf(Field->getType()), Ctx, Depth - 1, FieldAlways) &&
        (FieldAlways || !textOf(Definition, Ctx).contains("batch_first(true)"))) {
      Always = Always || FieldAlways;
      return true;
    }
  }
  return false;
}

/// A tensor member of Class (or of its member modules, to Depth levels) that Class's forward
/// assigns to, so each call sees what the last one left (set up in a constructor or reset(),
/// a member is a parameter or a setting, not a state).
const FieldDecl *assignedTensorMember(const CXXRecordDecl *Class, int Depth) {
  const CXXRecordDecl *Definition = Class ? Class->getDefinition() : nullptr;
  if (!Definition || llvm::StringRef(qualifiedName(Definition)).starts_with("torch::")) {
    return nullptr;
  }
  for (const CXXMethodDecl *Method : Definition->methods()) {
    if (!Method->getDeclName().isIdentifier() || Method->getName() != "forward" ||
        !Method->hasBody()) {
      continue;
    }
    const FieldDecl *Found = nullptr;
    forEachStmt(Method->getBody(), [&](const Stmt *S) {
      const Expr *Target = assignmentTarget(S);
      const auto *Member =
          dyn_cast_or_null<MemberExpr>(Target ? Target->IgnoreParenImpCasts() : nullptr);
      const auto *Field = Member ? dyn_cast<FieldDecl>(Member->getMemberDecl()) : nullptr;
      if (!Found && Field && isa<CXXThisExpr>(Member->getBase()->IgnoreParenImpCasts()) &&
          holdsTensors(Field->getType())) {
        Found = Field;
      }
    });
    if (Found) {
      return Found;
    }
  }
  if (Depth > 0) {
    for (const FieldDecl *Field : Definition->fields()) {
      if (const FieldDecl *Inner =
              assignedTensorMember(moduleClassOf(Field->getType()), Depth - 1)) {
        return Inner;
      }
    }
  }
  return nullptr;
}

} // namespace

const FieldDecl *stateKeptInModel(llvm::ArrayRef<const VarDecl *> Models, const VarDecl *&Model,
                                  ASTContext &) {
  for (const VarDecl *Candidate : Models) {
    if (const FieldDecl *Field = assignedTensorMember(moduleClassOf(Candidate->getType()), 3)) {
      Model = Candidate;
      return Field;
    }
  }
  return nullptr;
}

const VarDecl *sequenceFirstModel(llvm::ArrayRef<const VarDecl *> Models, ASTContext &Ctx) {
  for (const VarDecl *Model : Models) {
    bool Always = false;
    if (holdsSequenceFirst(moduleClassOf(Model->getType()), Ctx, 3, Always) &&
        (Always || !textOf(Model, Ctx).contains("batch_first(true)"))) {
      return Model;
    }
  }
  return nullptr;
}

std::optional<CarriedState> carriedState(const Stmt *Loop, ASTContext &Ctx) {
  const Stmt *Body = loopBody(Loop);
  if (!Body) {
    return std::nullopt;
  }
  const SourceManager &SM = Ctx.getSourceManager();
  // Whether Loc is in Outer's text.
  auto Within = [&](SourceLocation Loc, const Stmt *Outer) {
    SourceLocation At = SM.getExpansionLoc(Loc);
    return !SM.isBeforeInTranslationUnit(At, SM.getExpansionLoc(Outer->getBeginLoc())) &&
           !SM.isBeforeInTranslationUnit(SM.getExpansionLoc(Outer->getEndLoc()), At);
  };
  std::optional<CarriedState> Found;
  forEachStmt(Body, [&](const Stmt *S) {
    if (Found || !isForwardCall(S)) {
      return;
    }
    const auto *Call = cast<CallExpr>(S);
    // A holder's operator() has the module as its first argument; a member call has none.
    unsigned First = isa<CXXOperatorCallExpr>(Call) ? 1 : 0;
    for (unsigned I = First; I < Call->getNumArgs() && !Found; ++I) {
      forEachStmt(Call->getArg(I), [&](const Stmt *Child) {
        const auto *Ref = dyn_cast<DeclRefExpr>(Child);
        const auto *Var = Ref ? dyn_cast<VarDecl>(Ref->getDecl()) : nullptr;
        // A loader's iterator (`while (it != loader->end())`) walks the batches; it is no
        // state.
        const CXXRecordDecl *Record = Var ? recordOf(Var->getType()) : nullptr;
        if (Found || !Var || !Var->hasLocalStorage() || !holdsTensors(Var->getType()) ||
            Within(Var->getLocation(), Loop) ||
            (Record && qualifiedName(Record) == "torch::data::Iterator")) {
          return;
        }
        // Changed elsewhere in the body (`h = ...`, `std::tie(h, c) = ...`, `h.detach_()`);
        // a forward that takes it by reference is not what makes it a state.
        bool Changed = false;
        forEachStmt(Body, [&](const Stmt *Other) {
          const auto *Use = dyn_cast<DeclRefExpr>(Other);
          Changed = Changed || (Use && Use->getDecl() == Var && !Within(Use->getBeginLoc(), Call) &&
                                changesWhatItNames(Use, Ctx));
        });
        if (Changed) {
          Found = CarriedState{Var, Call};
        }
      });
    }
  });
  return Found;
}

} // namespace accel::rewrites
