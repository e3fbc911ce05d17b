//===- SourceRanges.h - Where edits go in the text --------------*- C++ -*-===//
#pragma once

#include "clang/Basic/LangOptions.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Tooling/Transformer/RangeSelector.h"
#include "clang/Tooling/Transformer/RewriteRule.h"

#include <string>

namespace accel::rewrites {

/// The statement bound to Id with its whole line (indentation, a `//` comment after it, the
/// line break) when no other code is on that line, else the statement and its semicolon.
clang::transformer::RangeSelector wholeStatementLine(std::string Id);
/// Where a new line goes before Loc: the start of Loc's line when only white space
/// precedes Loc on it (the inserted text then ends with a line break), else Loc itself.
clang::SourceLocation lineStartBefore(clang::SourceLocation Loc, const clang::SourceManager &SM);
/// Where a new line goes after the token at Loc: the start of the next line when only white
/// space or a // comment follows on Loc's line, else right after the token.
clang::SourceLocation lineStartAfter(clang::SourceLocation Loc, const clang::SourceManager &SM,
                                     const clang::LangOptions &LangOpts, bool &AtLineStart);

/// An edit putting Item first in a parenthesised list (a call's arguments, a function's
/// parameters) that opens at LParen and closes at RParen, whose first item begins at First
/// (invalid for an empty list): right after the parenthesis when the first item is on its
/// line, else before the first item, so that no line gets trailing white space. Fails on
/// macro locations.
llvm::Expected<clang::transformer::Edit>
firstInList(clang::SourceLocation LParen, clang::SourceLocation First, clang::SourceLocation RParen,
            llvm::StringRef Item, const clang::SourceManager &SM);

/// One level of indentation in Code: a tab when lines are indented with tabs, else the
/// smallest step between the indentations of consecutive lines (2 when nothing says).
std::string indentationUnit(llvm::StringRef Code);

/// Name, else Name with "_guard" (then a number) added: the first that is no identifier in
/// Range's text (comments and strings are not read). A variable the rewrite declares there
/// must not hide one of the code's names (`auto accumulation = accelerator.accumulate(...)`
/// in a loop that divides by its own `accumulation`).
std::string unusedName(llvm::StringRef Name, clang::SourceRange Range,
                       const clang::SourceManager &SM, const clang::LangOptions &LangOpts);

/// An edit inserting Text at Loc (a file location).
clang::transformer::Edit insertionAt(clang::SourceLocation Loc, std::string Text);

} // namespace accel::rewrites
