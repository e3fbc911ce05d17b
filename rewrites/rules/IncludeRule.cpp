//===- IncludeRule.cpp - accel-include ------------------------------------===//
//
// #include <accelerate/accelerate.h> once, after the last #include of the main file's
// include block, when another rule edits the file. See docs/rules/accel-include.md.
//
//===----------------------------------------------------------------------===//
#include "RuleFactories.h"
#include "support/RuleBuilders.h"
#include "support/SourceRanges.h"

#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"

using namespace clang;
using namespace clang::ast_matchers;
using namespace clang::transformer;

namespace accel::rewrites {
namespace {

constexpr llvm::StringLiteral Header = "accelerate/accelerate.h";

struct IncludeBlock {
  /// Start of the line after the last #include of the leading block (or of the file).
  SourceLocation InsertAt;
  bool AlreadyIncluded = false;
};

/// Reads the directives that open the main file, up to its first declaration, with the raw
/// lexer (include directives are not in the AST).
IncludeBlock scanIncludes(const SourceManager &SM, const LangOptions &LangOpts) {
  IncludeBlock Block;
  FileID Main = SM.getMainFileID();
  llvm::StringRef Data = SM.getBufferData(Main);
  SourceLocation Start = SM.getLocForStartOfFile(Main);
  Lexer Raw(Start, LangOpts, Data.begin(), Data.begin(), Data.end());
  Raw.SetCommentRetentionState(false);
  Block.InsertAt = Start;
  Token Tok;
  while (true) {
    Raw.LexFromRawLexer(Tok);
    if (Tok.is(tok::eof)) {
      break;
    }
    if (Tok.isNot(tok::hash) || !Tok.isAtStartOfLine()) {
      break; // The first declaration ends the include block.
    }
    Token Directive;
    Raw.LexFromRawLexer(Directive);
    bool IsInclude = Directive.is(tok::raw_identifier) && Directive.getRawIdentifier() == "include";
    // The rest of the directive's line (a continuation line ends in a backslash).
    unsigned Offset = SM.getFileOffset(Directive.getLocation());
    unsigned LineEnd = Offset;
    while (LineEnd < Data.size() && Data[LineEnd] != '\n') {
      if (Data[LineEnd] == '\\' && LineEnd + 1 < Data.size() && Data[LineEnd + 1] == '\n') {
        ++LineEnd;
      }
      ++LineEnd;
    }
    if (IsInclude) {
      llvm::StringRef Line = Data.slice(Offset, LineEnd);
      if (Line.contains("<" + Header.str() + ">") || Line.contains("\"" + Header.str() + "\"")) {
        Block.AlreadyIncluded = true;
      }
      Block.InsertAt = Start.getLocWithOffset(std::min<unsigned>(LineEnd + 1, Data.size()));
    }
    // Continue lexing on the next line.
    Raw.seek(std::min<unsigned>(LineEnd, Data.size()), /*IsAtStartOfLine=*/true);
  }
  return Block;
}

} // namespace

Rule makeIncludeRule() {
  EditGenerator Edits = [](const MatchResult &Match) -> llvm::Expected<llvm::SmallVector<Edit, 1>> {
    IncludeBlock Block = scanIncludes(*Match.SourceManager, Match.Context->getLangOpts());
    llvm::SmallVector<Edit, 1> Result;
    if (!Block.AlreadyIncluded) {
      Result.push_back(insertionAt(Block.InsertAt, "#include <" + Header.str() + ">\n"));
    }
    return Result;
  };
  return makeRule(translationUnitDecl().bind("unit"), Edits,
                  dynamicFinding("unit", [](const MatchResult &Match) {
                    Finding Result;
                    Result.Loc =
                        scanIncludes(*Match.SourceManager, Match.Context->getLangOpts()).InsertAt;
                    Result.Message = "the rewritten code uses the accel runtime's "
                                     "accelerate::Accelerator";
                    return Result;
                  }));
}

} // namespace accel::rewrites
