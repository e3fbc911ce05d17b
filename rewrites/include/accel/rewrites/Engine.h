//===- Engine.h - Running the rules over one file ---------------*- C++ -*-===//
//
// How the selected rules run over one translation unit, whoever parsed it: a RuleRunner
// registers the rules' matchers, turns each match into a finding and into edits of the main
// file (never inside a macro expansion), applies the gating (accel-include and
// accel-accelerator only next to another rule's edit), merges the edits and applies them to
// the file's text. The command line, --check, the language server and the clang-tidy plugin
// are thin front ends over this header: one behaviour everywhere. See docs/design.md,
// "Layers".
//
//===----------------------------------------------------------------------===//
#pragma once

#include "accel/rewrites/Rules.h"

#include "clang/AST/ASTConsumer.h"
#include "clang/ASTMatchers/ASTMatchFinder.h"
#include "clang/Basic/SourceManager.h"
#include "clang/Tooling/Core/Replacement.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace accel::rewrites {

/// One replacement of the original text: Length bytes at Offset become Text. Lines and
/// columns (1-based; the end is exclusive) locate it for reports.
struct FixEdit {
  unsigned Offset = 0, Length = 0;
  std::string Text;
  unsigned BeginLine = 0, BeginColumn = 0, EndLine = 0, EndColumn = 0;
};

/// One place a rule reports: an edit it makes (Rewrite) or a change it leaves to the user.
struct RuleFinding {
  std::string Rule; // "accel-backward"
  bool Rewrite = true;
  std::string File;
  unsigned Line = 0, Column = 0; // 1-based; 0 when the rule had no location
  std::string Message;
  std::vector<FixEdit> Fix; // a rewrite's own edits, before formatting; empty for warnings
  /// Where the finding points, in the file (valid while the AST that produced it lives).
  clang::SourceLocation Loc;
};

/// One edit of the main file, as a rule made it (RuleIndex orders insertions at one place).
struct TextEdit {
  unsigned Offset = 0;
  unsigned Length = 0;
  std::string Text;
  size_t RuleIndex = 0;
  bool operator<(const TextEdit &Other) const {
    return std::tie(Offset, Length, RuleIndex, Text) <
           std::tie(Other.Offset, Other.Length, Other.RuleIndex, Other.Text);
  }
};

/// What the rules found in one main file, gated and merged.
struct FileFindings {
  /// Every finding in file order: the rewrites (those of rules that only edit next to other
  /// rules' edits only when there are such) and the warnings.
  std::vector<RuleFinding> Findings;
  /// The edits of those findings, merged (not formatted).
  clang::tooling::Replacements Edits;
  /// The engine's own warnings (two rules editing the same text in ways that do not combine:
  /// then there are no edits, and Declined is set), which are no rule's finding, as
  /// "file:line: warning: ...".
  std::vector<std::string> ToolWarnings;
  /// A training loop was declined (Finding::Decline): it and what goes with it stay as
  /// written, and a warning says why. Front ends report it (accel-rewrite exits with
  /// ExitDeclined).
  bool Declined = false;
};

/// Runs a selection of rules over one translation unit at a time.
class RuleRunner {
public:
  explicit RuleRunner(llvm::ArrayRef<RuleInfo> Rules);
  ~RuleRunner();
  RuleRunner(const RuleRunner &) = delete;
  RuleRunner &operator=(const RuleRunner &) = delete;

  /// The selected rules, in order.
  llvm::ArrayRef<RuleInfo> rules() const { return Rules; }

  /// Registers rule RuleIndex's matchers with Finder, reporting to Callback (a front end that
  /// owns the matching, as clang-tidy does, calls collect() from it).
  void registerMatchers(size_t RuleIndex, clang::ast_matchers::MatchFinder &Finder,
                        clang::ast_matchers::MatchFinder::MatchCallback *Callback) const;
  /// Evaluates a match of rule RuleIndex: its finding, its edits of the main file, or a
  /// warning in their place (inside a macro expansion, a rule's internal error).
  void collect(size_t RuleIndex, const clang::ast_matchers::MatchFinder::MatchResult &Match);

