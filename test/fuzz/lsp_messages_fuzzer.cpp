// accel-rewrite --lsp (tool/LspServer.cpp): the input is what a client writes to the server's
// stdin, Content-Length framed JSON-RPC, served by the real server until the input ends. The
// analysis is a stand-in: the real one parses each document with clang and runs every rule,
// which would cost the fuzz build the whole rule library and the fuzzer seconds per message.
// The stand-in reports what the backward rule reports, at every `NAME.backward()` of the text,
// with the same kind of edit, so that diagnostics and quick fixes are built from findings as
// the real analysis makes them; a text with `#error` does not analyse.
#include "LspServer.h"

#include "llvm/Support/LSP/Logging.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace {

using accel::tool::FileRewrite;
using accel::tool::FixEdit;
using accel::tool::RuleFinding;

// 1-based line and column of Offset in Text.
std::pair<unsigned, unsigned> lineColumn(llvm::StringRef Text, size_t Offset) {
  llvm::StringRef Before = Text.take_front(Offset);
  const size_t LineStart = Before.rfind('\n');
  const unsigned Line = unsigned(Before.count('\n')) + 1;
  const size_t Column = LineStart == llvm::StringRef::npos ? Offset : Offset - LineStart - 1;
  return {Line, unsigned(Column) + 1};
}

std::optional<FileRewrite> standInAnalysis(llvm::StringRef File, llvm::StringRef Text,
                                           std::string &Why) {
  if (Text.contains("#error")) {
    Why = File.str() + ":1:2: error: #error in the text";
    return std::nullopt;
  }
  FileRewrite Result;
  Result.Original = Text.str();
  constexpr llvm::StringLiteral Call = ".backward()";
  for (size_t At = Text.find(Call); At != llvm::StringRef::npos; At = Text.find(Call, At + 1)) {
    size_t Begin = At;
    while (Begin > 0 &&
           (std::isalnum(static_cast<unsigned char>(Text[Begin - 1])) || Text[Begin - 1] == '_')) {
      --Begin;
    }
    if (Begin == At) {
      continue;
    }
    const size_t End = At + Call.size();
    FixEdit Edit;
    Edit.Offset = unsigned(Begin);
    Edit.Length = unsigned(End - Begin);
    Edit.Text = "accelerator.backward(" + Text.slice(Begin, At).str() + ")";
    std::tie(Edit.BeginLine, Edit.BeginColumn) = lineColumn(Text, Begin);
    std::tie(Edit.EndLine, Edit.EndColumn) = lineColumn(Text, End);
    RuleFinding Found;
    Found.Rule = "accel-backward";
    Found.File = File.str();
    Found.Line = Edit.BeginLine;
    Found.Column = Edit.BeginColumn;
    Found.Message = "the accelerator runs backward (it scales the loss under fp16)";
    Found.Fix.push_back(Edit);
    Result.Findings.push_back(Found);
    llvm::consumeError(Result.Replacements.add(
        clang::tooling::Replacement(File, Edit.Offset, Edit.Length, Edit.Text)));
  }
  return Result;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static const bool Quiet = [] {
    llvm::lsp::Logger::setLogLevel(llvm::lsp::Logger::Level::Error);
    return true;
  }();
  (void)Quiet;
  if (Size == 0) {
    return 0; // fmemopen refuses an empty buffer
  }
  std::FILE *In = ::fmemopen(const_cast<uint8_t *>(Data), Size, "r");
  if (In == nullptr) {
    return 0;
  }
  llvm::lsp::JSONTransport Transport(In, llvm::nulls());
  accel::tool::serveLsp(Transport, standInAnalysis);
  std::fclose(In);
  return 0;
}
