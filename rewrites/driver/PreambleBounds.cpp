//===- PreambleBounds.cpp - Which part of a file's include block is precompiled ---===//
#include "PreambleBounds.h"

#include "clang/Frontend/PrecompiledPreamble.h"
#include "llvm/ADT/StringRef.h"

#include <array>
#include <string>

namespace accel::tool {
namespace {

/// Where LibTorch's headers live under its include directories.
constexpr std::array<llvm::StringLiteral, 4> LibTorchDirectories = {"torch/", "ATen/", "c10/",
                                                                    "caffe2/"};

/// The offset of the '\n' that ends the directive starting at Offset (continuation lines
/// included), or Text.size() when the text ends first.
size_t endOfDirective(llvm::StringRef Text, size_t Offset) {
  size_t End = Offset;
  while (End < Text.size() && Text[End] != '\n') {
    if (Text[End] == '\\' && End + 1 < Text.size() && Text[End + 1] == '\n') {
      ++End;
    }
    ++End;
  }
  return End;
}

/// Whether Rest (the directive's text after "include") names a LibTorch header.
bool namesLibTorchHeader(llvm::StringRef Rest) {
  Rest = Rest.ltrim();
  if (!Rest.consume_front("<") && !Rest.consume_front("\"")) {
    return false; // #include MACRO
  }
  for (llvm::StringLiteral Directory : LibTorchDirectories) {
    if (Rest.starts_with(Directory)) {
      return true;
    }
  }
  return false;
}

} // namespace

clang::PreambleBounds cachedPreambleBounds(const clang::LangOptions &LangOpts,
                                           llvm::MemoryBufferRef MainText) {
  const clang::PreambleBounds Whole = clang::ComputePreambleBounds(LangOpts, MainText, 0);
  const std::string Text = MainText.getBuffer().take_front(Whole.Size).str(); // NUL-terminated
  clang::Lexer Raw(clang::SourceLocation(), LangOpts, Text.data(), Text.data(),
                   Text.data() + Text.size());
  Raw.SetCommentRetentionState(false);
  unsigned Depth = 0; // of #if, #ifdef, #ifndef
  size_t Cut = 0;
  clang::Token Tok;
  while (true) {
    Raw.LexFromRawLexer(Tok);
    if (Tok.is(clang::tok::eof)) {
      break;
    }
    if (Tok.isNot(clang::tok::hash) || !Tok.isAtStartOfLine()) {
      continue; // the rest of a directive
    }
    clang::Token Name;
    Raw.LexFromRawLexer(Name);
    if (Name.isNot(clang::tok::raw_identifier) || Name.isAtStartOfLine()) {
      continue;
    }
    llvm::StringRef Directive = Name.getRawIdentifier();
    if (Directive == "if" || Directive == "ifdef" || Directive == "ifndef") {
      ++Depth;
    } else if (Directive == "endif") {
      Depth = Depth == 0 ? 0 : Depth - 1;
    } else if (Depth == 0 &&
               (Directive == "include" || Directive == "include_next" || Directive == "import")) {
      const size_t AfterName = Raw.getBufferLocation() - Text.data();
      const size_t End = endOfDirective(Text, AfterName);
      llvm::StringRef Rest = llvm::StringRef(Text).slice(AfterName, End);
      // A block comment opened on the line may run past it: the cut would fall inside it.
      if (End < Text.size() && namesLibTorchHeader(Rest) && !Rest.contains("/*")) {
        Cut = End + 1;
      }
      Raw.seek(End, /*IsAtStartOfLine=*/true);
    }
  }
  if (Cut == 0 || Cut >= Whole.Size) {
    return Whole;
  }
  return clang::PreambleBounds(static_cast<unsigned>(Cut), /*PreambleEndsAtStartOfLine=*/true);
}

} // namespace accel::tool
