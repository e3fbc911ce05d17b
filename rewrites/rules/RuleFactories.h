//===- RuleFactories.h - One builder per rule -------------------*- C++ -*-===//
//
// Internal to the rule library: each rule lives in its own file (rules/<Name>Rule.cpp), and
// Rules.def lists them once. What the rules share is in analysis/ (what a program does) and
// support/ (how a rule is written), split by theme.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "accel/rewrites/Rules.h"

namespace accel::rewrites {

#define ACCEL_RULE(Name, Builder, OnlyWithOtherEdits, Description) Rule Builder();
#include "Rules.def"

} // namespace accel::rewrites
