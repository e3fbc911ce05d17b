//===- CheckReport.cpp - --check's findings in each output format ---------===//
#include "CheckReport.h"

#include "accel/build_info.h"

#include "clang/Tooling/DiagnosticsYaml.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/YAMLTraits.h"
#include "llvm/Support/xxhash.h"

#include <map>

namespace accel::tool {
namespace {

using accel::rewrites::describeEdit;
using accel::rewrites::Region;
using accel::rewrites::regionOf;
using llvm::json::Array;
using llvm::json::Object;

/// A JSON document as text, indented by two spaces.
std::string printJson(llvm::json::Value Document) {
  return llvm::formatv("{0:2}", Document).str() + "\n";
}

/// The text of a 1-based line, without its line break.
llvm::StringRef lineText(llvm::StringRef Text, unsigned Line) {
  for (unsigned Current = 1; Current < Line && !Text.empty(); ++Current) {
    Text = Text.split('\n').second;
  }
  return Text.split('\n').first.rtrim("\r");
}

/// The byte offset of a 1-based line and column.
unsigned offsetOf(llvm::StringRef Text, unsigned Line, unsigned Column) {
  size_t Offset = 0;
  for (unsigned Current = 1; Current < Line; ++Current) {
    size_t Break = Text.find('\n', Offset);
    if (Break == llvm::StringRef::npos) {
      return unsigned(Text.size());
    }
    Offset = Break + 1;
  }
  return unsigned(std::min(Text.size(), Offset + (Column > 0 ? Column - 1 : 0)));
}

Object regionJson(unsigned StartLine, unsigned StartColumn, unsigned EndLine, unsigned EndColumn) {
  return Object{{"startLine", StartLine},
                {"startColumn", StartColumn},
                {"endLine", EndLine},
                {"endColumn", EndColumn}};
}

/// GitHub's workflow-command escaping; properties also escape ':' and ','.
std::string escapeGithub(llvm::StringRef Text, bool Property) {
  std::string Out;
  for (char C : Text) {
    switch (C) {
    case '%':
      Out += "%25";
      break;
    case '\r':
      Out += "%0D";
      break;
    case '\n':
      Out += "%0A";
      break;
    case ':':
      Out += Property ? "%3A" : ":";
      break;
    case ',':
      Out += Property ? "%2C" : ",";
      break;
    default:
      Out += C;
    }
  }
  return Out;
}

/// "file:///abs/path/" for a directory, "file:///abs/path" for a file.
std::string fileUri(llvm::StringRef Path, bool Directory) {
  llvm::SmallString<256> Absolute(Path);
  llvm::sys::fs::make_absolute(Absolute);
  llvm::sys::path::remove_dots(Absolute, /*remove_dot_dot=*/true);
  std::string Uri = "file://";
  for (char C : Absolute) {
    if (llvm::isAlnum(C) || llvm::StringRef("/-._~").contains(C)) {
      Uri += C;
    } else {
      Uri += "%" + llvm::utohexstr(static_cast<unsigned char>(C), /*LowerCase=*/false, 2);
    }
  }
  if (Directory && !llvm::StringRef(Uri).ends_with("/")) {
    Uri += "/";
  }
  return Uri;
}

/// The artifact location of Path: relative to the source root (uriBaseId SRCROOT) when it is
/// inside it, else an absolute file URI.
Object artifactLocation(llvm::StringRef Path, llvm::StringRef SourceRoot) {
  std::string Uri = fileUri(Path, false), Root = fileUri(SourceRoot, true);
  if (llvm::StringRef(Uri).starts_with(Root)) {
    return Object{{"uri", Uri.substr(Root.size())}, {"uriBaseId", "SRCROOT"}};
  }
  return Object{{"uri", Uri}};
}

} // namespace

std::optional<ReportFormat> parseReportFormat(llvm::StringRef Name) {
  if (Name == "text") {
    return ReportFormat::Text;
  }
  if (Name == "json") {
    return ReportFormat::Json;
  }
  if (Name == "sarif") {
    return ReportFormat::Sarif;
  }
  if (Name == "github") {
    return ReportFormat::Github;
  }
  return std::nullopt;
}

void printText(llvm::raw_ostream &OS, const CheckedFile &File, bool Parseable) {
  for (const RuleFinding &Found : File.Findings) {
    OS << File.Path << ":" << Found.Line << ":" << Found.Column << ": warning: " << Found.Message
       << " [" << Found.Rule << "]\n";
    llvm::StringRef Source = lineText(File.Original, Found.Line);
    OS << Source << "\n";
    std::string Caret;
    for (unsigned I = 1; I < Found.Column && I <= Source.size(); ++I) {
      Caret += Source[I - 1] == '\t' ? '\t' : ' ';
    }
    OS << Caret << "^\n";
    for (const FixEdit &Edit : Found.Fix) {
      OS << File.Path << ":" << Edit.BeginLine << ":" << Edit.BeginColumn
         << ": note: fix: " << describeEdit(Edit, File.Original) << "\n";
      if (Parseable) {
        std::string Text;
        llvm::raw_string_ostream Escaped(Text);
        Escaped.write_escaped(Edit.Text);
        OS << "fix-it:\"" << File.Path << "\":{" << Edit.BeginLine << ":" << Edit.BeginColumn << "-"
           << Edit.EndLine << ":" << Edit.EndColumn << "}:\"" << Text << "\"\n";
      }
    }
  }
}

void printGithub(llvm::raw_ostream &OS, const CheckedFile &File) {
  for (const RuleFinding &Found : File.Findings) {
    Region R = regionOf(Found);
    std::string Message = Found.Message;
    for (const FixEdit &Edit : Found.Fix) {
      Message += "\nfix: " + describeEdit(Edit, File.Original);
    }
    OS << "::warning file=" << escapeGithub(File.Path, true) << ",line=" << R.StartLine
       << ",col=" << R.StartColumn << ",endLine=" << R.EndLine << ",endColumn=" << R.EndColumn
       << ",title=" << escapeGithub(Found.Rule, true) << "::" << escapeGithub(Message, false)
       << "\n";
  }
}

std::string jsonReport(llvm::ArrayRef<CheckedFile> Files) {
  Array Findings;
  for (const CheckedFile &File : Files) {
    for (const RuleFinding &Found : File.Findings) {
      Array Fix;
      for (const FixEdit &Edit : Found.Fix) {
        Fix.push_back(
            Object{{"offset", Edit.Offset},
                   {"length", Edit.Length},
                   {"text", Edit.Text},
                   {"start", Object{{"line", Edit.BeginLine}, {"column", Edit.BeginColumn}}},
                   {"end", Object{{"line", Edit.EndLine}, {"column", Edit.EndColumn}}}});
      }
      Findings.push_back(Object{{"file", File.Path},
                                {"line", Found.Line},
                                {"column", Found.Column},
                                {"rule", Found.Rule},
                                {"kind", Found.Rewrite ? "rewrite" : "manual"},
                                {"message", Found.Message},
                                {"fix", std::move(Fix)}});
    }
  }
  return printJson(Object{
      {"tool", "accel-rewrite"}, {"version", ACCEL_VERSION}, {"findings", std::move(Findings)}});
}

std::string sarifReport(llvm::ArrayRef<CheckedFile> Files,
                        llvm::ArrayRef<UnanalysedFile> Unanalysed,
                        llvm::ArrayRef<accel::rewrites::RuleInfo> Rules,
                        llvm::StringRef SourceRoot) {
  Array RuleList;
  std::map<std::string, size_t> RuleIndex;
  for (const accel::rewrites::RuleInfo &Rule : Rules) {
    RuleIndex[Rule.Name.str()] = RuleList.size();
    // "accel-data-loader" -> "AccelDataLoader", the PascalCase name SARIF viewers show.
    std::string Name;
    for (llvm::StringRef Part : llvm::split(Rule.Name, '-')) {
      if (!Part.empty()) {
        Name += char(llvm::toUpper(Part[0]));
        Name += Part.drop_front().str();
      }
    }
    std::string Page = "docs/rules/" + Rule.Name.str() + ".md";
    RuleList.push_back(Object{
        {"id", Rule.Name.str()},
        {"name", Name},
        {"shortDescription", Object{{"text", Rule.Description.str()}}},
        {"fullDescription",
         Object{{"text", Rule.Description.str() + ": part of the edits accel-rewrite makes so "
                                                  "that a LibTorch training program runs "
                                                  "data-parallel."}}},
        {"help",
         Object{{"text", "Run accel-rewrite -i on the file to apply the fix, or make the edit the "
                         "finding describes. The rule is documented in " +
                             Page + "."},
                {"markdown", "Run `accel-rewrite -i` on the file to apply the fix, or make the "
                             "edit the finding describes. See [" +
                                 Rule.Name.str() + "](" + Page + ")."}}},
        {"defaultConfiguration", Object{{"level", "warning"}}}});
  }

  Array Results;
  for (const CheckedFile &File : Files) {
    std::map<uint64_t, unsigned> Seen; // same rule on an identical line: told apart by count
    for (const RuleFinding &Found : File.Findings) {
      Region R = regionOf(Found);
      Object Result{
          {"ruleId", Found.Rule},
          {"level", "warning"},
          {"message", Object{{"text", Found.Message}}},
          {"locations",
           Array{Object{{"physicalLocation",
                         Object{{"artifactLocation", artifactLocation(File.Path, SourceRoot)},
                                {"region", regionJson(R.StartLine, R.StartColumn, R.EndLine,
                                                      R.EndColumn)}}}}}}};
      if (auto Index = RuleIndex.find(Found.Rule); Index != RuleIndex.end()) {
        Result["ruleIndex"] = Index->second;
      }
      // The line's text, not its number: the fingerprint survives edits above it.
      uint64_t Hash =
          llvm::xxh3_64bits(Found.Rule + "\n" + lineText(File.Original, Found.Line).trim().str());
      Result["partialFingerprints"] = Object{
          {"primaryLocationLineHash", llvm::utohexstr(Hash) + ":" + std::to_string(++Seen[Hash])}};
      if (!Found.Fix.empty()) {
        Array Replacements;
        std::string Description;
        for (const FixEdit &Edit : Found.Fix) {
          Replacements.push_back(
              Object{{"deletedRegion",
                      regionJson(Edit.BeginLine, Edit.BeginColumn, Edit.EndLine, Edit.EndColumn)},
                     {"insertedContent", Object{{"text", Edit.Text}}}});
          Description += (Description.empty() ? "" : "; ") + describeEdit(Edit, File.Original);
        }
        Result["fixes"] = Array{
            Object{{"description", Object{{"text", Description}}},
                   {"artifactChanges",
                    Array{Object{{"artifactLocation", artifactLocation(File.Path, SourceRoot)},
                                 {"replacements", std::move(Replacements)}}}}}};
      }
      Results.push_back(std::move(Result));
    }
  }

  Array Notifications;
  for (const UnanalysedFile &File : Unanalysed) {
    Notifications.push_back(Object{
        {"level", "error"},
        {"message", Object{{"text", "accel-rewrite could not analyse this file: " + File.Reason}}},
        {"locations",
         Array{Object{{"physicalLocation",
                       Object{{"artifactLocation", artifactLocation(File.Path, SourceRoot)}}}}}}});
  }
  Object Invocation{{"executionSuccessful", Unanalysed.empty()}};
  if (!Notifications.empty()) {
    Invocation["toolExecutionNotifications"] = std::move(Notifications);
  }

  Object Driver{{"name", "accel-rewrite"},
                {"semanticVersion", ACCEL_VERSION},
                {"rules", std::move(RuleList)}};
  return printJson(Object{
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", Array{Object{{"tool", Object{{"driver", std::move(Driver)}}},
                            {"invocations", Array{std::move(Invocation)}},
                            {"originalUriBaseIds",
                             Object{{"SRCROOT", Object{{"uri", fileUri(SourceRoot, true)}}}}},
                            {"results", std::move(Results)}}}}});
}

