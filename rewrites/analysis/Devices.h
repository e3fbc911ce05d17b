//===- Devices.h - Whether a program computes on the CPU only -*- C++ -*-===//
//
// A program that names no device but the CPU computes on the CPU: every tensor it creates is
// there, and it needs no `.to(device)` for a validation set, noise, labels or hidden states.
// Rewritten with a plain Accelerator, its model would move to the GPU of each process while
// those tensors stay on the CPU. accel-accelerator keeps such a program on the CPU instead
// (Options::on_cpu()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"

namespace accel::rewrites {

/// The main file names no device other than the CPU: no `.cuda()`, no call into torch::cuda,
/// and each device value it spells is `kCPU`, `DeviceType::CPU` or `Device("cpu")` (or none at
/// all). A device that comes from a string chosen at run time, or from a library function,
/// may be a GPU.
bool namesOnlyTheCpu(clang::ASTContext &Ctx);

} // namespace accel::rewrites
