// Accelerator::save_state and load_state: what a checkpoint holds, and the protocol by which
// every process writes its part. The directory handling is in checkpoint_directory.cpp.
//
// A checkpoint directory holds
//   model_<i>.pt, optimizer_<i>.pt, scheduler_<i>.pt, scaler.pt   from the main process (the
//       prepared objects are the same on every process)
//   process_<rank>.pt   each process's random generators, loader positions and step counters
//   checkpoint.json     written last: what the checkpoint holds, with every file's size and
//       CRC-32C (file_checksum.h); without it, it is no checkpoint
#include "accelerate/accelerator.h"

#include "checkpoint_directory.h"
#include "file_checksum.h"
#include "runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

namespace accelerate {
namespace fs = std::filesystem;
namespace {

constexpr const char *kFormat = "accelerate-cpp-checkpoint";
// Version 2 added "files": each file's size and CRC-32C. Version 1 checkpoints (without them)
// still load, unchecked.
constexpr int kVersion = 2;
constexpr int kOldestVersion = 1;

// LRScheduler keeps its position in a protected member and has no serialisation of its own
// (its learning rates live in the optimizer's parameter groups, which the optimizer saves).
struct SchedulerPosition : torch::optim::LRScheduler {
  static unsigned &of(torch::optim::LRScheduler &scheduler) {
    return scheduler.*(&SchedulerPosition::step_count_);
  }
};

std::string file_for(const std::string &kind, size_t index) {
  return kind + "_" + std::to_string(index) + ".pt";
}

std::string process_file(int rank) { return "process_" + std::to_string(rank) + ".pt"; }

// Every process learns whether any failed a step of the protocol; those that did not fail are
// told which did, so that no process waits for a peer that gave up.
void agree(const detail::ProcessState &process, const std::string &my_error,
           const std::string &what) {
  if (!process.group) {
    if (!my_error.empty()) {
      throw std::runtime_error(my_error);
    }
    return;
  }
  auto failed = torch::zeros({process.info.world_size}, torch::kInt32);
  failed[process.info.rank] = my_error.empty() ? 0 : 1;
  failed = failed.to(process.device);
  process.group->sum(failed, what);
  const auto flags = failed.cpu();
  if (!my_error.empty()) {
    throw std::runtime_error(my_error);
  }
  std::ostringstream ranks;
  for (int r = 0; r < process.info.world_size; ++r) {
    if (flags[r].item<int>() != 0) {
      ranks << (ranks.tellp() > 0 ? ", " : "") << r;
    }
  }
  if (ranks.tellp() > 0) {
    throw std::runtime_error("accelerate: " + what + " failed on process " + ranks.str() +
                             " (its own error says why)");
  }
}

// Runs `body`, turning an exception into the message agree() passes on.
template <typename Body> std::string attempt(Body &&body) {
  try {
    body();
    return {};
  } catch (const std::exception &error) {
    return error.what();
  }
}

std::vector<at::Generator> cuda_generators() {
  std::vector<at::Generator> generators;
  const auto count = static_cast<int>(torch::cuda::device_count());
  for (int i = 0; i < count; ++i) {
    generators.push_back(
        at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<int8_t>(i))));
  }
  return generators;
}

// The loaders that still exist, in order of creation (loaders made per epoch come and go).
std::vector<std::shared_ptr<detail::LoaderProgress>>
live_loaders(const detail::PreparedObjects &prepared) {
  std::vector<std::shared_ptr<detail::LoaderProgress>> live;
  for (const auto &weak : prepared.loader_context->loaders) {
    if (auto progress = weak.lock()) {
      live.push_back(std::move(progress));
    }
  }
  return live;
}

