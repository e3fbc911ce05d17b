//===- LspServer.cpp - accel-rewrite --lsp --------------------------------===//
//
// A language server over stdio on LLVM's LSP support (llvm/Support/LSP): the rules' findings
// as diagnostics of each open document (its unsaved text), published on open, change and
// save; a quick fix per finding and one that applies them all (what -i would write). Runs
// beside clangd. See docs/editors.md. The analysis itself comes from the caller
// (LspAnalysis.cpp: clang and the rules), so that the protocol side can be fuzzed alone.
//
//===----------------------------------------------------------------------===//
#include "LspServer.h"

#include "accel/build_info.h"

#include "llvm/Support/LSP/Logging.h"
#include "llvm/Support/LSP/Protocol.h"

#include <map>

namespace accel::tool {
namespace {

namespace lsp = llvm::lsp;
using accel::rewrites::describeEdit;
using accel::rewrites::Region;
using accel::rewrites::regionOf;
using llvm::json::Value;

/// Notifications whose parameters the server does not read.
struct Ignored {};
[[maybe_unused]] bool fromJSON(const Value &, Ignored &, llvm::json::Path) { return true; }
/// textDocument/didSave: only the document.
struct SaveParams {
  lsp::TextDocumentIdentifier textDocument;
};
[[maybe_unused]] bool fromJSON(const Value &Raw, SaveParams &Result, llvm::json::Path Path) {
  llvm::json::ObjectMapper Map(Raw, Path);
  return Map && Map.map("textDocument", Result.textDocument);
}

/// LSP positions count from 0; the findings' lines and columns from 1 (bytes, which is what
/// LSP's UTF-16 columns are for ASCII source).
lsp::Position position(unsigned Line, unsigned Column) {
  return lsp::Position(int(Line > 0 ? Line - 1 : 0), int(Column > 0 ? Column - 1 : 0));
}

lsp::Position positionOfOffset(llvm::StringRef Text, unsigned Offset) {
  llvm::StringRef Before = Text.take_front(Offset);
  size_t LineStart = Before.rfind('\n');
  unsigned Line = unsigned(Before.count('\n'));
  unsigned Column = LineStart == llvm::StringRef::npos ? Offset : unsigned(Offset - LineStart - 1);
  return lsp::Position(int(Line), int(Column));
}

struct Document {
  std::string Text;
  int64_t Version = 0;
  std::optional<FileRewrite> Analysis; // the last one, for code actions
};

class Server {
public:
  Server(lsp::JSONTransport &Transport, const DocumentAnalyzer &Analyze)
      : Handler(Transport), Analyze(Analyze),
        Publish(Handler.outgoingNotification<lsp::PublishDiagnosticsParams>(
            "textDocument/publishDiagnostics")) {
    Handler.method("initialize", this, &Server::onInitialize);
    Handler.notification("initialized", this, &Server::onIgnored);
    Handler.method("shutdown", this, &Server::onShutdown);
    Handler.notification("exit", this, &Server::onIgnored);
    Handler.notification("textDocument/didOpen", this, &Server::onOpen);
    Handler.notification("textDocument/didChange", this, &Server::onChange);
    Handler.notification("textDocument/didSave", this, &Server::onSave);
    Handler.notification("textDocument/didClose", this, &Server::onClose);
    Handler.method("textDocument/codeAction", this, &Server::onCodeAction);
  }
  lsp::MessageHandler &handler() { return Handler; }

private:
  void onInitialize(const lsp::InitializeParams &, lsp::Callback<Value> Reply) {
    llvm::json::Object Sync{{"openClose", true}, {"change", 1 /* full text */}, {"save", true}};
    Reply(llvm::json::Object{
        {"capabilities",
         llvm::json::Object{{"textDocumentSync", std::move(Sync)}, {"codeActionProvider", true}}},
        {"serverInfo", llvm::json::Object{{"name", "accel-rewrite"}, {"version", ACCEL_VERSION}}}});
  }
  void onShutdown(const lsp::NoParams &, lsp::Callback<std::nullptr_t> Reply) { Reply(nullptr); }
  void onIgnored(const Ignored &) {}

  void onOpen(const lsp::DidOpenTextDocumentParams &Params) {
    Document &Doc = Documents[Params.textDocument.uri.file().str()];
    Doc.Text = Params.textDocument.text;
    Doc.Version = Params.textDocument.version;
    analyze(Params.textDocument.uri);
  }
  void onChange(const lsp::DidChangeTextDocumentParams &Params) {
    auto Found = Documents.find(Params.textDocument.uri.file().str());
    if (Found == Documents.end() || llvm::failed(lsp::TextDocumentContentChangeEvent::applyTo(
                                        Params.contentChanges, Found->second.Text))) {
      return; // A change to a document never opened, or one that does not apply: ignored.
    }
    Found->second.Version = Params.textDocument.version;
    analyze(Params.textDocument.uri);
  }
  void onSave(const SaveParams &Params) {
    if (Documents.count(Params.textDocument.uri.file().str())) {
      analyze(Params.textDocument.uri);
    }
  }
  void onClose(const lsp::DidCloseTextDocumentParams &Params) {
    Documents.erase(Params.textDocument.uri.file().str());
    Publish(lsp::PublishDiagnosticsParams(Params.textDocument.uri, 0)); // clears them
  }