std::string exportFixesYaml(llvm::ArrayRef<CheckedFile> Files) {
  clang::tooling::TranslationUnitDiagnostics Document;
  for (const CheckedFile &File : Files) {
    // Absolute, as clang-tidy writes them: clang-apply-replacements may run elsewhere.
    llvm::SmallString<256> Path(File.Path);
    llvm::sys::fs::make_absolute(Path);
    if (Document.MainSourceFile.empty()) {
      Document.MainSourceFile = Path.str().str();
    }
    size_t FirstDiagnostic = Document.Diagnostics.size();
    for (const RuleFinding &Found : File.Findings) {
      clang::tooling::DiagnosticMessage Message(Found.Message);
      Message.FilePath = Path.str().str();
      Message.FileOffset = offsetOf(File.Original, Found.Line, Found.Column);
      Document.Diagnostics.emplace_back(Found.Rule, Message,
                                        llvm::SmallVector<clang::tooling::DiagnosticMessage, 1>(),
                                        clang::tooling::Diagnostic::Warning, "");
    }
    // Each replacement of the whole rewrite goes with the first rewrite finding whose own
    // edit it touches (else with the file's first finding), so that applying every fix
    // gives exactly -i's result, formatting included.
    for (const clang::tooling::Replacement &R : File.Replacements) {
      size_t Owner = FirstDiagnostic;
      for (size_t I = 0; I < File.Findings.size(); ++I) {
        bool Touches = llvm::any_of(File.Findings[I].Fix, [&](const FixEdit &Edit) {
          return Edit.Offset <= R.getOffset() + R.getLength() &&
                 R.getOffset() <= Edit.Offset + Edit.Length;
        });
        if (Touches) {
          Owner = FirstDiagnostic + I;
          break;
        }
      }
      if (Owner >= Document.Diagnostics.size()) {
        break; // No finding to carry it: nothing was reported for this file.
      }
      clang::tooling::Replacement Named(Path, R.getOffset(), R.getLength(), R.getReplacementText());
      llvm::consumeError(Document.Diagnostics[Owner].Message.Fix[Path].add(Named));
    }
  }
  std::string Text;
  llvm::raw_string_ostream OS(Text);
  llvm::yaml::Output Yaml(OS);
  Yaml << Document;
  return Text;
}

} // namespace accel::tool
