//===- Registry.cpp - The list of rules -----------------------------------===//
//
// Each rule lives in its own file (rewrites/<Rule>.cpp) and is listed here once.
//
//===----------------------------------------------------------------------===//
#include "accel/rewrites/Rules.h"

namespace accel::rewrites {

llvm::ArrayRef<RuleInfo> allRules() {
  // No rules yet: they come with their lit tests and docs/rules pages.
  return {};
}

} // namespace accel::rewrites