void save_process_state(const detail::PreparedObjects &prepared,
                        const detail::StepPosition &position, const std::string &path) {
  torch::serialize::OutputArchive archive;
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("rng/cpu", generator.get_state());
  }
  auto cuda = cuda_generators();
  archive.write("rng/cuda_count", torch::tensor(static_cast<int64_t>(cuda.size())));
  for (size_t i = 0; i < cuda.size(); ++i) {
    std::lock_guard<std::mutex> lock(cuda[i].mutex());
    archive.write("rng/cuda_" + std::to_string(i), cuda[i].get_state());
  }
  const auto loaders = live_loaders(prepared);
  archive.write("loader_count", torch::tensor(static_cast<int64_t>(loaders.size())));
  for (size_t i = 0; i < loaders.size(); ++i) {
    const std::string key = "loader_" + std::to_string(i) + "/";
    const auto &p = *loaders[i];
    archive.write(key + "dataset_size", torch::tensor(static_cast<int64_t>(p.dataset_size)));
    archive.write(key + "batch_size", torch::tensor(static_cast<int64_t>(p.batch_size)));
    archive.write(key + "split_batches", torch::tensor(static_cast<int64_t>(p.split_batches)));
    archive.write(key + "order", torch::tensor(p.order, torch::kInt64));
    archive.write(key + "delivered", torch::tensor(static_cast<int64_t>(p.delivered)));
    archive.write(key + "batches", torch::tensor(static_cast<int64_t>(p.batches)));
    archive.write(key + "epochs_begun", torch::tensor(p.epochs_begun));
  }
  archive.write("accumulation_step",
                torch::tensor(static_cast<int64_t>(position.accumulation_step)));
  archive.write("global_step", torch::tensor(position.global_step));
  archive.write("unapplied_gradients",
                torch::tensor(static_cast<int64_t>(position.unapplied_gradients)));
  archive.write("local_sgd_steps", torch::tensor(position.local_sgd_steps_taken));
  archive.save_to(path);
}

// archive.load_from, with the file named when LibTorch cannot read it (its zip errors do not).
void load_archive(torch::serialize::InputArchive &archive, const fs::path &path,
                  std::optional<torch::Device> device = std::nullopt) {
  try {
    archive.load_from(path.string(), device);
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: load_state: " + path.string() +
                             " cannot be read: " + detail::message_of(error));
  }
}

int64_t read_int(torch::serialize::InputArchive &archive, const std::string &key) {
  torch::Tensor value;
  archive.read(key, value);
  return value.item<int64_t>();
}

// One process's part of a checkpoint, read and checked before anything is restored.
struct SavedProcessState {
  torch::Tensor cpu_rng;
  std::vector<torch::Tensor> cuda_rng;
  /// Saved loader progress for each live loader it belongs to (null: that loader starts fresh).
  std::vector<std::optional<detail::LoaderProgress>> loaders;
  int64_t accumulation_step = 0, global_step = 0, local_sgd_steps_taken = 0;
  bool unapplied_gradients = false;
};

