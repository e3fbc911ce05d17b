// Checkpoint directories that appear whole or not at all: files are written into a staging
// directory beside the final one, flushed to disk, and the directory is renamed into place.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace accelerate::detail {

/// The name of the file that marks a checkpoint as complete; written last.
inline constexpr const char *kCheckpointManifest = "checkpoint.json";

/// Where save_state stages `final_directory` before renaming it into place.
std::filesystem::path staging_directory_for(const std::filesystem::path &final_directory);

/// Writes one file of a staged checkpoint with `write` (which gets the path to write to) and
/// flushes it to disk. Throws with the path in the message when it fails.
void write_checkpoint_file(const std::filesystem::path &path,
                           const std::function<void(const std::string &)> &write);

/// Flushes `staging` to disk and puts it at `final_directory` in one atomic step, replacing an
/// older checkpoint there (which is then removed).
void publish_directory(const std::filesystem::path &staging,
                       const std::filesystem::path &final_directory);

/// The complete checkpoints `checkpoints/checkpoint_<n>` under `project_dir`, by increasing n.
std::vector<std::filesystem::path> automatic_checkpoints(const std::filesystem::path &project_dir);

/// The directory the next automatically named checkpoint goes to.
std::filesystem::path next_automatic_checkpoint(const std::filesystem::path &project_dir);

/// Removes the oldest automatic checkpoints until `keep` remain (keep 0: remove none).
void rotate_automatic_checkpoints(const std::filesystem::path &project_dir, int keep);

} // namespace accelerate::detail
