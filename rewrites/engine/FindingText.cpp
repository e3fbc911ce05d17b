//===- FindingText.cpp - Findings and edits as people read them -----------===//
#include "accel/rewrites/Engine.h"

namespace accel::rewrites {

Region regionOf(const RuleFinding &Found) {
  Region R{Found.Line, Found.Column, Found.Line, Found.Column + 1};
  for (const FixEdit &Edit : Found.Fix) {
    if (std::tie(Edit.BeginLine, Edit.BeginColumn) == std::tie(R.StartLine, R.StartColumn) &&
        std::tie(Edit.EndLine, Edit.EndColumn) > std::tie(R.EndLine, R.EndColumn)) {
      R.EndLine = Edit.EndLine;
      R.EndColumn = Edit.EndColumn;
    }
  }
  return R;
}

std::string describeEdit(const FixEdit &Edit, llvm::StringRef Original) {
  std::string Old = Original.substr(Edit.Offset, Edit.Length).trim().str();
  std::string New = llvm::StringRef(Edit.Text).trim().str();
  if (Old.empty()) {
    return "insert '" + New + "'";
  }
  if (New.empty()) {
    return "remove '" + Old + "'";
  }
  return "replace '" + Old + "' with '" + New + "'";
}

std::string warningLine(const RuleFinding &Found) {
  std::string Text;
  if (!Found.File.empty()) {
    Text =
        Found.File + ":" + std::to_string(Found.Line) + ":" + std::to_string(Found.Column) + ": ";
  }
  return Text + "warning: " + Found.Message + " [" + Found.Rule + "]";
}

} // namespace accel::rewrites
