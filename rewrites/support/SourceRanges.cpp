//===- SourceRanges.cpp - Where edits go in the text ----------------------===//
#include "support/SourceRanges.h"

#include "clang/Lex/Lexer.h"
#include "llvm/ADT/StringSet.h"

#include <map>

using namespace clang;

namespace accel::rewrites {

transformer::RangeSelector wholeStatementLine(std::string Id) {
  return
      [Id](const ast_matchers::MatchFinder::MatchResult &Match) -> llvm::Expected<CharSourceRange> {
        llvm::Expected<CharSourceRange> Statement = transformer::statement(Id)(Match);
        if (!Statement) {
          return Statement.takeError();
        }
        const SourceManager &SM = *Match.SourceManager;
        CharSourceRange File =
            Lexer::makeFileCharRange(*Statement, SM, Match.Context->getLangOpts());
        if (File.isInvalid()) {
          return *Statement;
        }
        FileID FID = SM.getFileID(File.getBegin());
        llvm::StringRef Data = SM.getBufferData(FID);
        unsigned Begin = SM.getFileOffset(File.getBegin()), End = SM.getFileOffset(File.getEnd());
        unsigned LineBegin = Begin, LineEnd = End;
        while (LineBegin > 0 && (Data[LineBegin - 1] == ' ' || Data[LineBegin - 1] == '\t')) {
          --LineBegin;
        }
        while (LineEnd < Data.size() &&
               (Data[LineEnd] == ' ' || Data[LineEnd] == '\t' || Data[LineEnd] == '\r')) {
          ++LineEnd;
        }
        // A comment after the statement on its line is about it: it goes with it, rather than
        // staying on a line of its own (`model->to(device);  // to the GPU`).
        if (Data.substr(LineEnd).starts_with("//")) {
          LineEnd = std::min(Data.find('\n', LineEnd), Data.size());
        }
        bool AloneOnLine = (LineBegin == 0 || Data[LineBegin - 1] == '\n') &&
                           (LineEnd == Data.size() || Data[LineEnd] == '\n');
        if (!AloneOnLine) {
          return File;
        }
        SourceLocation Start = SM.getLocForStartOfFile(FID);
        return CharSourceRange::getCharRange(
            Start.getLocWithOffset(LineBegin),
            Start.getLocWithOffset(std::min<unsigned>(LineEnd + 1, Data.size())));
      };
}

SourceLocation lineStartBefore(SourceLocation Loc, const SourceManager &SM) {
  auto [FID, Offset] = SM.getDecomposedLoc(Loc);
  llvm::StringRef Data = SM.getBufferData(FID);
  unsigned Begin = Offset;
  while (Begin > 0 && (Data[Begin - 1] == ' ' || Data[Begin - 1] == '\t')) {
    --Begin;
  }
  if (Begin == 0 || Data[Begin - 1] == '\n') {
    return Loc.getLocWithOffset(int(Begin) - int(Offset));
  }
  return Loc;
}

SourceLocation lineStartAfter(SourceLocation Loc, const SourceManager &SM,
                              const LangOptions &LangOpts, bool &AtLineStart) {
  SourceLocation End = Lexer::getLocForEndOfToken(Loc, 0, SM, LangOpts);
  auto [FID, Offset] = SM.getDecomposedLoc(End);
  llvm::StringRef Data = SM.getBufferData(FID);
  unsigned Next = Offset;
  while (Next < Data.size() && (Data[Next] == ' ' || Data[Next] == '\t' || Data[Next] == '\r')) {
    ++Next;
  }
  if (Data.substr(Next).starts_with("//")) {
    Next = Data.find('\n', Next);
    if (Next == llvm::StringRef::npos) {
      Next = Data.size();
    }
  }
  if (Next < Data.size() && Data[Next] == '\n') {
    AtLineStart = true;
    return End.getLocWithOffset(int(Next + 1) - int(Offset));
  }
  AtLineStart = false;
  return End;
}

llvm::Expected<transformer::Edit> firstInList(SourceLocation LParen, SourceLocation First,
                                              SourceLocation RParen, llvm::StringRef Item,
                                              const SourceManager &SM) {
  for (SourceLocation Loc : {LParen, First, RParen}) {
    if (Loc.isMacroID()) {
      return llvm::createStringError("a list written by a macro");
    }
  }
  if (LParen.isInvalid() || RParen.isInvalid()) {
    return llvm::createStringError("no parentheses");
  }
  SourceLocation AfterParen = LParen.getLocWithOffset(1);
  if (First.isInvalid()) {
    // An empty list; `(void)` becomes `(Item)`.
    llvm::StringRef Inside =
        Lexer::getSourceText(CharSourceRange::getCharRange(AfterParen, RParen), SM, LangOptions());
    transformer::Edit Edit = insertionAt(AfterParen, Item.str());
    if (Inside.trim() == "void") {
      Edit.Range = CharSourceRange::getCharRange(AfterParen, RParen);
    }
    return Edit;
  }
  if (SM.getExpansionLineNumber(LParen) == SM.getExpansionLineNumber(First)) {
    return insertionAt(AfterParen, Item.str() + ", ");
  }
  return insertionAt(First, Item.str() + ", ");
}

transformer::Edit insertionAt(SourceLocation Loc, std::string Text) {
  transformer::Edit Edit;
  Edit.Range = CharSourceRange::getCharRange(Loc, Loc);
  Edit.Replacement = std::move(Text);
  return Edit;
}

std::string indentationUnit(llvm::StringRef Code) {
  // The most frequent step by which a line is indented more than the one before: not the
  // smallest, which an aligned continuation line would set.
  std::map<size_t, int> Steps;
  size_t Previous = 0;
  for (llvm::StringRef Rest = Code; !Rest.empty();) {
    auto [Line, Next] = Rest.split('\n');
    Rest = Next;
    if (Line.trim().empty()) {
      continue;
    }
    if (Line.starts_with("\t")) {
      return "\t";
    }
    // Access specifiers sit at their own offset (Google style: one space in).
    if (llvm::StringRef Trimmed = Line.trim();
        Trimmed == "public:" || Trimmed == "private:" || Trimmed == "protected:") {
      continue;
    }
    size_t Width = Line.size() - Line.ltrim(' ').size();
    if (Width > Previous && Width - Previous <= 8) {
      ++Steps[Width - Previous];
    }
    Previous = Width;
  }
  size_t Unit = 2;
  int Most = 0;
  for (const auto &[Step, Count] : Steps) {
    if (Count > Most) { // ties go to the smaller step (the map is ordered)
      Unit = Step;
      Most = Count;
    }
  }
  return std::string(Unit, ' ');
}

std::string unusedName(llvm::StringRef Name, SourceRange Range, const SourceManager &SM,
                       const LangOptions &LangOpts) {
  CharSourceRange Chars =
      Lexer::makeFileCharRange(CharSourceRange::getTokenRange(Range), SM, LangOpts);
  llvm::StringSet<> Used;
  if (Chars.isValid()) {
    bool Invalid = false;
    llvm::StringRef Text = Lexer::getSourceText(Chars, SM, LangOpts, &Invalid);
    if (!Invalid) {
      Lexer Raw(Chars.getBegin(), LangOpts, Text.begin(), Text.begin(), Text.end());
      Token Tok;
      bool AtEnd = false;
      while (!AtEnd) {
        AtEnd = Raw.LexFromRawLexer(Tok); // true with the last token
        if (Tok.is(tok::raw_identifier)) {
          Used.insert(Tok.getRawIdentifier());
        }
      }
    }
  }
  std::string Candidate = Name.str();
  for (int Number = 1; Used.contains(Candidate); ++Number) {
    Candidate = Name.str() + "_guard" + (Number == 1 ? "" : std::to_string(Number));
  }
  return Candidate;
}

} // namespace accel::rewrites