SavedProcessState read_process_state(const detail::PreparedObjects &prepared,
                                     const fs::path &path) {
  torch::serialize::InputArchive archive;
  load_archive(archive, path);
  SavedProcessState state;
  archive.read("rng/cpu", state.cpu_rng);
  const auto cuda_count = read_int(archive, "rng/cuda_count");
  for (int64_t i = 0; i < cuda_count; ++i) {
    state.cuda_rng.emplace_back();
    archive.read("rng/cuda_" + std::to_string(i), state.cuda_rng.back());
  }
  // Saved loaders are matched in order to the live ones of the same dataset size, batch size
  // and split_batches (a position counts whole batches or slices of batches); a loader made
  // per epoch (evaluation) may exist on one side only. What must not be lost is a loader in
  // the middle of an epoch.
  const auto live = live_loaders(prepared);
  state.loaders.resize(live.size());
  size_t next_live = 0;
  const auto saved_count = read_int(archive, "loader_count");
  for (int64_t i = 0; i < saved_count; ++i) {
    const std::string key = "loader_" + std::to_string(i) + "/";
    detail::LoaderProgress saved;
    saved.dataset_size = static_cast<size_t>(read_int(archive, key + "dataset_size"));
    saved.batch_size = static_cast<size_t>(read_int(archive, key + "batch_size"));
    // Checkpoints from before split_batches have no such key: their loaders were not split.
    torch::Tensor split;
    saved.split_batches = archive.try_read(key + "split_batches", split) && split.item<int64_t>();
    torch::Tensor order;
    archive.read(key + "order", order);
    order = order.contiguous();
    saved.order.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    saved.delivered = static_cast<size_t>(read_int(archive, key + "delivered"));
    saved.batches = static_cast<size_t>(read_int(archive, key + "batches"));
    saved.epochs_begun = read_int(archive, key + "epochs_begun");
    saved.resume = saved.delivered < saved.batches;
    size_t match = next_live;
    while (match < live.size() && (live[match]->dataset_size != saved.dataset_size ||
                                   live[match]->batch_size != saved.batch_size ||
                                   live[match]->split_batches != saved.split_batches)) {
      ++match;
    }
    if (match == live.size()) {
      if (saved.resume) {
        const bool split_differs = std::any_of(live.begin(), live.end(), [&](const auto &loader) {
          return loader->dataset_size == saved.dataset_size &&
                 loader->batch_size == saved.batch_size;
        });
        throw std::runtime_error(
            "accelerate: load_state: " + path.parent_path().string() + " holds a loader of " +
            std::to_string(saved.dataset_size) + " samples in batches of " +
            std::to_string(saved.batch_size) +
            (saved.split_batches ? " split across the processes" : "") +
            " in the middle of an epoch, and this program has " +
            (split_differs
                 ? std::string("it with split_batches ") + (saved.split_batches ? "off" : "on") +
                       ": resume with split_batches as it was when saved"
                 : "no such loader yet: call prepare_data_loader before load_state"));
      }
      continue; // finished or not begun: nothing to continue
    }
    state.loaders[match] = std::move(saved);
    next_live = match + 1;
  }
  state.accumulation_step = read_int(archive, "accumulation_step");
  state.global_step = read_int(archive, "global_step");
  state.unapplied_gradients = read_int(archive, "unapplied_gradients") != 0;
  // Checkpoints from before Local SGD have no count: they were not saved under it.
  if (torch::Tensor count; archive.try_read("local_sgd_steps", count)) {
    state.local_sgd_steps_taken = count.item<int64_t>();
  }
  return state;
}

// Sets the generators' states; a generator refuses a state that is not one of its own.
void set_generators(const torch::Tensor &cpu_rng, const std::vector<torch::Tensor> &cuda_rng) {
  {
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(cpu_rng);
  }
  auto cuda = cuda_generators();
  for (size_t i = 0; i < std::min(cuda_rng.size(), cuda.size()); ++i) {
    std::lock_guard<std::mutex> lock(cuda[i].mutex());
    cuda[i].set_state(cuda_rng[i]);
  }
}

