#include "job_segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

namespace accelerate::launch {

std::string job_segment_prefix(std::string_view job_id) {
  return "accel-job" + std::string(job_id) + "-";
}

int remove_segments_with_prefix(const char *prefix) {
  const int directory = ::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory < 0) {
    return 0;
  }
  const size_t prefix_length = std::strlen(prefix);
  const uid_t me = ::geteuid();
  int removed = 0;
  // getdents64 rather than opendir/readdir, which allocate.
  alignas(8) char buffer[4096];
  for (;;) {
    const long bytes = ::syscall(SYS_getdents64, directory, buffer, sizeof(buffer));
    if (bytes <= 0) {
      break;
    }
    for (long offset = 0; offset < bytes;) {
      const auto *entry = reinterpret_cast<const struct dirent64 *>(buffer + offset);
      offset += entry->d_reclen;
      struct stat info{};
      if (std::strncmp(entry->d_name, prefix, prefix_length) == 0 &&
          ::fstatat(directory, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(info.st_mode) && info.st_uid == me &&
          ::unlinkat(directory, entry->d_name, 0) == 0) {
        ++removed;
      }
    }
  }
  ::close(directory);
  return removed;
}

} // namespace accelerate::launch
