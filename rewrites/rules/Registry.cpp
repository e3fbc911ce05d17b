//===- Registry.cpp - The list of rules -----------------------------------===//
//
// Generated from Rules.def, the one list of rules (each in its own file rules/<Rule>Rule.cpp,
// with its lit test test/rewrite/<name>.cpp and its page docs/rules/<name>.md).
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"

namespace accel::rewrites {

llvm::ArrayRef<RuleInfo> allRules() {
  static const RuleInfo Rules[] = {
#define ACCEL_RULE(Name, Builder, OnlyWithOtherEdits, Description)                                 \
  {Name, Description, Builder, OnlyWithOtherEdits},
#include "Rules.def"
  };
  return Rules;
}

} // namespace accel::rewrites
