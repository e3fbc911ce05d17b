// `accel config` (questions, in a terminal or from piped answers) and `accel config default`.
#pragma once

#include <iosfwd>
#include <string>

namespace accel::cli {

/// Asks Accelerate's questions that apply to accel on `in`, writes the YAML to `path`
/// (replacing it). Returns the exit code.
int run_config_questions(const std::string &path, std::istream &in, std::ostream &out);

/// Writes a default config for this machine to `path`; refuses to overwrite.
int run_config_default(const std::string &path, std::ostream &out);

} // namespace accel::cli
