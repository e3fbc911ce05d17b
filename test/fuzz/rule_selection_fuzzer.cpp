// accel-rewrite --rules (rewrites/engine/RuleSelection.cpp). The input's first line is a registry,
// rule names separated by commas, a trailing '+' marking a rule that comes only with others'
// edits (RuleInfo::OnlyWithOtherEdits); the rest is the selection. The seeds use the real
// rules' names; linking the real registry would mean building every rule. A selection either
// fails with a message or picks registry entries in registry order, and picks every rule that
// comes along with others unless an item excluded it by name.
#include "accel/rewrites/Rules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <cstdio>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using accel::rewrites::RuleInfo;
  const llvm::StringRef input(reinterpret_cast<const char *>(data), size);
  const auto [registry_line, spec] = input.split('\n');
  llvm::SmallVector<llvm::StringRef> names;
  registry_line.split(names, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::vector<RuleInfo> registry;
  for (llvm::StringRef name : names) {
    RuleInfo rule;
    rule.OnlyWithOtherEdits = name.consume_back("+");
    rule.Name = name;
    registry.push_back(rule);
  }

  llvm::Expected<std::vector<RuleInfo>> selected = accel::rewrites::selectRules(spec, registry);
  if (!selected) {
    if (llvm::toString(selected.takeError()).empty()) {
      std::fprintf(stderr, "a refused selection without a message\n");
      __builtin_trap();
    }
    return 0;
  }
  size_t next = 0;
  for (const RuleInfo &rule : *selected) {
    while (next < registry.size() && registry[next].Name.data() != rule.Name.data()) {
      ++next;
    }
    if (next == registry.size()) {
      std::fprintf(stderr, "a selected rule out of registry order or not in it\n");
      __builtin_trap();
    }
    ++next;
  }
  llvm::SmallVector<llvm::StringRef> items;
  spec.split(items, ',');
  for (const RuleInfo &rule : registry) {
    const bool chosen = llvm::any_of(
        *selected, [&](const RuleInfo &other) { return other.Name.data() == rule.Name.data(); });
    const bool excluded = llvm::any_of(items, [&](llvm::StringRef item) {
      item = item.trim();
      return item.consume_front("-") &&
             (item == rule.Name || "accel-" + item.str() == rule.Name.str());
    });
    if (rule.OnlyWithOtherEdits && !chosen && !excluded) {
      std::fprintf(stderr, "a supporting rule left out though no item excluded it\n");
      __builtin_trap();
    }
  }
  if (spec.trim().empty() && selected->size() != registry.size()) {
    std::fprintf(stderr, "an empty selection did not select every rule\n");
    __builtin_trap();
  }
  return 0;
}
