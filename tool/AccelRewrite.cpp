//===- AccelRewrite.cpp - The accel-rewrite command line --------*- C++ -*-===//
//
//   accel-rewrite [options] FILE... [-- COMPILER FLAGS]
//
// Parses each input with clang against the real LibTorch headers and writes it back
// rewritten by the selected rules (docs/accel-rewrite.md). Exit codes: ExitCodes.h.
//
//===----------------------------------------------------------------------===//
#include "CheckReport.h"
#include "CompileFlags.h"
#include "ExitCodes.h"
#include "HeapSetup.h"
#ifdef ACCEL_HAVE_LSP
#include "LspServer.h"
#endif
#include "OutputFile.h"
#include "ResourceDir.h"
#include "RewriteFile.h"
#include "UnifiedDiff.h"

#include "accel/build_info.h"
#include "accel/rewrites/Rules.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

using namespace accel::tool;
using namespace llvm;

namespace {

/// The command line. Options are members, not globals, so that they exist only while main
/// runs; llvm::cl registers them on construction.
struct Options {
  cl::OptionCategory Category{"accel-rewrite options"};
  cl::list<std::string> Inputs{cl::Positional, cl::desc("<source files> [-- <compiler flags>]"),
                               cl::cat(Category)};
  cl::opt<std::string> OutputPath{"o", cl::desc("Write the rewritten file to <file>"),
                                  cl::value_desc("file"), cl::cat(Category)};
  cl::opt<bool> InPlace{"i", cl::desc("Rewrite the input files in place"), cl::cat(Category)};
  cl::opt<bool> ShowDiff{"diff", cl::desc("Print the changes as a unified diff"),
                         cl::cat(Category)};
  cl::opt<std::string> BuildDir{"p", cl::desc("Build directory with compile_commands.json"),
                                cl::value_desc("build-dir"), cl::cat(Category)};
  cl::opt<std::string> RuleSpec{
      "rules", cl::desc("Rules to apply: 'a,b' only these, '-a' all but this (default: all)"),
      cl::value_desc("list"), cl::cat(Category)};
  cl::opt<bool> ListRules{"list-rules", cl::desc("List the rules and exit"), cl::cat(Category)};
  cl::opt<std::string> ResourceDir{"resource-dir",
                                   cl::desc("Clang's resource directory, with include/stddef.h"),
                                   cl::value_desc("dir"), cl::cat(Category)};
  cl::opt<bool> PrintResourceDir{"print-resource-dir",
                                 cl::desc("Print the resource directory used and exit"),
                                 cl::cat(Category)};
  // The lint mode (docs/ci.md).
  cl::opt<bool> Check{"check", cl::desc("Report what the rewrite would change; exit 1 on findings"),
                      cl::cat(Category)};
  cl::opt<std::string> Format{"format", cl::desc("--check output: text, json, sarif or github"),
                              cl::value_desc("format"), cl::init("text"), cl::cat(Category)};
  cl::opt<std::string> SourceRoot{
      "source-root", cl::desc("SARIF URIs are relative to <dir> (default: the current directory)"),
      cl::value_desc("dir"), cl::cat(Category)};
  cl::opt<std::string> ExportFixes{
      "export-fixes", cl::desc("With --check: write the fixes as clang-tidy's YAML to <file>"),
      cl::value_desc("file"), cl::cat(Category)};
  cl::opt<std::string> FixitFormat{"fixit-format",
                                   cl::desc("With --check: 'parseable' adds clang's fix-it: lines"),
                                   cl::value_desc("format"), cl::cat(Category)};
  cl::opt<bool> Lsp{"lsp", cl::desc("Serve the Language Server Protocol on stdin/stdout"),
                    cl::cat(Category)};
  cl::opt<unsigned> Jobs{"j",
                         cl::desc("Analyse <n> files at once (default: the number of cores)"),
                         cl::value_desc("n"),
                         cl::init(0),
                         cl::Prefix,
                         cl::cat(Category)};
  // The preamble cache (docs/accel-rewrite.md, "Speed").
  cl::opt<std::string> CacheDir{
      "cache-dir",
      cl::desc("Keep precompiled preambles in <dir> (default: $XDG_CACHE_HOME/accel/preambles)"),
      cl::value_desc("dir"), cl::cat(Category)};
  cl::opt<bool> NoCache{"no-cache", cl::desc("Parse every header each time; use no cache"),
                        cl::cat(Category)};
  cl::opt<uint64_t> CacheSize{
      "cache-size",
      cl::desc("Keep at most <MB> megabytes of preambles in the cache directory; the least "
               "recently used go first (default: 2048)"),
      cl::value_desc("MB"), cl::init(PreambleCache::DefaultSizeLimit >> 20), cl::cat(Category)};
  cl::opt<bool> Verbose{
      "v",
      cl::desc("Say where each file's precompiled preamble came from, and how malloc is set up"),
      cl::cat(Category)};
};

} // namespace

