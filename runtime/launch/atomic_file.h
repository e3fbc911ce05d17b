// Files and directories that appear whole or not at all: written aside, flushed to disk, then
// renamed into place with the directory that holds them flushed too, so that a crash at any
// moment leaves either the old content or the new one under the name. One implementation for
// the runtime's saves and checkpoints, the launcher's config files and accel-rewrite's output.
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace accelerate::detail {

/// A write, flush or rename that failed: the file it was for and, when the system said why,
/// its reason (empty when the writer failed on its own terms).
class FileWriteError : public std::runtime_error {
public:
  FileWriteError(std::filesystem::path path, std::error_code code, const std::string &what)
      : std::runtime_error(what), path_(std::move(path)), code_(code) {}
  const std::filesystem::path &path() const { return path_; }
  std::error_code code() const { return code_; }

private:
  std::filesystem::path path_;
  std::error_code code_;
};

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

/// What write_atomically does when `path` already exists.
enum class IfExists {
  Replace, ///< the new file replaces it in one rename
  Fail,    ///< it is kept and the write fails, also when it appeared while writing
};

/// Writes `path` atomically: `write` writes a temporary file beside it (named
/// PATH.accel-tmp-PID-N), which is flushed and renamed over `path`. A symbolic link at `path`
/// stays a link: the file it points to is replaced. An existing file's permissions carry over
/// to the new one. On failure the temporary is removed and `path` left as it was.
void write_atomically(const std::filesystem::path &path,
                      const std::function<void(const std::string &)> &write,
                      IfExists if_exists = IfExists::Replace);

} // namespace accelerate::detail
