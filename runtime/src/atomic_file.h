// Files and directories that appear whole or not at all: written aside, flushed to disk, then
// renamed into place with the directory that holds them flushed too, so that a crash at any
// moment leaves either the old content or the new one under the name.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace accelerate::detail {

/// Flushes a file or a directory (its entries) to disk. Throws naming the path.
void flush_to_disk(const std::filesystem::path &path);

/// Renames `from` to `to` (replacing a file there) durably: `from` is flushed first, the
/// directory of `to` after. Throws naming both.
void rename_durably(const std::filesystem::path &from, const std::filesystem::path &to);

/// Swaps two directories in one step (renameat2 RENAME_EXCHANGE) and flushes their directory:
/// at every moment each name holds a whole directory. Throws naming both.
void exchange_durably(const std::filesystem::path &from, const std::filesystem::path &to);

/// Writes `path` with `write` (which gets the path to write to) and flushes it to disk. Throws
/// with the path in the message when it fails.
void write_durably(const std::filesystem::path &path,
                   const std::function<void(const std::string &)> &write);

/// Writes `path` atomically: `write` writes a temporary file beside it, which is flushed and
/// renamed over `path`. On failure the temporary is removed and `path` left as it was.
void write_atomically(const std::filesystem::path &path,
                      const std::function<void(const std::string &)> &write);

} // namespace accelerate::detail