static void printVersion(raw_ostream &OS) {
  OS << "accel-rewrite " ACCEL_VERSION "\n"
     << "LLVM " ACCEL_LLVM_VERSION "\n"
     << "LibTorch " ACCEL_TORCH_VERSION "\n";
}

/// --cache-dir made absolute, else the default; empty when there is none.
static std::string cacheDirectory(const Options &Opts) {
  if (Opts.CacheDir.empty()) {
    return PreambleCache::defaultDirectory();
  }
  SmallString<256> Dir(Opts.CacheDir.getValue());
  sys::fs::make_absolute(Dir);
  return std::string(Dir);
}

/// --cache-size in bytes (a size past what 64 bits hold means no limit).
static uint64_t cacheSizeLimit(const Options &Opts) {
  return std::min<uint64_t>(Opts.CacheSize, UINT64_MAX >> 20) << 20;
}

static int fail(ExitCode Code, const Twine &Message) {
  WithColor::error(errs(), "accel-rewrite") << Message << "\n";
  return Code;
}

// Command-line combinations that cannot work, checked before any parsing starts.
static std::optional<std::string> usageProblem(const Options &Opts) {
  if (Opts.Check) {
    if (Opts.InPlace || Opts.ShowDiff || !Opts.OutputPath.empty()) {
      return "--check reports and writes nothing; it excludes -o, -i and --diff";
    }
    if (!parseReportFormat(Opts.Format)) {
      return "--format=" + Opts.Format + ": unknown format (text, json, sarif or github)";
    }
    if (!Opts.FixitFormat.empty() && Opts.FixitFormat != "parseable") {
      return "--fixit-format=" + Opts.FixitFormat + ": the only format is 'parseable'";
    }
    if (Opts.Inputs.empty() && Opts.BuildDir.empty()) {
      return "no input files; --check without files needs -p BUILD_DIR (then it checks every "
             "file of its compile_commands.json)";
    }
    return std::nullopt;
  }
  if (Opts.Format.getNumOccurrences() || !Opts.ExportFixes.empty() || !Opts.FixitFormat.empty() ||
      !Opts.SourceRoot.empty()) {
    return "--format, --export-fixes, --fixit-format and --source-root go with --check";
  }
  if (Opts.Inputs.empty()) {
    return "no input files; usage: accel-rewrite [options] FILE... [-- COMPILER FLAGS]";
  }
  if (int(Opts.InPlace) + int(Opts.ShowDiff) + int(!Opts.OutputPath.empty()) > 1) {
    return "-o, -i and --diff exclude each other";
  }
  if (!Opts.OutputPath.empty() && Opts.Inputs.size() > 1) {
    return "-o takes one input file; use -i or --diff for several";
  }
  if (Opts.OutputPath.empty() && !Opts.InPlace && !Opts.ShowDiff && Opts.Inputs.size() > 1) {
    return "several input files need -i or --diff";
  }
  // Writing over the input would lose the original if the rewrite went wrong.
  if (!Opts.OutputPath.empty() && sys::fs::exists(Opts.OutputPath) &&
      sys::fs::equivalent(Opts.Inputs[0], Opts.OutputPath)) {
    return "-o " + Opts.OutputPath + " names the input file; use -i to rewrite it in place";
  }
  return std::nullopt;
}

// Sends one rewritten file where the options say; false if writing failed.
static bool emit(const Options &Opts, StringRef File, const FileRewrite &Result) {
  if (Opts.ShowDiff) {
    outs() << unifiedDiff(File, File, Result.Original, Result.Rewritten);
    return true;
  }
  Error Written = Error::success();
  if (!Opts.OutputPath.empty()) {
    Written = writeFileAtomically(Opts.OutputPath, Result.Rewritten);
  } else if (Opts.InPlace && Result.Rewritten != Result.Original) {
    // Only changed files are written, so unchanged ones keep their time stamp.
    Written = writeFileAtomically(File, Result.Rewritten);
  } else if (!Opts.InPlace) {
    outs() << Result.Rewritten;
  }
  if (!Written) {
    return true;
  }
  fail(ExitIOError, "cannot write output: " + toString(std::move(Written)));
  return false;
}

namespace {
/// What analysing one input gave: clang's diagnostics, a failure, or the rewrite.
struct Outcome {
  std::string ClangOutput;
  int Code = ExitSuccess;
  std::string Error;
  std::optional<FileRewrite> Result;
};
} // namespace