std::string archive_bytes(const std::function<void(torch::serialize::OutputArchive &)> &write) {
  torch::serialize::OutputArchive archive;
  write(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void read_archive_bytes(const std::string &bytes,
                        const std::function<void(torch::serialize::InputArchive &)> &read) {
  torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  read(archive);
}

// What the steps of a load that can still fail change (the optimizers' and the scaler's own
// loading checks the archive as it goes; a generator checks its state), as it was before, so
// that a refused checkpoint leaves them as they were.
struct Undo {
  std::vector<std::string> optimizers;
  std::optional<std::string> scaler;
  torch::Tensor cpu_rng;
  std::vector<torch::Tensor> cuda_rng;

  Undo(const detail::PreparedObjects &prepared, const detail::LiveObjects &live) {
    for (const auto *optimizer : live.optimizers) {
      optimizers.push_back(archive_bytes([&](auto &archive) { optimizer->save(archive); }));
    }
    if (prepared.scaler) {
      scaler = archive_bytes([&](auto &archive) { prepared.scaler->save(archive); });
    }
    {
      auto generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      cpu_rng = generator.get_state();
    }
    for (auto &generator : cuda_generators()) {
      std::lock_guard<std::mutex> lock(generator.mutex());
      cuda_rng.push_back(generator.get_state());
    }
  }

  void restore(const detail::PreparedObjects &prepared, const detail::LiveObjects &live) const {
    for (size_t i = 0; i < optimizers.size(); ++i) {
      read_archive_bytes(optimizers[i], [&](auto &archive) { live.optimizers[i]->load(archive); });
    }
    if (scaler) {
      read_archive_bytes(*scaler, [&](auto &archive) { prepared.scaler->load(archive); });
    }
    set_generators(cpu_rng, cuda_rng);
  }
};

// Everything but the generators (set_generators), none of which can fail.
void apply_process_state(const detail::PreparedObjects &prepared, detail::StepPosition &position,
                         SavedProcessState state) {
  const auto live = live_loaders(prepared);
  for (size_t i = 0; i < live.size(); ++i) {
    if (state.loaders[i]) {
      *live[i] = std::move(*state.loaders[i]);
    }
  }
  prepared.loader_context->end_of_dataloader = false;
  position.accumulation_step = static_cast<int>(state.accumulation_step);
  position.global_step = state.global_step;
  position.unapplied_gradients = state.unapplied_gradients;
  position.local_sgd_steps_taken = state.local_sgd_steps_taken;
}

// The model's own tensors paired with the archive's values, every shape checked, so that a
// refused checkpoint changes nothing. Copying into the model's tensors (rather than replacing
// them) keeps the optimizer and the gradient synchronisation pointing at its parameters.
void pair_module_state(torch::nn::Module &module, torch::serialize::InputArchive &archive,
                       const std::string &where,
                       std::vector<std::pair<torch::Tensor, torch::Tensor>> &pairs) {
  const auto take = [&](const std::string &name, const torch::Tensor &target, bool is_buffer) {
    torch::Tensor value;
    archive.read(name, value, is_buffer);
    TORCH_CHECK(value.sizes() == target.sizes(), "accelerate: load_state: ", where, name,
                " has shape ", value.sizes(), " in the checkpoint but ", target.sizes(),
                " in the model");
    pairs.emplace_back(target, value);
  };
  for (const auto &parameter : module.named_parameters(/*recurse=*/false)) {
    take(parameter.key(), parameter.value(), false);
  }
  for (const auto &buffer : module.named_buffers(/*recurse=*/false)) {
    take(buffer.key(), buffer.value(), true);
  }
  for (const auto &child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    archive.read(child.key(), child_archive);
    pair_module_state(*child.value(), child_archive, where + child.key() + ".", pairs);
  }
}

nlohmann::json read_manifest(const fs::path &directory) {
  const fs::path path = directory / detail::kCheckpointManifest;
  std::ifstream in(path);
  if (!in) {
    if (!fs::is_directory(directory)) {
      throw std::runtime_error("accelerate: load_state: there is no checkpoint at " +
                               directory.string());
    }
    throw std::runtime_error("accelerate: load_state: " + directory.string() +
                             " is not a complete checkpoint (it has no " +
                             detail::kCheckpointManifest + ", which save_state writes last)");
  }
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(in);
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: load_state: " + path.string() +
                             " is damaged: " + error.what());
  }
  // Compared as JSON values: value<int>() would convert a fraction or a huge number first.
  const auto field = [&](const char *key) {
    return manifest.is_object() && manifest.contains(key) ? manifest.at(key) : nlohmann::json();
  };
  const auto version = field("version");
  if (field("format") != kFormat || !version.is_number_integer() || version < kOldestVersion ||
      version > kVersion) {
    throw std::runtime_error("accelerate: load_state: " + path.string() +
                             " is not an accelerate checkpoint of version " +
                             std::to_string(kOldestVersion) + " to " + std::to_string(kVersion));
  }
  return manifest;
}

// The manifest entry of one file: its size and CRC-32C as save_state wrote them.
nlohmann::json digest_entry(const detail::FileDigest &digest) {
  return {{"bytes", digest.bytes}, {"crc32c", digest.crc32c}};
}

