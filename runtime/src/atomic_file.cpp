#include "atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <stdio.h>
#include <unistd.h>

namespace accelerate::detail {
namespace fs = std::filesystem;

namespace {

// The directory holding `path`'s entry ("a/b/" names b, held by a).
fs::path directory_of(const fs::path &path) {
  const fs::path absolute = fs::absolute(path).lexically_normal();
  return absolute.has_filename() ? absolute.parent_path() : absolute.parent_path().parent_path();
}

} // namespace

void flush_to_disk(const fs::path &path) {
  std::error_code ignored;
  const int flags = (fs::is_directory(path, ignored) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("accelerate: cannot open " + path.string() +
                             " to flush it to disk: " + std::strerror(errno));
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) {
    throw std::runtime_error("accelerate: cannot flush " + path.string() +
                             " to disk: " + std::strerror(error));
  }
}

void rename_durably(const fs::path &from, const fs::path &to) {
  // The data reaches the disk before the rename makes it visible; the rename itself is on disk
  // once the directory is.
  flush_to_disk(from);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    throw std::runtime_error("accelerate: cannot move " + from.string() + " into place at " +
                             to.string() + ": " + std::strerror(errno));
  }
  flush_to_disk(directory_of(to));
}

void exchange_durably(const fs::path &from, const fs::path &to) {
  flush_to_disk(from);
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    throw std::runtime_error("accelerate: cannot replace " + to.string() + " by " + from.string() +
                             ": " + std::strerror(errno));
  }
  flush_to_disk(directory_of(to));
}

void write_durably(const fs::path &path, const std::function<void(const std::string &)> &write) {
  try {
    write(path.string());
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: cannot write " + path.string() + ": " + error.what());
  }
  flush_to_disk(path);
}

void write_atomically(const fs::path &path, const std::function<void(const std::string &)> &write) {
  // Beside the target, so that the rename stays within one file system.
  const fs::path temporary = path.string() + ".tmp-" + std::to_string(::getpid());
  try {
    write_durably(temporary, write);
    rename_durably(temporary, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

} // namespace accelerate::detail
