// A private directory for one fuzzer process's files, removed when the process exits.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace accel_fuzz {

inline const std::filesystem::path &scratch_directory() {
  static const std::filesystem::path directory = [] {
    const auto pattern = (std::filesystem::temp_directory_path() / "accel-fuzz-XXXXXX").string();
    std::string buffer = pattern;
    if (::mkdtemp(buffer.data()) == nullptr) {
      throw std::runtime_error("cannot create a directory like " + pattern);
    }
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_directory(), ignored);
    });
    return std::filesystem::path(buffer);
  }();
  return directory;
}

} // namespace accel_fuzz