// Checks the files this process is about to read against the sizes and checksums the manifest
// holds, before anything is read: a damaged file is refused by name, and nothing changes.
// A version 1 manifest holds none: its files are read unchecked, as before.
void verify_files(const nlohmann::json &manifest, const fs::path &directory,
                  const std::vector<std::string> &names) {
  if (manifest.at("version") == kOldestVersion) {
    return;
  }
  const std::string where = (directory / detail::kCheckpointManifest).string();
  const auto files = manifest.find("files");
  if (files == manifest.end() || !files->is_object()) {
    throw std::runtime_error("accelerate: load_state: " + where +
                             " is damaged: it has no 'files' with their checksums");
  }
  for (const auto &name : names) {
    const auto entry = files->find(name);
    const auto number = [&](const char *key, uint64_t maximum) -> std::optional<uint64_t> {
      if (entry == files->end() || !entry->is_object() || !entry->contains(key) ||
          !entry->at(key).is_number_unsigned() || entry->at(key).get<uint64_t>() > maximum) {
        return std::nullopt;
      }
      return entry->at(key).get<uint64_t>();
    };
    const auto bytes = number("bytes", std::numeric_limits<uint64_t>::max());
    const auto crc = number("crc32c", std::numeric_limits<uint32_t>::max());
    if (!bytes || !crc) {
      throw std::runtime_error("accelerate: load_state: " + where +
                               " is damaged: it has no size "
                               "and checksum for " +
                               name);
    }
    const fs::path path = directory / name;
    detail::FileDigest found;
    try {
      found = detail::digest_file(path);
    } catch (const std::exception &error) {
      throw std::runtime_error("accelerate: load_state: " + std::string(error.what()));
    }
    if (found.bytes != *bytes) {
      throw std::runtime_error("accelerate: load_state: " + path.string() + " is damaged: it has " +
                               std::to_string(found.bytes) + " bytes where save_state wrote " +
                               std::to_string(*bytes) + " (truncated or overwritten)");
    }
    if (found.crc32c != *crc) {
      throw std::runtime_error("accelerate: load_state: " + path.string() +
                               " is damaged: its contents changed after save_state wrote it "
                               "(CRC-32C " +
                               std::to_string(found.crc32c) + ", saved " + std::to_string(*crc) +
                               ")");
    }
  }
}

// Every process's size and checksum of its own process file, on every process.
std::vector<detail::FileDigest> share_digests(const detail::ProcessState &process,
                                              const detail::FileDigest &mine) {
  if (!process.group) {
    return {mine};
  }
  auto table = torch::zeros({process.info.world_size, 2}, torch::kInt64);
  table[process.info.rank][0] = static_cast<int64_t>(mine.bytes);
  table[process.info.rank][1] = static_cast<int64_t>(mine.crc32c);
  table = table.to(process.device);
  process.group->sum(table, "save_state (sharing the checksums of the process files)");
  table = table.cpu();
  std::vector<detail::FileDigest> digests(process.info.world_size);
  for (int r = 0; r < process.info.world_size; ++r) {
    digests[r].bytes = static_cast<uint64_t>(table[r][0].item<int64_t>());
    digests[r].crc32c = static_cast<uint32_t>(table[r][1].item<int64_t>());
  }
  return digests;
}

// A whole number of the manifest's, refused rather than converted when it is missing, not a
// whole number or out of T's range (converting 1e300 or -1 would be undefined or wrong).
template <typename T>
T manifest_number(const nlohmann::json &manifest, const std::string &key,
                  const fs::path &directory) {
  const auto found = manifest.find(key);
  bool fits = found != manifest.end() && found->is_number_integer();
  if (fits && found->is_number_unsigned()) {
    fits = found->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  } else if (fits) {
    const auto value = found->get<int64_t>();
    fits = value >= 0 &&
           static_cast<uint64_t>(value) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  }
  if (!fits) {
    throw std::runtime_error(
        "accelerate: load_state: " + (directory / detail::kCheckpointManifest).string() +
        " is damaged: '" + key + "' is not a count");
  }
  return static_cast<T>(found->is_number_unsigned() ? found->get<uint64_t>()
                                                    : static_cast<uint64_t>(found->get<int64_t>()));
}

void require_count(const nlohmann::json &manifest, const std::string &kind, size_t here,
                   const fs::path &directory) {
  const auto saved = manifest_number<size_t>(manifest, kind, directory);
  if (saved != here) {
    throw std::runtime_error("accelerate: load_state: " + directory.string() + " holds " +
                             std::to_string(saved) + " " + kind + " but this program prepared " +
                             std::to_string(here) +
                             "; prepare the same objects, in the same "
                             "order, before loading");
  }
}