static Outcome analyze(const std::string &Input,
                       const clang::tooling::CompilationDatabase &Compilations,
                       StringRef ResourceDir, ArrayRef<accel::rewrites::RuleInfo> Rules,
                       StringRef BuildDir, PreambleCache *Preambles) {
  Outcome Out;
  auto Fail = [&](ExitCode Code, const Twine &Message) {
    Out.Code = Code;
    Out.Error = Message.str();
    return Out;
  };
  SmallString<256> File(Input);
  if (std::error_code EC = sys::fs::make_absolute(File)) {
    return Fail(ExitIOError, "cannot read " + Input + ": " + EC.message());
  }
  if (!sys::fs::is_regular_file(File)) {
    return Fail(ExitIOError, "cannot read " + Input + ": " +
                                 (sys::fs::exists(File) ? "not a regular file" : "no such file"));
  }
  if (Compilations.getCompileCommands(File).empty()) {
    return Fail(ExitUsage,
                "no compile command for " + Input + " in " + BuildDir + "/compile_commands.json");
  }
  // Not worth a parse: clang would print pages of noise for a binary file.
  ErrorOr<std::unique_ptr<MemoryBuffer>> Text = MemoryBuffer::getFile(File);
  if (!Text) {
    return Fail(ExitIOError, "cannot read " + Input + ": " + Text.getError().message());
  }
  if ((*Text)->getBuffer().trim().empty()) {
    return Fail(ExitNotLibTorch, Input + " is empty; nothing to rewrite");
  }
  if ((*Text)->getBuffer().contains('\0')) {
    return Fail(ExitNotLibTorch,
                Input + " is not a source file (it holds NUL bytes); nothing written for it");
  }
  Out.Result = rewriteFile(Compilations, File, ResourceDir, Rules, Out.ClangOutput, Preambles);
  if (!Out.Result) {
    return Fail(ExitParseError, Input + " has compile errors; nothing written for it");
  }
  if (!Out.Result->UsesLibTorch) {
    Out.Result.reset();
    return Fail(ExitNotLibTorch, Input + " is not a LibTorch program (it includes none of "
                                         "LibTorch's headers, such as <torch/torch.h>); "
                                         "nothing written for it");
  }
  return Out;
}

/// Analyses every input, Jobs at a time (0: one per core), showing progress on a terminal.
static std::vector<Outcome> analyzeAll(const std::vector<std::string> &Inputs,
                                       const clang::tooling::CompilationDatabase &Compilations,
                                       StringRef ResourceDir,
                                       ArrayRef<accel::rewrites::RuleInfo> Rules,
                                       StringRef BuildDir, unsigned Jobs, PreambleCache *Preambles,
                                       bool Verbose) {
  std::vector<Outcome> Outcomes(Inputs.size());
  const bool Progress = Inputs.size() > 1 && sys::Process::StandardErrIsDisplayed();
  std::mutex Lock;
  size_t Done = 0;
  auto Run = [&](size_t I) {
    Outcomes[I] = analyze(Inputs[I], Compilations, ResourceDir, Rules, BuildDir, Preambles);
    std::lock_guard<std::mutex> Guard(Lock);
    ++Done;
    if (Verbose && Outcomes[I].Result) {
      errs() << "accel-rewrite: " << Inputs[I] << ": " << Outcomes[I].Result->PreambleNote << "\n";
    }
    if (Progress) {
      errs() << "\r\x1b[K[" << Done << "/" << Inputs.size() << "] " << Inputs[I];
      if (Done == Inputs.size()) {
        errs() << "\r\x1b[K";
      }
    }
  };
  ThreadPoolStrategy Strategy = hardware_concurrency(Jobs);
  if (Strategy.compute_thread_count() <= 1 || Inputs.size() <= 1) {
    for (size_t I = 0; I < Inputs.size(); ++I) {
      Run(I);
    }
    return Outcomes;
  }
  DefaultThreadPool Pool(Strategy);
  for (size_t I = 0; I < Inputs.size(); ++I) {
    Pool.async([&Run, I] { Run(I); });
  }
  Pool.wait();
  return Outcomes;
}

/// Prints what analysing an input said before its result: clang's diagnostics, then the
/// failure. Returns the failure's exit code.
static int printProblems(const Outcome &Out) {
  errs() << Out.ClangOutput;
  return Out.Code == ExitSuccess ? ExitSuccess : fail(ExitCode(Out.Code), Out.Error);
}

