//===- ApplyEdits.cpp - Edits applied, in the file's own layout -----------===//
//
// A rewrite an expert would sign changes only the text it must: every line no rule edits
// stays byte for byte, a line a rule inserts takes the indentation of its neighbours (tabs,
// 2 or 4 spaces, whatever the file uses), and the file's .clang-format shapes only the text
// the rules wrote, never the user's.
//
//===----------------------------------------------------------------------===//
#include "accel/rewrites/Engine.h"
#include "support/SourceRanges.h"

#include "clang/Format/Format.h"

#include <algorithm>

namespace accel::rewrites {
namespace {

bool isBlank(char C) { return C == ' ' || C == '\t'; }

/// The start of the line holding Offset.
size_t lineStart(llvm::StringRef Code, size_t Offset) {
  size_t Break = Code.rfind('\n', Offset == 0 ? 0 : Offset - 1);
  return Offset == 0 || Break == llvm::StringRef::npos ? 0 : Break + 1;
}

/// The spaces and tabs a line starts with.
llvm::StringRef indentationAt(llvm::StringRef Code, size_t LineStart) {
  size_t End = LineStart;
  while (End < Code.size() && isBlank(Code[End])) {
    ++End;
  }
  return Code.slice(LineStart, End);
}

/// What the line starting at LineStart holds after its indentation, without the line break.
llvm::StringRef lineContent(llvm::StringRef Code, size_t LineStart) {
  llvm::StringRef Rest = Code.drop_front(LineStart);
  return Rest.take_until([](char C) { return C == '\n'; }).trim();
}

/// The first line of the statement whose line starts at LineStart: a statement wrapped over
/// several lines is indented by its first line, not by its continuation lines.
size_t statementStart(llvm::StringRef Code, size_t LineStart) {
  size_t Start = LineStart;
  while (Start > 0) {
    size_t Previous = lineStart(Code, Start - 1);
    llvm::StringRef Content = lineContent(Code, Previous);
    // The line above ends a statement or opens or closes a block (or is not code).
    bool Ends = Content.empty() || Content.starts_with("//") || Content.starts_with("#") ||
                Content.starts_with("*") || Content.ends_with("*/") ||
                llvm::StringRef(";{}:").contains(Content.back());
    if (Ends) {
      break;
    }
    Start = Previous;
  }
  return Start;
}

/// The indentation for whole lines inserted at the start of the line at Offset (in Code, the
/// original text): that of the line they go before, or, before a closing brace, a blank line
/// or the end of the file, that of the code above them (one level deeper after an opening
/// brace).
std::string indentationForLinesAt(llvm::StringRef Code, size_t Offset, llvm::StringRef Unit) {
  llvm::StringRef Below = lineContent(Code, Offset);
  if (!Below.empty() && !Below.starts_with("}") && Offset < Code.size()) {
    return indentationAt(Code, Offset).str();
  }
  for (size_t Start = Offset; Start > 0;) {
    Start = lineStart(Code, Start - 1);
    llvm::StringRef Above = lineContent(Code, Start);
    if (Above.empty()) {
      continue;
    }
    std::string Indentation = indentationAt(Code, statementStart(Code, Start)).str();
    return Above.ends_with("{") ? Indentation + Unit.str() : Indentation;
  }
  return "";
}

/// Text with its leading blanks replaced by Indentation on every line it begins (preprocessor
/// lines and empty lines get none). FirstBeginsLine: the text's first line begins a line.
std::string indentLines(llvm::StringRef Text, bool FirstBeginsLine, llvm::StringRef Indentation) {
  std::string Result;
  bool BeginsLine = FirstBeginsLine;
  while (!Text.empty()) {
    auto [Line, Rest] = Text.split('\n');
    bool HasBreak = Text.size() > Line.size();
    if (BeginsLine) {
      llvm::StringRef Content = Line.ltrim(" \t");
      if (!Content.empty() && !Content.starts_with("#")) {
        Result += Indentation;
      }
      Result += Content;
    } else {
      Result += Line;
    }
    if (HasBreak) {
      Result += '\n';
    }
    BeginsLine = true;
    Text = Rest;
  }
  return Result;
}

/// Edits whose inserted lines carry the indentation of their neighbours.
clang::tooling::Replacements indentInsertedLines(llvm::StringRef Code,
                                                 const clang::tooling::Replacements &Edits) {
  std::string Unit = indentationUnit(Code);
  clang::tooling::Replacements Result;
  for (const clang::tooling::Replacement &R : Edits) {
    llvm::StringRef Text = R.getReplacementText();
    size_t Offset = R.getOffset();
    std::string Indented = Text.str();
    if (Text.contains('\n')) {
      bool AtLineStart = Offset == 0 || Code[Offset - 1] == '\n';
      // Lines inserted at a line start go before the code that follows the edit; lines that
      // start inside the text (after a line break it inserts) continue the edited line.
      std::string Indentation = AtLineStart
                                    ? indentationForLinesAt(Code, Offset + R.getLength(), Unit)
                                    : indentationAt(Code, lineStart(Code, Offset)).str();
      Indented = indentLines(Text, AtLineStart, Indentation);
    }
    llvm::consumeError(Result.add(
        clang::tooling::Replacement(R.getFilePath(), R.getOffset(), R.getLength(), Indented)));
  }
  return Result;
}

/// The style follows the file where the file clearly disagrees with it: a file indented with
/// tabs keeps tabs in the lines formatting wraps (one tab a level), and a line is wrapped only
/// past the longest line the file already has (its author's limit is at least that).
void followTheFile(clang::format::FormatStyle &Style, llvm::StringRef Code) {
  size_t TabLines = 0, SpaceLines = 0;
  for (llvm::StringRef Rest = Code; !Rest.empty();) {
    auto [Line, Next] = Rest.split('\n');
    if (Line.starts_with("\t")) {
      ++TabLines;
    } else if (Line.starts_with(" ") && Line.ltrim().size() != 0) {
      ++SpaceLines;
    }
    Rest = Next;
  }
  if (TabLines > SpaceLines) {
    Style.UseTab = clang::format::FormatStyle::UT_ForContinuationAndIndentation;
    Style.TabWidth = Style.IndentWidth;
    Style.ContinuationIndentWidth = Style.IndentWidth;
  }
  unsigned Longest = 0;
  for (llvm::StringRef Rest = Code; !Rest.empty();) {
    auto [Line, Next] = Rest.split('\n');
    unsigned Width = 0;
    for (char C : Line) {
      Width = C == '\t' ? (Width / Style.TabWidth + 1) * Style.TabWidth : Width + 1;
    }
    Longest = std::max(Longest, Width);
    Rest = Next;
  }
  if (Style.ColumnLimit != 0 && Longest > Style.ColumnLimit) {
    Style.ColumnLimit = Longest;
  }
}

} // namespace

std::string applyEdits(llvm::StringRef FileName, llvm::StringRef Code,
                       const clang::tooling::Replacements &Edits,
                       clang::tooling::Replacements &Composed) {
  Composed = indentInsertedLines(Code, Edits);
  if (Composed.empty()) {
    return Code.str();
  }
  llvm::Expected<std::string> Applied = clang::tooling::applyAllReplacements(Code, Composed);
  if (!Applied) {
    llvm::consumeError(Applied.takeError());
    Composed = clang::tooling::Replacements();
    return Code.str();
  }
  llvm::Expected<clang::format::FormatStyle> Style =
      clang::format::getStyle("file", FileName, "LLVM", Code);
  clang::format::FormatStyle Chosen = clang::format::getLLVMStyle();
  if (Style) {
    Chosen = *Style;
  } else {
    llvm::consumeError(Style.takeError());
  }
  // `T& name` or `T &name` as the file already writes it, whatever the style says.
  Chosen.DerivePointerAlignment = true;
  followTheFile(Chosen, Code);
  // Each line of text the edits wrote, in the new code, from its first to its last
  // non-blank character: the only text formatting may change.
  std::vector<clang::tooling::Range> Written;
  long Delta = 0;
  for (const clang::tooling::Replacement &R : Composed) {
    llvm::StringRef Text = R.getReplacementText();
    size_t Start = size_t(long(R.getOffset()) + Delta);
    Delta += long(Text.size()) - long(R.getLength());
    size_t LineOffset = 0;
    for (llvm::StringRef Rest = Text; !Rest.empty();) {
      auto [Line, Next] = Rest.split('\n');
      size_t Leading = Line.find_first_not_of(" \t\r");
      if (Leading != llvm::StringRef::npos) {
        size_t Trailing = Line.find_last_not_of(" \t\r");
        Written.emplace_back(unsigned(Start + LineOffset + Leading),
                             unsigned(Trailing + 1 - Leading));
      }
      LineOffset += Line.size() + 1;
      Rest = Next;
    }
  }
  if (Written.empty()) {
    return *Applied;
  }
  // clang-format also re-indents and re-wraps the lines around what it is asked to format;
  // of its changes, only those inside the written text are taken.
  clang::tooling::Replacements Formatting;
  for (const clang::tooling::Replacement &F :
       clang::format::reformat(Chosen, *Applied, Written, FileName)) {
    bool Inside = std::any_of(Written.begin(), Written.end(), [&](const clang::tooling::Range &W) {
      return F.getOffset() > W.getOffset() &&
             F.getOffset() + F.getLength() < W.getOffset() + W.getLength();
    });
    if (Inside) {
      llvm::consumeError(Formatting.add(F));
    }
  }
  llvm::Expected<std::string> Formatted =
      clang::tooling::applyAllReplacements(*Applied, Formatting);
  if (!Formatted) {
    llvm::consumeError(Formatted.takeError());
    return *Applied;
  }
  Composed = Composed.merge(Formatting);
  return *Formatted;
}

} // namespace accel::rewrites
