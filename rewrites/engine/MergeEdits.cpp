//===- MergeEdits.cpp - The rules' edits of one file, as one set ----------===//
#include "accel/rewrites/Engine.h"

#include "llvm/ADT/STLExtras.h"

namespace accel::rewrites {

clang::tooling::Replacements mergeEdits(const std::set<TextEdit> &Edits, llvm::StringRef FileName,
                                        std::vector<std::string> &Warnings) {
  std::vector<TextEdit> Sorted(Edits.begin(), Edits.end());
  llvm::stable_sort(Sorted, [](const TextEdit &A, const TextEdit &B) {
    return std::tie(A.Offset, A.Length, A.RuleIndex) < std::tie(B.Offset, B.Length, B.RuleIndex);
  });
  std::vector<TextEdit> Merged;
  for (const TextEdit &Edit : Sorted) {
    if (!Merged.empty()) {
      TextEdit &Last = Merged.back();
      if (Last.Offset == Edit.Offset && Last.Length == Edit.Length && Last.Text == Edit.Text) {
        continue; // The same edit, found twice.
      }
      if (Last.Offset == Edit.Offset && Last.Length == 0) {
        // Insertions at one place go in rule order; an insertion before a replacement at
        // the same place keeps both.
        Last.Length = Edit.Length;
        Last.Text += Edit.Text;
        continue;
      }
      if (Edit.Offset < Last.Offset + Last.Length) {
        Warnings.push_back(FileName.str() +
                           ": warning: two rules edit overlapping text at offset " +
                           std::to_string(Edit.Offset) + "; the later edit was dropped");
        continue;
      }
    }
    Merged.push_back(Edit);
  }
  clang::tooling::Replacements Result;
  for (const TextEdit &Edit : Merged) {
    if (llvm::Error Error = Result.add(
            clang::tooling::Replacement(FileName, Edit.Offset, Edit.Length, Edit.Text))) {
      Warnings.push_back(FileName.str() + ": warning: " + llvm::toString(std::move(Error)));
    }
  }
  return Result;
}

} // namespace accel::rewrites