  /// Runs the rules over the document's text and publishes the findings.
  void analyze(const lsp::URIForFile &Uri) {
    Document &Doc = Documents[Uri.file().str()];
    lsp::PublishDiagnosticsParams Out(Uri, Doc.Version);
    std::string Why;
    Doc.Analysis = Analyze(Uri.file(), Doc.Text, Why);
    if (!Doc.Analysis) {
      // One diagnostic at the top says why there are no findings: never a silent "clean".
      lsp::Diagnostic Problem;
      Problem.range = lsp::Range(lsp::Position(0, 0));
      Problem.severity = lsp::DiagnosticSeverity::Information;
      Problem.source = "accel-rewrite";
      Problem.message = "accel-rewrite could not analyse this file: " +
                        llvm::StringRef(Why).take_front(2000).str();
      Out.diagnostics.push_back(std::move(Problem));
    } else {
      for (const RuleFinding &Found : Doc.Analysis->Findings) {
        Out.diagnostics.push_back(diagnostic(Found));
      }
    }
    Publish(Out);
  }

  static lsp::Diagnostic diagnostic(const RuleFinding &Found) {
    Region R = regionOf(Found);
    lsp::Diagnostic Diag;
    Diag.range = lsp::Range(position(R.StartLine, R.StartColumn), position(R.EndLine, R.EndColumn));
    Diag.severity = lsp::DiagnosticSeverity::Warning;
    Diag.source = "accel-rewrite";
    Diag.category = Found.Rule;
    Diag.message = Found.Message + " [" + Found.Rule + "]";
    return Diag;
  }

  void onCodeAction(const lsp::CodeActionParams &Params, lsp::Callback<Value> Reply) {
    auto Found = Documents.find(Params.textDocument.uri.file().str());
    llvm::json::Array Actions;
    if (Found == Documents.end() || !Found->second.Analysis) {
      return Reply(std::move(Actions));
    }
    const Document &Doc = Found->second;
    const std::string Uri = Params.textDocument.uri.uri().str();
    for (const RuleFinding &Finding : Doc.Analysis->Findings) {
      Region R = regionOf(Finding);
      if (Finding.Fix.empty() || int(R.EndLine) - 1 < Params.range.start.line ||
          int(R.StartLine) - 1 > Params.range.end.line) {
        continue;
      }
      lsp::CodeAction Action;
      Action.title = "accel: " + describeEdit(Finding.Fix.front(), Doc.Analysis->Original);
      Action.kind = lsp::CodeAction::kQuickFix.str();
      Action.diagnostics = std::vector<lsp::Diagnostic>{diagnostic(Finding)};
      lsp::WorkspaceEdit Edit;
      for (const FixEdit &Fix : Finding.Fix) {
        Edit.changes[Uri].push_back({lsp::Range(position(Fix.BeginLine, Fix.BeginColumn),
                                                position(Fix.EndLine, Fix.EndColumn)),
                                     Fix.Text});
      }
      Action.edit = std::move(Edit);
      Actions.push_back(lsp::toJSON(Action));
    }
    if (!Doc.Analysis->Replacements.empty()) {
      // Every edit at once, formatted: exactly what `accel-rewrite -i` writes.
      lsp::CodeAction All;
      All.title = "accel: apply all (as accel-rewrite -i)";
      All.kind = lsp::CodeAction::kQuickFix.str();
      lsp::WorkspaceEdit Edit;
      for (const clang::tooling::Replacement &R : Doc.Analysis->Replacements) {
        Edit.changes[Uri].push_back(
            {lsp::Range(positionOfOffset(Doc.Analysis->Original, R.getOffset()),
                        positionOfOffset(Doc.Analysis->Original, R.getOffset() + R.getLength())),
             R.getReplacementText().str()});
      }
      All.edit = std::move(Edit);
      Actions.push_back(lsp::toJSON(All));
    }
    Reply(std::move(Actions));
  }

  lsp::MessageHandler Handler;
  const DocumentAnalyzer &Analyze;
  lsp::OutgoingNotification<lsp::PublishDiagnosticsParams> Publish;
  std::map<std::string, Document> Documents;
};

} // namespace

void serveLsp(lsp::JSONTransport &Transport, const DocumentAnalyzer &Analyze) {
  Server TheServer(Transport, Analyze);
  // Returns when the client closes the connection (or says "exit" and then closes it).
  llvm::consumeError(Transport.run(TheServer.handler()));
}

} // namespace accel::tool