  /// Runs every rule over the main file's top-level declarations (with their template
  /// instantiations) and the translation unit itself (accel-include matches it), as clangd
  /// does: headers are no rule's business, and walking them would read a whole precompiled
  /// preamble back.
  void match(clang::ASTContext &Ctx, llvm::ArrayRef<clang::Decl *> MainFileDecls);
  /// An AST consumer that collects the main file's top-level declarations as they are parsed
  /// and runs match() at the end of the translation unit.
  std::unique_ptr<clang::ASTConsumer> makeConsumer(const clang::SourceManager &SM);

  /// The findings and merged edits of what was collected, for the file named FileName.
  FileFindings finish(llvm::StringRef FileName) const;
  /// Forgets what was collected and the analyses of the unit (the next one starts).
  void reset();
  /// For a front end that runs the matchers itself (clang-tidy): from here until
  /// endTranslationUnit(), the rules' matchers on this thread see this runner's analyses.
  void beginTranslationUnit();
  void endTranslationUnit();

private:
  class Callback;
  struct Collected {
    std::set<TextEdit> Edits;
    /// Keyed by position, rule and message: a node matched twice is reported once.
    std::map<std::tuple<unsigned, unsigned, std::string, std::string>, RuleFinding> Findings;
  };
  void record(RuleFinding Found, size_t RuleIndex);
  void warn(size_t RuleIndex, const clang::SourceManager &SM, clang::SourceLocation Loc,
            const std::string &Message);

  std::vector<RuleInfo> Rules;
  std::vector<Rule> Built;
  std::vector<std::unique_ptr<Callback>> Callbacks;
  clang::ast_matchers::MatchFinder Finder;
  Collected Primary, Companions;
  /// What the rules know about the current translation unit (analysis/AnalysisContext.h),
  /// installed while matches are evaluated; dropped by reset().
  class Analyses;
  std::unique_ptr<Analyses> UnitAnalyses;
  /// A rule declined a training loop of the current file: no edit in DeclinedRanges (the
  /// main file's offsets, from analysis/TrainingPlan.h) applies.
  bool Declined = false;
  std::vector<std::pair<unsigned, unsigned>> DeclinedRanges;
  /// The main-file offsets of warnings that only apply where code is rewritten
  /// (Finding::OnlyWhereRewritten), keyed as Collected::Findings.
  std::map<std::tuple<unsigned, unsigned, std::string, std::string>, unsigned> OnlyWhereRewritten;
  /// The main file's text, which the edits are offsets of (taken at the first match).
  std::string MainFileCode;
};

/// Merges the edits of the file whose text is Code: duplicates (the same edit found twice)
/// once, two insertions at one place in rule order, an insertion and a replacement at one
/// place both, and an edit inside a replacement whose text keeps the code it edits as written
/// (accel-backward's `accelerator.backward(<the loss>)` around a cut that accel-data-loader
/// wraps) applied to that text. Edits that overlap otherwise are a conflict: nullopt, with a
/// warning in Warnings, and the file stays as written (a half-applied rewrite is worse).
std::optional<clang::tooling::Replacements> mergeEdits(const std::set<TextEdit> &Edits,
                                                       llvm::StringRef FileName,
                                                       llvm::StringRef Code,
                                                       std::vector<std::string> &Warnings);

/// Code with Edits applied in the file's own layout: lines no edit touches stay byte for byte,
/// lines an edit inserts take the indentation of their neighbours (and the file's unit: tabs,
/// 2 or 4 spaces), and the file's .clang-format (LLVM style when there is none) shapes only
/// the text the edits wrote. Composed receives the edits as applied (what --export-fixes
/// writes).
std::string applyEdits(llvm::StringRef FileName, llvm::StringRef Code,
                       const clang::tooling::Replacements &Edits,
                       clang::tooling::Replacements &Composed);

/// Where a finding points (1-based, end exclusive): its location, widened to the extent of
/// its own edit that starts there.
struct Region {
  unsigned StartLine, StartColumn, EndLine, EndColumn;
};
Region regionOf(const RuleFinding &Found);
/// How an edit reads to a person: "insert '...'", "remove '...'" or "replace '...' with '...'".
std::string describeEdit(const FixEdit &Edit, llvm::StringRef Original);
/// "file:line:col: warning: message [accel-rule]", as clang prints a warning.
std::string warningLine(const RuleFinding &Found);

} // namespace accel::rewrites
