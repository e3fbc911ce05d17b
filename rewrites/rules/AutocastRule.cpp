//===- AutocastRule.cpp - accel-autocast ----------------------------------===//
//
// `auto autocast = accelerator.autocast();` first in the body of each loop that runs a
// training step: LibTorch modules have no forward hooks, so the forward pass reaches mixed
// precision (accel launch --mixed_precision bf16|fp16) through this guard. It does nothing
// under "no". See docs/rules/accel-autocast.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "support/RuleBuilders.h"

namespace accel::rewrites {

Rule makeAutocastRule() {
  return loopGuardRule("autocast", "auto autocast = accelerator.autocast();",
                       "accelerator.autocast runs the forward pass in the mixed_precision dtype "
                       "(bf16, fp16) and does nothing without mixed precision");
}

} // namespace accel::rewrites