std::string save_checkpoint(const detail::ProcessState &process,
                            const detail::PreparedObjects &prepared,
                            const detail::StepPosition &position, const std::string &directory) {
  // What the program prepared and has not destroyed (a finished fold's objects are gone).
  const auto live = prepared.training.live();
  const bool main_process = process.info.rank == 0;
  const bool automatic = directory.empty();
  // Every process looks before any of them publishes (the first agree below orders it).
  const fs::path target = automatic ? detail::next_automatic_checkpoint(process.options.project_dir)
                                    : fs::path(directory);
  const fs::path staging = detail::staging_directory_for(target);

  agree(process, !main_process ? std::string() : attempt([&] {
          // Left over from a save that was interrupted: never part of a checkpoint.
          fs::remove_all(staging);
          fs::create_directories(staging);
        }),
        "save_state (creating " + staging.string() + ")");

  // Each file's size and CRC-32C, read back once it is on disk, for the manifest.
  std::map<std::string, detail::FileDigest> written;
  const auto write_file = [&](const std::string &name,
                              const std::function<void(const std::string &)> &write) {
    detail::write_checkpoint_file(staging / name, write);
    written[name] = detail::digest_file(staging / name);
  };
  agree(process, attempt([&] {
          write_file(process_file(process.info.rank), [&](const std::string &path) {
            save_process_state(prepared, position, path);
          });
          if (!main_process) {
            return;
          }
          for (size_t i = 0; i < live.models.size(); ++i) {
            write_file(file_for("model", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              live.models[i]->save(archive);
              archive.save_to(path);
            });
          }
          for (size_t i = 0; i < live.optimizers.size(); ++i) {
            write_file(file_for("optimizer", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              live.optimizers[i]->save(archive);
              archive.save_to(path);
            });
          }
          for (size_t i = 0; i < live.schedulers.size(); ++i) {
            write_file(file_for("scheduler", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              archive.write("step_count", torch::tensor(static_cast<int64_t>(
                                              SchedulerPosition::of(*live.schedulers[i]))));
              archive.save_to(path);
            });
          }
          if (prepared.scaler) {
            write_file("scaler.pt", [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              prepared.scaler->save(archive);
              archive.save_to(path);
            });
          }
        }),
        "save_state (writing " + staging.string() + ")");
  const auto process_digests = share_digests(process, written.at(process_file(process.info.rank)));

  agree(process, !main_process ? std::string() : attempt([&] {
          nlohmann::json files = nlohmann::json::object();
          for (const auto &[name, digest] : written) {
            files[name] = digest_entry(digest);
          }
          for (int r = 0; r < process.info.world_size; ++r) {
            files[process_file(r)] = digest_entry(process_digests[r]);
          }
          const nlohmann::json manifest = {
              {"format", kFormat},
              {"version", kVersion},
              {"world_size", process.info.world_size},
              {"models", live.models.size()},
              {"optimizers", live.optimizers.size()},
              {"schedulers", live.schedulers.size()},
              {"loaders", live_loaders(prepared).size()},
              {"mixed_precision", process.options.mixed_precision},
              {"global_step", position.global_step},
              {"files", files},
          };
          detail::write_checkpoint_file(staging / detail::kCheckpointManifest,
                                        [&](const std::string &path) {
                                          std::ofstream out(path, std::ios::trunc);
                                          out << manifest.dump(2) << '\n';
                                          out.close();
                                          if (!out) {
                                            throw std::runtime_error("the write failed");
                                          }
                                        });
          if (!target.parent_path().empty()) {
            fs::create_directories(target.parent_path());
          }
          detail::publish_directory(staging, target);
          if (automatic) {
            detail::rotate_automatic_checkpoints(process.options.project_dir,
                                                 process.options.total_limit);
          }
        }),
        "save_state (publishing " + target.string() + ")");
  return target.string();
}