// The rewrite modes: each input's result written where the options say, in input order.
static int writeResults(const Options &Opts, const std::vector<std::string> &Inputs,
                        std::vector<Outcome> &Outcomes) {
  int Status = ExitSuccess; // The first failure decides; the other inputs still count.
  bool Declined = false;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    int Code = printProblems(Outcomes[I]);
    if (Code != ExitSuccess) {
      Status = Status == ExitSuccess ? Code : Status;
      continue;
    }
    for (const std::string &Warning : Outcomes[I].Result->Warnings) {
      errs() << Warning << "\n";
    }
    if (!emit(Opts, Inputs[I], *Outcomes[I].Result) && Status == ExitSuccess) {
      Status = ExitIOError;
    }
    Declined = Declined || Outcomes[I].Result->Declined;
  }
  // A failure says more than a declined loop, whose output was written.
  return Status == ExitSuccess && Declined ? ExitDeclined : Status;
}

// The lint mode: the findings in the chosen format on stdout, a summary on stderr; exit 0
// when clean, 1 on findings, 2 when an input could not be analysed.
static int report(const Options &Opts, const std::vector<std::string> &Inputs,
                  std::vector<Outcome> &Outcomes, ArrayRef<accel::rewrites::RuleInfo> Rules,
                  std::chrono::steady_clock::time_point Start) {
  std::vector<CheckedFile> Checked;
  std::vector<UnanalysedFile> Unanalysed;
  size_t Errors = 0;
  bool ExportFailed = false;
  std::map<std::string, size_t> PerRule;
  std::map<PreambleSource, size_t> Preambles;
  for (size_t I = 0; I < Inputs.size(); ++I) {
    if (printProblems(Outcomes[I]) != ExitSuccess) {
      ++Errors;
      // Why: our message, with clang's first line when it has one.
      StringRef ClangSaid = StringRef(Outcomes[I].ClangOutput).split('\n').first;
      Unanalysed.push_back(
          {Inputs[I],
           Outcomes[I].Error + (ClangSaid.empty() ? std::string() : " (" + ClangSaid.str() + ")")});
      continue;
    }
    FileRewrite &Result = *Outcomes[I].Result;
    ++Preambles[Result.PreambleOrigin];
    for (const std::string &Warning : Result.ToolWarnings) {
      errs() << Warning << "\n";
    }
    for (const RuleFinding &Found : Result.Findings) {
      ++PerRule[Found.Rule];
    }
    Checked.push_back({Inputs[I], std::move(Result.Original), std::move(Result.Findings),
                       std::move(Result.Replacements)});
  }
  switch (*parseReportFormat(Opts.Format)) {
  case ReportFormat::Text:
    for (const CheckedFile &File : Checked) {
      printText(outs(), File, Opts.FixitFormat == "parseable");
    }
    break;
  case ReportFormat::Github:
    for (const CheckedFile &File : Checked) {
      printGithub(outs(), File);
    }
    break;
  case ReportFormat::Json:
    outs() << jsonReport(Checked);
    break;
  case ReportFormat::Sarif: {
    SmallString<256> Root(Opts.SourceRoot.empty() ? "." : Opts.SourceRoot.getValue());
    sys::fs::make_absolute(Root);
    outs() << sarifReport(Checked, Unanalysed, Rules, Root);
    break;
  }
  }
  outs().flush();
  if (!Opts.ExportFixes.empty()) {
    if (Error Written = writeFileAtomically(Opts.ExportFixes, exportFixesYaml(Checked))) {
      fail(ExitIOError, "cannot write --export-fixes: " + toString(std::move(Written)));
      ExportFailed = true;
    }
  }

  size_t Findings = 0;
  std::string PerRuleText;
  for (const auto &[Rule, Count] : PerRule) {
    Findings += Count;
    PerRuleText += (PerRuleText.empty() ? " (" : ", ") + Rule + " " + std::to_string(Count);
  }
  const double Seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start).count();
  errs() << "accel-rewrite --check: " << Inputs.size()
         << (Inputs.size() == 1 ? " file, " : " files, ") << Findings
         << (Findings == 1 ? " finding" : " findings")
         << (PerRuleText.empty() ? "" : PerRuleText + ")");
  if (Errors) {
    errs() << ", " << Errors << (Errors == 1 ? " file not analysed" : " files not analysed");
  }
  errs() << format(", %.1f s", Seconds);
  if (size_t Built = Preambles[PreambleSource::Built],
      Reused = Preambles[PreambleSource::Disk] + Preambles[PreambleSource::Memory];
      Built || Reused) {
    errs() << " (preamble cache: " << Built << " built, " << Reused << " reused)";
  }
  errs() << "\n";
  return Errors || ExportFailed ? ExitCheckError : Findings ? ExitCheckFindings : ExitSuccess;
}

