//===- AccumulateRule.cpp - accel-accumulate ------------------------------===//
//
// `auto accumulation = accelerator.accumulate(model);` first in the body of each loop that runs
// a training step, so that `accel launch --gradient_accumulation_steps N` works on the
// rewritten program without another edit. See docs/rules/accel-accumulate.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "support/RuleBuilders.h"

namespace accel::rewrites {

Rule makeAccumulateRule() {
  return loopGuardRule("accumulate", "auto accumulation = accelerator.accumulate($models);",
                       "accelerator.accumulate marks a training step: with "
                       "gradient_accumulation_steps N, gradients are communicated and the "
                       "optimizer steps on every N-th step only");
}

} // namespace accel::rewrites