std::string load_checkpoint(const detail::ProcessState &process,
                            const detail::PreparedObjects &prepared, detail::StepPosition &position,
                            const std::string &directory) {
  const auto live = prepared.training.live();
  fs::path source = directory;
  if (directory.empty()) {
    const auto found = detail::automatic_checkpoints(process.options.project_dir);
    if (found.empty()) {
      throw std::runtime_error("accelerate: load_state: no complete checkpoint under " +
                               (fs::path(process.options.project_dir) / "checkpoints").string());
    }
    source = found.back();
  }
  const auto manifest = read_manifest(source);
  const int saved_world = manifest_number<int>(manifest, "world_size", source);
  if (saved_world != process.info.world_size) {
    throw std::runtime_error(
        "accelerate: load_state: " + source.string() + " was saved by " +
        std::to_string(saved_world) + " processes and this job has " +
        std::to_string(process.info.world_size) +
        ". A checkpoint's data positions and random generators belong to its processes, so it "
        "resumes only at the same world size; to start over at another size, load the model "
        "files (model_<i>.pt, torch::load) and begin a new epoch");
  }
  require_count(manifest, "models", live.models.size(), source);
  require_count(manifest, "optimizers", live.optimizers.size(), source);
  require_count(manifest, "schedulers", live.schedulers.size(), source);
  std::vector<std::string> to_read;
  for (size_t i = 0; i < live.models.size(); ++i) {
    to_read.push_back(file_for("model", i));
  }
  for (size_t i = 0; i < live.optimizers.size(); ++i) {
    to_read.push_back(file_for("optimizer", i));
  }
  for (size_t i = 0; i < live.schedulers.size(); ++i) {
    to_read.push_back(file_for("scheduler", i));
  }
  const bool read_scaler = prepared.scaler && fs::exists(source / "scaler.pt");
  if (read_scaler) {
    to_read.push_back("scaler.pt");
  }
  to_read.push_back(process_file(process.info.rank));
  verify_files(manifest, source, to_read);

  // Everything is read and checked first, then restored (undoing what the last checks, made
  // while restoring, got to): a refused checkpoint changes nothing.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> model_state;
  for (size_t i = 0; i < live.models.size(); ++i) {
    torch::serialize::InputArchive archive;
    load_archive(archive, source / file_for("model", i), process.device);
    pair_module_state(*live.models[i], archive, "model " + std::to_string(i) + " ", model_state);
  }
  std::vector<torch::serialize::InputArchive> optimizer_archives(live.optimizers.size());
  for (size_t i = 0; i < live.optimizers.size(); ++i) {
    load_archive(optimizer_archives[i], source / file_for("optimizer", i), process.device);
  }
  std::vector<unsigned> scheduler_positions;
  for (size_t i = 0; i < live.schedulers.size(); ++i) {
    torch::serialize::InputArchive archive;
    load_archive(archive, source / file_for("scheduler", i));
    scheduler_positions.push_back(static_cast<unsigned>(read_int(archive, "step_count")));
  }
  std::optional<torch::serialize::InputArchive> scaler_archive;
  if (read_scaler) {
    scaler_archive.emplace();
    load_archive(*scaler_archive, source / "scaler.pt");
  }
  SavedProcessState saved = read_process_state(prepared, source / process_file(process.info.rank));

  // What can still refuse the checkpoint goes first, undone if it does; then what cannot.
  const Undo undo(prepared, live);
  std::string file;
  try {
    for (size_t i = 0; i < live.optimizers.size(); ++i) {
      file = file_for("optimizer", i);
      live.optimizers[i]->load(optimizer_archives[i]);
    }
    if (scaler_archive) {
      file = "scaler.pt";
      prepared.scaler->load(*scaler_archive);
    }
    file = process_file(process.info.rank);
    set_generators(saved.cpu_rng, saved.cuda_rng);
  } catch (const std::exception &error) {
    undo.restore(prepared, live);
    throw std::runtime_error("accelerate: load_state: " + (source / file).string() +
                             " does not hold what this program prepared: " + error.what());
  }
  {
    torch::NoGradGuard no_grad;
    for (auto &[target, value] : model_state) {
      target.copy_(value);
    }
  }
  for (size_t i = 0; i < live.schedulers.size(); ++i) {
    SchedulerPosition::of(*live.schedulers[i]) = scheduler_positions[i];
  }
  apply_process_state(prepared, position, std::move(saved));
  return source.string();
}

} // namespace

// The Accelerator hands the checkpoint code what it saves, and nothing else.
std::string Accelerator::save_state(const std::string &directory) {
  const auto &rt = *runtime_;
  return save_checkpoint(rt.process, rt.prepared, rt.gradients.position, directory);
}

std::string Accelerator::load_state(const std::string &directory) {
  auto &rt = *runtime_;
  return load_checkpoint(rt.process, rt.prepared, rt.gradients.position, directory);
}

} // namespace accelerate
