// A string of arguments split into words as a POSIX shell splits them, without expanding
// anything: how `accel verify --original_args "64 out/a"` gives one side its own arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace accel::cli {

/// Blanks separate words; '...' keeps everything literally; "..." too, except that a backslash
/// there escapes ", \, $ and `; a backslash elsewhere escapes the next character. No variables,
/// globs or substitutions: `$HOME` stays as written. Throws std::runtime_error for a quote
/// left open or a trailing backslash.
std::vector<std::string> split_shell_words(std::string_view text);

} // namespace accel::cli
