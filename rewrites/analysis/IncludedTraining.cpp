//===- IncludedTraining.cpp - Training in the headers a file includes ----===//
#include "analysis/IncludedTraining.h"

#include "clang/AST/DeclBase.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Lex/Lexer.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

using namespace clang;

namespace accel::rewrites {
namespace {

/// LibTorch's own headers, also when a build passes them with -I rather than -isystem, and
/// other installed headers: not the project's.
bool isInstalledHeader(llvm::StringRef Path) {
  for (llvm::StringRef Marker : {"/torch/include/", "/libtorch/", "/site-packages/",
                                 "/dist-packages/", "/usr/include/", "/usr/local/include/"}) {
    if (Path.contains(Marker)) {
      return true;
    }
  }
  return false;
}

/// The first backward call in File's text: `.backward(` or `->backward(` on anything but the
/// accelerator, or `autograd::backward(`. The offset of its name.
std::optional<unsigned> firstBackward(const SourceManager &SM, FileID File,
                                      const LangOptions &LangOpts) {
  llvm::StringRef Text = SM.getBufferData(File);
  Lexer Raw(SM.getLocForStartOfFile(File), LangOpts, Text.begin(), Text.begin(), Text.end());
  // The three tokens before the current one: Object Access Name (.
  Token Object, Access, Name, Tok;
  Object.startToken();
  Access.startToken();
  Name.startToken();
  auto Is = [](const Token &T, llvm::StringRef Identifier) {
    return T.is(tok::raw_identifier) && T.getRawIdentifier() == Identifier;
  };
  while (!Raw.LexFromRawLexer(Tok)) {
    if (Tok.is(tok::l_paren) && Is(Name, "backward")) {
      bool Member = Access.isOneOf(tok::period, tok::arrow) && !Is(Object, "accelerator");
      bool Autograd = Access.is(tok::coloncolon) && Is(Object, "autograd");
      if (Member || Autograd) {
        return SM.getFileOffset(Name.getLocation());
      }
    }
    Object = Access;
    Access = Name;
    Name = Tok;
  }
  return std::nullopt;
}

/// The main file's #include line that brings File in, directly or through other headers.
SourceLocation includeInMainFile(const SourceManager &SM, FileID File) {
  SourceLocation Previous;
  for (SourceLocation At = SM.getIncludeLoc(File); At.isValid();
       At = SM.getIncludeLoc(SM.getFileID(At))) {
    if (SM.isWrittenInMainFile(At)) {
      // A precompiled preamble is a copy of the main file's first lines, included at its
      // start: the directive's line there is its line here.
      unsigned Line = SM.getFileOffset(At) == 0 && Previous.isValid()
                          ? SM.getSpellingLineNumber(Previous)
                          : SM.getSpellingLineNumber(At);
      return SM.translateLineCol(SM.getMainFileID(), Line, 1);
    }
    Previous = At;
  }
  return {};
}

} // namespace

llvm::SmallVector<IncludedTraining, 2> trainingInIncludedHeaders(ASTContext &Ctx) {
  const SourceManager &SM = Ctx.getSourceManager();
  llvm::SmallVector<IncludedTraining, 2> Found;
  llvm::DenseSet<FileID> Seen;
  // Every header that declares something at namespace scope (a class, a function, a
  // namespace): the headers a program's training can live in. Decls, not the source
  // manager's file table: a precompiled preamble loads that table lazily, entry by entry.
  for (const Decl *D : Ctx.getTranslationUnitDecl()->decls()) {
    SourceLocation Loc = D->getLocation();
    if (Loc.isInvalid()) {
      continue;
    }
    Loc = SM.getExpansionLoc(Loc);
    FileID File = SM.getFileID(Loc);
    if (File == SM.getMainFileID() || !Seen.insert(File).second || SM.isInSystemHeader(Loc)) {
      continue;
    }
    OptionalFileEntryRef Entry = SM.getFileEntryRefForID(File);
    if (!Entry || isInstalledHeader(Entry->getName())) {
      continue;
    }
    if (std::optional<unsigned> Offset = firstBackward(SM, File, Ctx.getLangOpts())) {
      SourceLocation At = SM.getLocForStartOfFile(File).getLocWithOffset(*Offset);
      Found.push_back({Entry->getName().str(), SM.getSpellingLineNumber(At),
                       SM.getSpellingColumnNumber(At), includeInMainFile(SM, File)});
    }
  }
  return Found;
}

} // namespace accel::rewrites
