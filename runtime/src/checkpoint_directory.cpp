#include "checkpoint_directory.h"

#include "atomic_file.h"
#include "test_faults.h"

#include <algorithm>

namespace accelerate::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char *kAutomaticPrefix = "checkpoint_";

// n of checkpoint_<n>, or -1 for any other name.
long automatic_index(const fs::path &path) {
  const std::string name = path.filename().string();
  const std::string prefix = kAutomaticPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      digits.size() > 9) {
    return -1;
  }
  return std::stol(digits);
}

std::vector<std::pair<long, fs::path>> numbered_checkpoints(const fs::path &project_dir) {
  std::vector<std::pair<long, fs::path>> found;
  const fs::path root = project_dir / "checkpoints";
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    return found;
  }
  for (const auto &entry : fs::directory_iterator(root)) {
    const long index = automatic_index(entry.path());
    if (index >= 0 && entry.is_directory()) {
      found.emplace_back(index, entry.path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

} // namespace

fs::path staging_directory_for(const fs::path &final_directory) {
  const fs::path absolute = fs::absolute(final_directory).lexically_normal();
  const fs::path name =
      absolute.has_filename() ? absolute.filename() : absolute.parent_path().filename();
  const fs::path parent =
      absolute.has_filename() ? absolute.parent_path() : absolute.parent_path().parent_path();
  return parent / ("." + name.string() + ".accelerate-staging");
}

void write_checkpoint_file(const fs::path &path,
                           const std::function<void(const std::string &)> &write) {
  test_fault_point("save");
  write_durably(path, write);
}

void publish_directory(const fs::path &staging, const fs::path &final_directory) {
  test_fault_point("save");
  if (fs::exists(final_directory)) {
    // Swap the two directories in one step: at every moment the name holds a whole checkpoint.
    exchange_durably(staging, final_directory);
    fs::remove_all(staging); // now the previous checkpoint
  } else {
    rename_durably(staging, final_directory);
  }
}

std::vector<fs::path> automatic_checkpoints(const fs::path &project_dir) {
  std::vector<fs::path> complete;
  for (const auto &[index, path] : numbered_checkpoints(project_dir)) {
    if (fs::exists(path / kCheckpointManifest)) {
      complete.push_back(path);
    }
  }
  return complete;
}

fs::path next_automatic_checkpoint(const fs::path &project_dir) {
  const auto existing = numbered_checkpoints(project_dir);
  const long next = existing.empty() ? 0 : existing.back().first + 1;
  return project_dir / "checkpoints" / (kAutomaticPrefix + std::to_string(next));
}

void rotate_automatic_checkpoints(const fs::path &project_dir, int keep) {
  if (keep <= 0) {
    return;
  }
  auto existing = numbered_checkpoints(project_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < existing.size(); ++i) {
    fs::remove_all(existing[i].second);
  }
}

} // namespace accelerate::detail
