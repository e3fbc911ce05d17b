//===- LibTorchTypes.h - The LibTorch types the rules match -----*- C++ -*-===//
//
// Matched by declaration (the qualified name of the class or a base), never by spelling:
// `torch::Device`, `c10::Device` and a user's alias are one type.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/Type.h"
#include "clang/ASTMatchers/ASTMatchers.h"
#include "llvm/ADT/StringRef.h"

namespace accel::rewrites {

/// True for T, const T, T& and T&& where T is (derived from) the class named QualifiedName.
bool isClassOrDerived(clang::QualType Type, llvm::StringRef QualifiedName);
bool isTensorType(clang::QualType Type); // at::Tensor, at::TensorBase (by reference too)
/// A batch a program can make itself that prepare_batches shares and batch_rows cuts: a tensor,
/// an Example of tensors, a pair or tuple of tensors, a vector of tensors.
bool isBatchType(clang::QualType Type);
bool isDeviceType(clang::QualType Type);      // c10::Device (torch::Device)
bool isDeviceTypeEnum(clang::QualType Type);  // c10::DeviceType (torch::kCUDA)
bool isScalarTypeEnum(clang::QualType Type);  // c10::ScalarType (torch::kFloat)
bool isOptimizerType(clang::QualType Type);   // torch::optim::Optimizer and subclasses
bool isSchedulerType(clang::QualType Type);   // torch::optim::LRScheduler and subclasses
bool isAcceleratorType(clang::QualType Type); // accelerate::Accelerator
/// A model: a ModuleHolder (TORCH_MODULE), a torch::nn::Module subclass, or a
/// std::shared_ptr or std::unique_ptr to one. Never a reference or raw pointer.
bool isModelType(clang::QualType Type);
/// What a std::unique_ptr or std::shared_ptr points to; a null type for other types.
clang::QualType smartPointee(clang::QualType Type);
/// An optimizer, or a std::unique_ptr or std::shared_ptr to one (prepared as `*name`).
bool isOptimizerOrPointerTo(clang::QualType Type);

/// The name of the method of at::Tensor (or at::TensorBase) that S calls (`mean` of
/// `x.mean()`), or "" when S is no such call.
llvm::StringRef tensorMethodName(const clang::Stmt *S);

/// The class a type names (through references and aliases), or null.
const clang::CXXRecordDecl *recordOf(clang::QualType Type);

AST_MATCHER(clang::QualType, holdsOptimizer) { return isOptimizerOrPointerTo(Node); }
AST_MATCHER(clang::QualType, isAccelerator) { return isAcceleratorType(Node); }

} // namespace accel::rewrites
