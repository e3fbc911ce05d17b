//===- AccelRewrite.cpp - The accel-rewrite command line --------*- C++ -*-===//
//
//   accel-rewrite [options] FILE... [-- COMPILER FLAGS]
//
// Parses each input with clang against the real LibTorch headers and writes it back
// rewritten by the selected rules (docs/accel-rewrite.md). Exit codes: ExitCodes.h.
//
//===----------------------------------------------------------------------===//
#include "CompileFlags.h"
#include "ExitCodes.h"
#include "OutputFile.h"
#include "ResourceDir.h"
#include "RewriteFile.h"
#include "UnifiedDiff.h"

#include "accel/build_info.h"
#include "accel/rewrites/Rules.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

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
};

} // namespace

static void printVersion(raw_ostream &OS) {
  OS << "accel-rewrite " ACCEL_VERSION "\n"
     << "LLVM " ACCEL_LLVM_VERSION "\n"
     << "LibTorch " ACCEL_TORCH_VERSION "\n";
}

static int fail(ExitCode Code, const Twine &Message) {
  WithColor::error(errs(), "accel-rewrite") << Message << "\n";
  return Code;
}

// Command-line combinations that cannot work, checked before any parsing starts.
static std::optional<std::string> usageProblem(const Options &Opts) {
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

int main(int argc, const char **argv) {
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
    return fail(ExitUsage, "--rules=" + Opts.RuleSpec + ": " + toString(Selected.takeError()));
  }

  static int AnchorInThisExecutable;
  Expected<std::string> ResourceDir =
      findResourceDir(Opts.ResourceDir, argv[0], &AnchorInThisExecutable);
  if (!Opts.PrintResourceDir) {
    if (std::optional<std::string> Problem = usageProblem(Opts)) {
      return fail(ExitUsage, *Problem);
    }
  }
  if (!ResourceDir) {
    return fail(ExitNoResourceDir, toString(ResourceDir.takeError()));
  }
  if (Opts.PrintResourceDir) {
    outs() << *ResourceDir << "\n";
    return ExitSuccess;
  }

  Expected<std::unique_ptr<clang::tooling::CompilationDatabase>> Compilations =
      selectCompilations(std::move(AfterDashDash), Opts.BuildDir);
  if (!Compilations) {
    return fail(ExitUsage, toString(Compilations.takeError()));
  }

  int Status = ExitSuccess; // The first failure decides; the other inputs still run.
  auto Record = [&](int Code) {
    if (Status == ExitSuccess) {
      Status = Code;
    }
  };
  for (const std::string &Input : Opts.Inputs) {
    SmallString<256> File(Input);
    if (std::error_code EC = sys::fs::make_absolute(File)) {
      Record(fail(ExitIOError, "cannot read " + Input + ": " + EC.message()));
      continue;
    }
    if (!sys::fs::is_regular_file(File)) {
      Record(
          fail(ExitIOError, "cannot read " + Input + ": " +
                                (sys::fs::exists(File) ? "not a regular file" : "no such file")));
      continue;
    }
    if ((*Compilations)->getCompileCommands(File).empty()) {
      Record(fail(ExitUsage, "no compile command for " + Input + " in " + Opts.BuildDir +
                                 "/compile_commands.json"));
      continue;
    }
    // Not worth a parse: clang would print pages of noise for a binary file.
    ErrorOr<std::unique_ptr<MemoryBuffer>> Text = MemoryBuffer::getFile(File);
    if (!Text) {
      Record(fail(ExitIOError, "cannot read " + Input + ": " + Text.getError().message()));
      continue;
    }
    if ((*Text)->getBuffer().trim().empty()) {
      Record(fail(ExitNotLibTorch, Input + " is empty; nothing to rewrite"));
      continue;
    }
    if ((*Text)->getBuffer().contains('\0')) {
      Record(fail(ExitNotLibTorch,
                  Input + " is not a source file (it holds NUL bytes); nothing written for it"));
      continue;
    }
    std::optional<FileRewrite> Result = rewriteFile(**Compilations, File, *ResourceDir, *Selected);
    if (!Result) {
      Record(fail(ExitParseError, Input + " has compile errors; nothing written for it"));
      continue;
    }
    if (!Result->UsesLibTorch) {
      Record(fail(ExitNotLibTorch, Input + " is not a LibTorch program (it includes none of "
                                           "LibTorch's headers, such as <torch/torch.h>); "
                                           "nothing written for it"));
      continue;
    }
    for (const std::string &Warning : Result->Warnings) {
      errs() << Warning << "\n";
    }
    if (!emit(Opts, Input, *Result)) {
      Record(ExitIOError);
    }
  }
  return Status;
}
