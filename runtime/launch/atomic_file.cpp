#include "atomic_file.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
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

[[noreturn]] void fail(const fs::path &path, int error, const std::string &what) {
  throw FileWriteError(path, std::error_code(error, std::generic_category()),
                       what + ": " + std::strerror(error));
}

// A name beside `target` that no other writer uses, in this process or another.
fs::path temporary_beside(const fs::path &target) {
  static std::atomic<unsigned> next{0};
  return target.string() + ".accel-tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(next++);
}

} // namespace

void flush_to_disk(const fs::path &path) {
  std::error_code ignored;
  const int flags = (fs::is_directory(path, ignored) ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) {
    fail(path, errno, "accelerate: cannot open " + path.string() + " to flush it to disk");
  }
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (result != 0) {
    fail(path, error, "accelerate: cannot flush " + path.string() + " to disk");
  }
}

void rename_durably(const fs::path &from, const fs::path &to) {
  // The data reaches the disk before the rename makes it visible; the rename itself is on disk
  // once the directory is.
  flush_to_disk(from);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    fail(to, errno, "accelerate: cannot move " + from.string() + " into place at " + to.string());
  }
  flush_to_disk(directory_of(to));
}

void exchange_durably(const fs::path &from, const fs::path &to) {
  flush_to_disk(from);
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    fail(to, errno, "accelerate: cannot replace " + to.string() + " by " + from.string());
  }
  flush_to_disk(directory_of(to));
}

void write_durably(const fs::path &path, const std::function<void(const std::string &)> &write) {
  try {
    write(path.string());
  } catch (const std::system_error &error) {
    throw FileWriteError(path, error.code(),
                         "accelerate: cannot write " + path.string() + ": " + error.what());
  } catch (const std::exception &error) {
    throw FileWriteError(path, {},
                         "accelerate: cannot write " + path.string() + ": " + error.what());
  }
  flush_to_disk(path);
}

void write_atomically(const fs::path &path, const std::function<void(const std::string &)> &write,
                      IfExists if_exists) {
  // Next to the file a link points to (a rename over the link would replace the link), and
  // in its directory, so that the rename stays within one file system.
  std::error_code ignored;
  fs::path target = path;
  if (fs::is_symlink(path, ignored) && fs::exists(path, ignored)) {
    target = fs::canonical(path);
  }
  const fs::path directory = directory_of(target);
  if (!fs::is_directory(directory, ignored)) {
    fail(path, ENOENT, "accelerate: cannot write " + path.string());
  }
  const fs::path temporary = temporary_beside(target);
  try {
    write_durably(temporary, write);
    const auto existing = fs::status(target, ignored);
    if (fs::exists(existing)) {
      fs::permissions(temporary, existing.permissions(), ignored);
    }
    if (if_exists == IfExists::Replace) {
      rename_durably(temporary, target);
      return;
    }
    // link() fails if the target appeared meanwhile: a file we were told to keep is never
    // replaced.
    if (::link(temporary.c_str(), target.c_str()) != 0) {
      const int error = errno;
      throw FileWriteError(path, std::error_code(error, std::generic_category()),
                           error == EEXIST ? path.string() + " already exists; not overwriting it"
                                           : "accelerate: cannot write " + path.string() + ": " +
                                                 std::strerror(error));
    }
    fs::remove(temporary);
    flush_to_disk(directory);
  } catch (...) {
    fs::remove(temporary, ignored);
    throw;
  }
}

} // namespace accelerate::detail
