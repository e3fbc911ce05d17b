//===- LspAnalysis.cpp - accel-rewrite --lsp on stdio ---------------------===//
//
// What the language server (LspServer.cpp) publishes for a document: its compile command
// (CompileFlags.cpp) and the rules' findings in its unsaved text, parsed by clang.
//
//===----------------------------------------------------------------------===//
#include "CompileFlags.h"
#include "LspServer.h"

#include "llvm/Support/LSP/Logging.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

namespace accel::tool {

int runLspServer(const LspOptions &Options) {
  namespace lsp = llvm::lsp;
  lsp::Logger::setLogLevel(lsp::Logger::Level::Info);
  lsp::JSONTransport Transport(stdin, llvm::outs());
  serveLsp(Transport,
           [&Options](llvm::StringRef File, llvm::StringRef Text,
                      std::string &Why) -> std::optional<FileRewrite> {
             llvm::Expected<std::unique_ptr<clang::tooling::CompilationDatabase>> Compilations =
                 compilationsFor(File, Options.BuildDir);
             if (!Compilations) {
               Why = llvm::toString(Compilations.takeError());
               return std::nullopt;
             }
             const auto Start = std::chrono::steady_clock::now();
             std::optional<FileRewrite> Analysis =
                 rewriteFile(**Compilations, File, Options.ResourceDir, Options.Rules, Why,
                             Options.Preambles, Text);
             if (Analysis) {
               // The client's log (stderr): how long the analysis took, and why.
               lsp::Logger::info(
                   "{0}: analysed in {1:f2} s; {2}", File,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - Start).count(),
                   Analysis->PreambleNote);
             }
             return Analysis;
           });
  return 0;
}

} // namespace accel::tool
