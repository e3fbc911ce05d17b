//===- RuleFactories.h - One builder per rule -------------------*- C++ -*-===//
//
// Internal to the rule library: each rule lives in its own file (rewrites/<Name>Rule.cpp) and
// Registry.cpp lists them. What the rules share is in rewrites/utils/, split by theme.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "accel/rewrites/Rules.h"

namespace accel::rewrites {

Rule makeIncludeRule();
Rule makeAcceleratorRule();
Rule makeDeviceRule();
Rule makePrepareRule();
Rule makeDataLoaderRule();
Rule makeBackwardRule();
Rule makeSaveRule();
Rule makePrintRule();
Rule makeReduceRule();
Rule makeStepRule();
Rule makeAccumulateRule();
Rule makeAutocastRule();

} // namespace accel::rewrites
