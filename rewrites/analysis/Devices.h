//===- Devices.h - Whether a program places anything on a device -*- C++ -*-===//
//
// A program that never names a device computes on the CPU: every tensor it creates is there.
// Rewritten with a plain Accelerator, its model would move to the GPU of each process while
// the tensors it creates in the loop (noise, labels, hidden states, a validation set) stay on
// the CPU. accel-accelerator keeps such a program on the CPU instead (Options::on_cpu()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "clang/AST/ASTContext.h"

namespace accel::rewrites {

/// The main file names no device: no value of type c10::Device or c10::DeviceType, no
/// `.cuda()`, no call into torch::cuda.
bool namesNoDevice(clang::ASTContext &Ctx);

} // namespace accel::rewrites
