//===- CheckReport.h - --check's findings in each output format -*- C++ -*-===//
//
// The lint mode reports what the rewrite would change (docs/ci.md): as clang-style text, as
// JSON, as SARIF 2.1.0 for code scanning, or as GitHub workflow annotations; --export-fixes
// writes clang-tidy's replacement YAML. Everything here formats; nothing parses or rewrites.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "RewriteFile.h"

#include "accel/rewrites/Rules.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace accel::tool {

enum class ReportFormat { Text, Json, Sarif, Github };

/// "text", "json", "sarif" or "github"; nullopt for anything else.
std::optional<ReportFormat> parseReportFormat(llvm::StringRef Name);

/// An input that could not be analysed (it does not parse, or is no LibTorch program), and why.
struct UnanalysedFile {
  std::string Path;
  std::string Reason;
};

/// One analysed input: its path as reported, its text and what the rules found in it.
struct CheckedFile {
  std::string Path;
  std::string Original;
  std::vector<RuleFinding> Findings;
  clang::tooling::Replacements Replacements; // the whole rewrite, for --export-fixes
};

/// Each finding clang-style: "file:line:col: warning: message [rule]", the source line with a
/// caret, then the fix as notes. With Parseable, the fix also as clang's
/// `fix-it:"file":{l:c-l:c}:"text"` lines.
void printText(llvm::raw_ostream &OS, const CheckedFile &File, bool Parseable);
/// GitHub Actions workflow commands: one `::warning file=...,line=...::message` per finding.
void printGithub(llvm::raw_ostream &OS, const CheckedFile &File);
/// Every finding of every file as one JSON document.
std::string jsonReport(llvm::ArrayRef<CheckedFile> Files);
/// A SARIF 2.1.0 log: the rules, and each finding with a region, its fix and a fingerprint
/// that survives edits elsewhere in the file. URIs are relative to SourceRoot where the
/// file is inside it. Inputs that could not be analysed make the run's invocation
/// unsuccessful, with an error notification each: code scanning must not read them as clean.
std::string sarifReport(llvm::ArrayRef<CheckedFile> Files,
                        llvm::ArrayRef<UnanalysedFile> Unanalysed,
                        llvm::ArrayRef<accel::rewrites::RuleInfo> Rules,
                        llvm::StringRef SourceRoot);
/// clang-tidy's --export-fixes YAML: a diagnostic per finding, carrying the replacements that
/// turn each file into what -i writes (so clang-apply-replacements gives -i's result).
std::string exportFixesYaml(llvm::ArrayRef<CheckedFile> Files);

} // namespace accel::tool
