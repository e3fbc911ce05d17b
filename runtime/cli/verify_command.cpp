#include "verify_command.h"

#include "comparison_report.h"
#include "option_values.h"
#include "shell_words.h"
#include "worker_group.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <stdexcept>

namespace accel::cli {
namespace {

constexpr int kDefaultProcesses = 2;

std::string processes_text(int count) {
  return std::to_string(count) + (count == 1 ? " process" : " processes");
}

// The command line a side runs, for -v and messages.
std::string command_text(const std::vector<std::string> &argv) {
  std::string text;
  for (const auto &word : argv) {
    text += (text.empty() ? "" : " ") + word;
  }
  return text;
}

// One side's arguments: its own (--original_args), else the shared ARGS.
std::vector<std::string> side_arguments(const std::optional<std::string> &own,
                                        const std::vector<std::string> &shared,
                                        const char *option) {
  if (!own) {
    return shared;
  }
  try {
    return split_shell_words(*own);
  } catch (const std::runtime_error &error) {
    throw std::runtime_error(std::string(option) + ": " + error.what());
  }
}

// What one side printed: its main process's stdout whole; of the others only how much.
struct SideOutput {
  std::string main;
  size_t other_lines = 0;
};

// Runs one side as `accel launch` would, its stdout captured; returns the launcher's code.
int run_side(LaunchRequest request, SideOutput &output) {
  request.capture_stdout = [&output](int rank, std::string_view chunk) {
    if (rank == 0) {
      output.main.append(chunk);
    } else {
      output.other_lines += static_cast<size_t>(std::count(chunk.begin(), chunk.end(), '\n'));
    }
  };
  return run_launch(request);
}

// A side that did not finish: the launcher has said why; this says which side and stops.
int side_failed(int code, const std::string &side) {
  if (code > 128) {
    return code; // stopped by a signal: the launcher said so, and the caller gets 128 + N
  }
  std::cerr << "accel verify: nothing was compared: " << side
            << " failed (its exit and last stderr lines are above)\n";
  return 2;
}

} // namespace

CLI::App *add_verify_command(CLI::App &app, VerifyRequest &request) {
  constexpr long kAny = std::numeric_limits<int>::max();
  auto *verify = app.add_subcommand(
      "verify", "Run ORIGINAL on 1 process and REWRITTEN on N, and compare what they print");
  verify->add_option("ORIGINAL", request.original, "The single-process program")->required();
  verify->add_option("REWRITTEN", request.rewritten, "Its data-parallel rewrite")->required();
  verify->add_option(both_spellings("original_args"), request.original_args,
                     "The original's arguments instead of ARGS, split as a shell splits words "
                     "(\"64 out/a\"; begins with '-': --original_args='--lr 1')");
  verify->add_option(both_spellings("rewritten_args"), request.rewritten_args,
                     "The rewrite's arguments instead of ARGS, likewise");
  auto &flags = request.launch.flags;
  verify
      ->add_option(both_spellings("num_processes"), flags.num_processes,
                   "Processes for the rewrite (default 2)")
      ->check(whole_number(1, kAny));
  verify->add_flag("--split_batches,--split-batches,!--no_split_batches,!--no-split-batches",
                   request.split_batches,
                   "The rewrite splits every batch across its processes, so that together they "
                   "see the original's batches (default; ACCELERATE_SPLIT_BATCHES). "
                   "--no_split_batches: each process takes whole batches");
  verify
      ->add_option("--rtol", request.tolerance.rtol,
                   "Numbers may differ by this fraction of the original's (default 1e-3)")
      ->check(non_negative_number(1e300));
  verify
      ->add_option("--atol", request.tolerance.atol,
                   "... plus this much, for values near zero (default 1e-6)")
      ->check(non_negative_number(1e300));
  verify
      ->add_option("--ignore", request.ignore,
                   "Drop the lines this regular expression (ECMAScript) finds, on both sides; "
                   "repeatable")
      ->allow_extra_args(false);
  // The launch settings that make sense for a check on this machine, as `accel launch` has them.
  verify->add_option(both_spellings("config_file"), request.launch.config_file,
                     "YAML config for both sides (default: none, not even Accelerate's default "
                     "file)");
  verify->add_option(both_spellings("mixed_precision"), flags.mixed_precision)
      ->check(one_of({"no", "fp16", "bf16"}));
  verify
      ->add_option(both_spellings("gradient_accumulation_steps"), flags.gradient_accumulation_steps)
      ->check(whole_number(1, kAny));
  verify->add_flag("--cpu", request.launch.cpu,
                   "Both sides on the CPU: no GPU is visible to either");
  verify
      ->add_option(both_spellings("num_cpu_threads_per_process"), flags.num_cpu_threads_per_process)
      ->check(whole_number(1, kAny));
  verify
      ->add_option(both_spellings("main_process_port"), flags.main_process_port,
                   "Rendezvous port (default: a free one)")
      ->check(whole_number(1, 65535));
  verify
      ->add_option(both_spellings("rdzv_timeout"), request.launch.rdzv_timeout,
                   "Seconds the processes may take to meet, and collectives to finish")
      ->check(seconds_between(kMinTimeoutSeconds, kMaxTimeoutSeconds));
  verify->add_flag("--debug", request.launch.debug,
                   "Check distributed operations for errors (ACCELERATE_DEBUG_MODE)");
  verify->add_flag("-v,--verbose", request.launch.verbose,
                   "Say what each side runs, and log the launch plans");
  verify->footer("ARGS after -- go to both programs. Exit status: 0 the outputs agree, 1 they "
                 "differ, 2 bad usage or a side that fails (docs/launcher.md, \"accel verify\").");
  // Words CLI11 does not know are reported by run_verify, which can say where they belong.
  verify->allow_extras();
  return verify;
}

int run_verify(const VerifyRequest &request, std::ostream &out) {
  for (const auto &word : request.stray) {
    if (word.size() > 1 && word[0] == '-') {
      throw std::runtime_error("unknown option '" + word +
                               "' (accel verify --help lists the options; the programs' "
                               "arguments go after --)");
    }
    throw std::runtime_error("'" + word +
                             "' after ORIGINAL and REWRITTEN: the programs' arguments go after "
                             "-- (accel verify ORIGINAL REWRITTEN -- ARGS...)");
  }
  if (request.original_args && request.rewritten_args && !request.args.empty()) {
    throw std::runtime_error("ARGS after -- would go to neither program: --original_args and "
                             "--rewritten_args replace them");
  }
  const auto ignore = ignore_patterns(request.ignore);
  auto original_argv = side_arguments(request.original_args, request.args, "--original_args");
  auto rewrite_argv = side_arguments(request.rewritten_args, request.args, "--rewritten_args");
  // Both programs are checked before either runs: a typo in the second must not cost the time
  // the first takes.
  try {
    resolve_program(request.original);
  } catch (const std::runtime_error &error) {
    throw std::runtime_error(std::string("ORIGINAL: ") + error.what());
  }
  try {
    resolve_program(request.rewritten);
  } catch (const std::runtime_error &error) {
    throw std::runtime_error(std::string("REWRITTEN: ") + error.what());
  }
  original_argv.insert(original_argv.begin(), request.original);
  rewrite_argv.insert(rewrite_argv.begin(), request.rewritten);

  LaunchRequest common = request.launch;
  // This machine only, with no settings but the command line's unless a file is named.
  common.default_config = false;
  common.flags.num_machines = 1;
  common.flags.machine_rank = 0;
  if (!common.flags.main_process_port) {
    common.flags.main_process_port = accelerate::launch::free_loopback_port();
  }
  if (common.cpu) {
    // An original that takes CUDA when it is there must not run on a GPU while the rewrite
    // runs on the CPU.
    common.environment["CUDA_VISIBLE_DEVICES"] = "";
  }
  const int processes = request.launch.flags.num_processes.value_or(kDefaultProcesses);
  const std::string mode = request.split_batches ? "split_batches" : "sharded batches";
  if (!request.split_batches && processes > 1 && !request.original_args &&
      !request.rewritten_args) {
    std::cerr << "accel verify: note: with --no_split_batches each of the " << processes
              << " processes takes whole batches, so the rewrite's global batch is " << processes
              << " times the original's unless the original gets " << processes
              << " times the batch size (--original_args)\n";
  }

  LaunchRequest original = common;
  original.flags.num_processes = 1;
  original.no_prefix = true; // one process: a rank prefix on its stderr would say nothing
  original.command = original_argv;
  original.job_name = "the original (1 process)";
  LaunchRequest rewrite = common;
  rewrite.flags.num_processes = processes;
  rewrite.command = rewrite_argv;
  rewrite.job_name = "the rewrite (" + processes_text(processes) + ")";
  rewrite.split_batches = request.split_batches; // launch's flag: its plan (-v) says so
  // Set either way: an ACCELERATE_SPLIT_BATCHES in the caller's environment must not choose.
  rewrite.environment["ACCELERATE_SPLIT_BATCHES"] = request.split_batches ? "true" : "false";

  SideOutput original_output, rewrite_output;
  if (request.launch.verbose) {
    std::cerr << "accel verify: the original on 1 process: " << command_text(original_argv) << "\n";
  }
  if (const int code = run_side(original, original_output); code != 0) {
    return side_failed(code, original.job_name);
  }
  if (request.launch.verbose) {
    std::cerr << "accel verify: the rewrite on " << processes_text(processes) << " with " << mode
              << ": " << command_text(rewrite_argv) << "\n";
  }
  if (const int code = run_side(rewrite, rewrite_output); code != 0) {
    return side_failed(code, rewrite.job_name);
  }
  if (rewrite_output.other_lines > 0) {
    std::cerr << "accel verify: note: the rewrite's other processes printed "
              << rewrite_output.other_lines
              << " line(s) to stdout as well (not compared): a user sees those once per "
                 "process\n";
  }

  const auto comparison =
      compare_outputs(original_output.main, rewrite_output.main, ignore, request.tolerance);
  if (comparison.original.empty() && comparison.rewrite.empty()) {
    throw std::runtime_error(
        "neither program printed a line to stdout" +
        std::string(comparison.ignored_original + comparison.ignored_rewrite > 0
                        ? " that --ignore kept"
                        : "") +
        ": there is nothing to compare (print what training computes, such as the loss, to "
        "stdout)");
  }
  if (comparison.agree()) {
    out << agreement_summary(comparison, request.tolerance,
                             "original on 1 process, rewrite on " + std::to_string(processes) +
                                 " with " + mode);
    return 0;
  }
  ReportLayout layout;
  layout.original_title = "original, 1 process";
  layout.rewrite_title = "rewrite, " + processes_text(processes) + ", " + mode;
  out << difference_report(comparison, request.tolerance, layout);
  return 1;
}

} // namespace accel::cli
