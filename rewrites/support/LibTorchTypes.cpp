//===- LibTorchTypes.cpp - The LibTorch types the rules match -------------===//
#include "support/LibTorchTypes.h"

#include "support/Calls.h"

#include "clang/AST/DeclCXX.h"
#include "clang/AST/DeclTemplate.h"
#include "clang/AST/ExprCXX.h"

using namespace clang;

namespace accel::rewrites {

llvm::StringRef tensorMethodName(const Stmt *S) {
  const auto *Call = dyn_cast_or_null<CXXMemberCallExpr>(S);
  const CXXMethodDecl *Method = Call ? Call->getMethodDecl() : nullptr;
  if (!Method || !Method->getDeclName().isIdentifier()) {
    return "";
  }
  const std::string Owner = qualifiedName(Method->getParent());
  return Owner == "at::Tensor" || Owner == "at::TensorBase" ? Method->getName() : "";
}

const CXXRecordDecl *recordOf(QualType Type) {
  if (Type.isNull()) {
    return nullptr;
  }
  return Type.getNonReferenceType().getCanonicalType()->getAsCXXRecordDecl();
}

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

bool isTensorType(QualType Type) {
  const auto *Record = Type.getNonReferenceType()->getAsCXXRecordDecl();
  return Record &&
         (qualifiedName(Record) == "at::Tensor" || qualifiedName(Record) == "at::TensorBase");
}
bool isBatchType(QualType Type) {
  Type = Type.getNonReferenceType().getCanonicalType().getUnqualifiedType();
  if (isClassOrDerived(Type, "at::Tensor")) {
    return true;
  }
  const auto *Record = dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Type));
  if (!Record) {
    return false;
  }
  const std::string Name = qualifiedName(Record);
  const TemplateArgumentList &Args = Record->getTemplateArgs();
  auto AllTensors = [&](llvm::ArrayRef<TemplateArgument> List) {
    return !List.empty() && llvm::all_of(List, [&](const TemplateArgument &Arg) {
      return Arg.getKind() == TemplateArgument::Type &&
             isClassOrDerived(Arg.getAsType(), "at::Tensor");
    });
  };
  if (Name == "torch::data::Example" || Name == "std::pair") {
    return AllTensors(Args.asArray());
  }
  if (Name == "std::tuple" && Args.size() == 1 && Args[0].getKind() == TemplateArgument::Pack) {
    return AllTensors(Args[0].getPackAsArray());
  }
  if (Name == "std::vector" && Args.size() >= 1 && Args[0].getKind() == TemplateArgument::Type) {
    return isClassOrDerived(Args[0].getAsType(), "at::Tensor");
  }
  return false;
}

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
  // std::shared_ptr or std::unique_ptr to a module: prepare takes both.
  const QualType Pointee = smartPointee(Type);
  return !Pointee.isNull() && isClassOrDerived(Pointee, "torch::nn::Module");
}

QualType smartPointee(QualType Type) {
  const auto *Smart = dyn_cast_or_null<ClassTemplateSpecializationDecl>(recordOf(Type));
  if (!Smart ||
      (qualifiedName(Smart) != "std::unique_ptr" && qualifiedName(Smart) != "std::shared_ptr") ||
      Smart->getTemplateArgs().size() < 1 ||
      Smart->getTemplateArgs()[0].getKind() != TemplateArgument::Type) {
    return QualType();
  }
  return Smart->getTemplateArgs()[0].getAsType();
}

bool isOptimizerOrPointerTo(QualType Type) {
  return isOptimizerType(Type) || isOptimizerType(smartPointee(Type));
}

} // namespace accel::rewrites