int main(int argc, const char **argv) {
  const std::string Heap = accel::tool::setUpHeapForParsing();
  InitLLVM Init(argc, argv);
  // Everything after "--" is compiler flags; this cuts them off argv before cl sees them.
  std::string DashDashError;
  std::unique_ptr<clang::tooling::CompilationDatabase> AfterDashDash =
      clang::tooling::FixedCompilationDatabase::loadFromCommandLine(argc, argv, DashDashError);
  if (!DashDashError.empty()) {
    return fail(ExitUsage, "bad compiler flags after --: " + DashDashError);
  }

  Options Opts;
  cl::HideUnrelatedOptions(Opts.Category);
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(argc, argv,
                              "accel-rewrite: make a LibTorch training program data-parallel\n");

  if (Opts.ListRules) {
    for (const accel::rewrites::RuleInfo &Rule : accel::rewrites::allRules()) {
      outs() << Rule.Name << "  " << Rule.Description << "\n";
    }
    return ExitSuccess;
  }
  // Checked before parsing anything so that a typo costs no time.
  Expected<std::vector<accel::rewrites::RuleInfo>> Selected =
      accel::rewrites::selectRules(Opts.RuleSpec, accel::rewrites::allRules());
  if (!Selected) {
    return fail(Opts.Check ? ExitCheckError : ExitUsage,
                "--rules=" + Opts.RuleSpec + ": " + toString(Selected.takeError()));
  }

  static int AnchorInThisExecutable;
  if (Opts.Lsp) {
#ifdef ACCEL_HAVE_LSP
    Expected<std::string> ResourceDir =
        findResourceDir(Opts.ResourceDir, argv[0], &AnchorInThisExecutable);
    if (!ResourceDir) {
      return fail(ExitNoResourceDir, toString(ResourceDir.takeError()));
    }
    // The server keeps preambles in memory between edits; --no-cache only keeps them off
    // the disk.
    PreambleCache Preambles(Opts.NoCache ? std::string() : cacheDirectory(Opts),
                            cacheSizeLimit(Opts));
    return runLspServer({*ResourceDir, *Selected, Opts.BuildDir, &Preambles});
#else
    return fail(ExitUsage, "--lsp needs accel-rewrite built with LLVM 22 or later "
                           "(LLVMSupportLSP)");
#endif
  }
  Expected<std::string> ResourceDir =
      findResourceDir(Opts.ResourceDir, argv[0], &AnchorInThisExecutable);
  if (!Opts.PrintResourceDir) {
    if (std::optional<std::string> Problem = usageProblem(Opts)) {
      return fail(Opts.Check ? ExitCheckError : ExitUsage, *Problem);
    }
  }
  if (!ResourceDir) {
    return fail(Opts.Check ? ExitCheckError : ExitNoResourceDir, toString(ResourceDir.takeError()));
  }
  if (Opts.PrintResourceDir) {
    outs() << *ResourceDir << "\n";
    return ExitSuccess;
  }

  Expected<std::unique_ptr<clang::tooling::CompilationDatabase>> Compilations =
      selectCompilations(std::move(AfterDashDash), Opts.BuildDir);
  if (!Compilations) {
    return fail(Opts.Check ? ExitCheckError : ExitUsage, toString(Compilations.takeError()));
  }

  std::vector<std::string> Inputs(Opts.Inputs.begin(), Opts.Inputs.end());
  if (Inputs.empty()) { // --check -p DIR: every file of the compile database.
    Inputs = (*Compilations)->getAllFiles();
  }
  const auto Start = std::chrono::steady_clock::now();
  if (Opts.Verbose) {
    errs() << "accel-rewrite: " << Heap << "\n";
  }
  std::string CacheDir = Opts.NoCache ? std::string() : cacheDirectory(Opts);
  if (!Opts.NoCache && CacheDir.empty() && Opts.Verbose) {
    errs() << "accel-rewrite: no cache (neither XDG_CACHE_HOME nor HOME is set; see --cache-dir)\n";
  }
  std::optional<PreambleCache> Preambles;
  if (!CacheDir.empty()) {
    Preambles.emplace(CacheDir, cacheSizeLimit(Opts));
  }
  std::vector<Outcome> Outcomes =
      analyzeAll(Inputs, **Compilations, *ResourceDir, *Selected, Opts.BuildDir, Opts.Jobs,
                 Preambles ? &*Preambles : nullptr, Opts.Verbose);
  return Opts.Check ? report(Opts, Inputs, Outcomes, *Selected, Start)
                    : writeResults(Opts, Inputs, Outcomes);
}
