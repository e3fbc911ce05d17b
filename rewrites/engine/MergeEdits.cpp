//===- MergeEdits.cpp - The rules' edits of one file, as one set ----------===//
#include "accel/rewrites/Engine.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace accel::rewrites {

namespace {

/// Applies Inner, which lies inside Outer's range of Code, to Outer's replacement text, where
/// that text holds the code around Inner as written (accel-backward's
/// `accelerator.backward(<the loss as written>)` around accel-data-loader's
/// `accelerator.batch_rows(` and `)`): the shortest window of that code at Inner (context on
/// both sides, else on one) that occurs once in the text places it. False when none does.
bool composeInside(TextEdit &Outer, const TextEdit &Inner, llvm::StringRef Code) {
  llvm::StringRef Original = Code.substr(Outer.Offset, Outer.Length);
  const size_t At = Inner.Offset - Outer.Offset;
  if (Inner.Offset < Outer.Offset || At + Inner.Length > Original.size()) {
    return false; // not inside: the edits cross
  }
  llvm::StringRef Text = Outer.Text;
  // Context before and after Inner: both, before only, after only. A window the text lacks
  // stays lacking when it grows.
  bool Lacking[3] = {false, false, false};
  for (size_t Context = 8;; Context *= 2) {
    const size_t Before = At > Context ? At - Context : 0;
    const size_t After = std::min(Original.size(), At + Inner.Length + Context);
    const std::pair<size_t, size_t> Windows[3] = {
        {Before, After}, {Before, At + Inner.Length}, {At, After}};
    for (int Kind = 0; Kind < 3; ++Kind) {
      auto [Begin, End] = Windows[Kind];
      llvm::StringRef Window = Original.slice(Begin, End);
      if (Lacking[Kind] || Window.empty()) {
        continue;
      }
      const size_t Found = Text.find(Window);
      if (Found == llvm::StringRef::npos) {
        Lacking[Kind] = true;
      } else if (Text.find(Window, Found + 1) == llvm::StringRef::npos) {
        Outer.Text.replace(Found + (At - Begin), Inner.Length, Inner.Text);
        return true;
      }
    }
    if ((Lacking[0] && Lacking[1] && Lacking[2]) || (Before == 0 && After == Original.size())) {
      return false;
    }
  }
}

unsigned lineOf(llvm::StringRef Code, unsigned Offset) {
  return 1 + Code.take_front(Offset).count('\n');
}

} // namespace

std::optional<clang::tooling::Replacements> mergeEdits(const std::set<TextEdit> &Edits,
                                                       llvm::StringRef FileName,
                                                       llvm::StringRef Code,
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
        // One inside the other: the inner edit goes into the outer one's text (a shorter
        // replacement at the same place comes first in the order).
        const bool EditIsOuter = Edit.Offset + Edit.Length > Last.Offset + Last.Length;
        TextEdit Outer = EditIsOuter ? Edit : Last;
        if (Outer.Length > 0 && composeInside(Outer, EditIsOuter ? Last : Edit, Code)) {
          Last = std::move(Outer);
          continue;
        }
        // A half-applied rewrite is worse than none: the file stays as written.
        Warnings.push_back(FileName.str() + ":" + std::to_string(lineOf(Code, Edit.Offset)) +
                           ": warning: two rules edit the same code here in ways accel-rewrite "
                           "cannot combine, so the file is left as written; rewrite this line "
                           "by hand and run accel-rewrite again (and please report it)");
        return std::nullopt;
      }
    }
    Merged.push_back(Edit);
  }
  clang::tooling::Replacements Result;
  for (const TextEdit &Edit : Merged) {
    if (llvm::Error Error = Result.add(
            clang::tooling::Replacement(FileName, Edit.Offset, Edit.Length, Edit.Text))) {
      Warnings.push_back(FileName.str() + ": warning: " + llvm::toString(std::move(Error)) +
                         "; the file is left as written");
      return std::nullopt;
    }
  }
  return Result;
}

} // namespace accel::rewrites
