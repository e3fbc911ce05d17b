//===- RuleSelection.cpp - Parsing "--rules=backward,-save" ---------------===//
//
// Items are applied left to right. A selection whose first item names a rule starts from
// no rules ("backward,device"); one that starts with an exclusion starts from all of them
// ("-save"). "all" stands for every rule, so "all,-save" equals "-save". The supporting
// rules (RuleInfo::OnlyWithOtherEdits) stay selected unless an item excludes them by name.
//
//===----------------------------------------------------------------------===//
#include "accel/rewrites/Rules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace accel::rewrites {
namespace {

constexpr llvm::StringLiteral Prefix = "accel-";

bool nameMatches(const RuleInfo &Rule, llvm::StringRef Item) {
  llvm::StringRef Short = Rule.Name;
  Short.consume_front(Prefix);
  return Item == Rule.Name || Item == Short;
}

llvm::Error selectionError(const llvm::Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message);
}

std::string knownRules(llvm::ArrayRef<RuleInfo> Registry) {
  if (Registry.empty()) {
    return "none yet";
  }
  std::string Names;
  for (const RuleInfo &Rule : Registry) {
    Names += (Names.empty() ? "" : ", ") + Rule.Name.str();
  }
  return Names;
}

} // namespace

llvm::Expected<std::vector<RuleInfo>> selectRules(llvm::StringRef Spec,
                                                  llvm::ArrayRef<RuleInfo> Registry) {
  std::vector<bool> Chosen(Registry.size(), true);
  std::vector<bool> Excluded(Registry.size(), false);
  if (!Spec.trim().empty()) {
    llvm::SmallVector<llvm::StringRef> Items;
    Spec.split(Items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/true);
    for (size_t Index = 0; Index < Items.size(); ++Index) {
      llvm::StringRef Item = Items[Index].trim();
      bool Exclude = Item.consume_front("-");
      if (Item.empty()) {
        return selectionError("empty rule name in '" + Spec +
                              "'; expected rule names separated by commas");
      }
      if (Index == 0 && !Exclude) {
        Chosen.assign(Chosen.size(), false);
      }
      if (Item == "all") {
        Chosen.assign(Chosen.size(), !Exclude);
        continue;
      }
      const RuleInfo *Rule =
          llvm::find_if(Registry, [&](const RuleInfo &R) { return nameMatches(R, Item); });
      if (Rule == Registry.end()) {
        return selectionError("unknown rule '" + Item + "' (known rules: " + knownRules(Registry) +
                              ")");
      }
      Chosen[Rule - Registry.begin()] = !Exclude;
      Excluded[Rule - Registry.begin()] = Exclude;
    }
  }
  // The rules other rules' edits need (the include, the Accelerator) come along unless
  // excluded by name: "--rules=backward" must not write code that does not compile.
  for (size_t I = 0; I < Registry.size(); ++I) {
    if (Registry[I].OnlyWithOtherEdits && !Excluded[I]) {
      Chosen[I] = true;
    }
  }
  std::vector<RuleInfo> Selected;
  for (size_t I = 0; I < Registry.size(); ++I) {
    if (Chosen[I]) {
      Selected.push_back(Registry[I]);
    }
  }
  return Selected;
}

} // namespace accel::rewrites
