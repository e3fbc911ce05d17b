// `accel verify [OPTIONS] ORIGINAL REWRITTEN [-- ARGS...]`: runs the original program on one
// process and its rewrite on N through `accel launch`'s machinery, and compares what their main
// processes print (docs/launcher.md, "accel verify").
#pragma once

#include "launch_command.h"
#include "output_comparison.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace accel::cli {

/// What `accel verify` was asked.
struct VerifyRequest {
  /// The launch settings both sides run with (config file, precision, accumulation, --cpu, ...);
  /// flags.num_processes is the rewrite's, 2 when not given.
  LaunchRequest launch;
  std::string original, rewritten; ///< the two programs
  std::vector<std::string> args;   ///< ARGS after `--`, for both
  /// One side's own arguments instead of ARGS, split as a shell splits words.
  std::optional<std::string> original_args, rewritten_args;
  /// The rewrite splits each global batch across its processes (ACCELERATE_SPLIT_BATCHES), so
  /// it sees the original's batches; false: each process takes whole batches.
  bool split_batches = true;
  Tolerance tolerance;
  std::vector<std::string> ignore; ///< ECMAScript patterns of lines to drop on both sides
  std::vector<std::string> stray;  ///< words CLI11 did not take: an error, said in our words
};

/// Adds the `verify` subcommand's options, storing into `request`.
CLI::App *add_verify_command(CLI::App &app, VerifyRequest &request);

/// Runs both sides and writes the verdict to `out`: 0 when the outputs agree, 1 when they
/// differ, 2 for bad usage or a side that fails, 128 + N when stopped by signal N. Throws
/// std::runtime_error for bad usage (the caller prints it and exits 2).
int run_verify(const VerifyRequest &request, std::ostream &out);

} // namespace accel::cli
