// Accelerator::save_state and load_state: what a checkpoint holds, and the protocol by which
// every process writes its part. The directory handling is in checkpoint_directory.cpp.
//
// A checkpoint directory holds
//   model_<i>.pt, optimizer_<i>.pt, scheduler_<i>.pt, scaler.pt   from the main process (the
//       prepared objects are the same on every process)
//   process_<rank>.pt   each process's random generators, loader positions and step counters
//   checkpoint.json     written last: what the checkpoint holds; without it, it is no checkpoint
#include "accelerate/accelerator.h"

#include "checkpoint_directory.h"
#include "runtime.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace accelerate {
namespace fs = std::filesystem;
namespace {

constexpr const char *kFormat = "accelerate-cpp-checkpoint";
constexpr int kVersion = 1;

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
void agree(detail::Runtime &rt, const std::string &my_error, const std::string &what) {
  if (!rt.group) {
    if (!my_error.empty()) {
      throw std::runtime_error(my_error);
    }
    return;
  }
  std::vector<at::Tensor> failed{torch::zeros({rt.info.world_size}, torch::kInt32)};
  failed[0][rt.info.rank] = my_error.empty() ? 0 : 1;
  failed[0] = failed[0].to(rt.device);
  rt.group->wait(rt.group->backend().allreduce(failed), what);
  const auto flags = failed[0].cpu();
  if (!my_error.empty()) {
    throw std::runtime_error(my_error);
  }
  std::ostringstream ranks;
  for (int r = 0; r < rt.info.world_size; ++r) {
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

void save_process_state(detail::Runtime &rt, const std::string &path) {
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
  size_t index = 0;
  for (const auto &weak : rt.loader_context->loaders) {
    const std::string key = "loader_" + std::to_string(index++) + "/";
    const auto progress = weak.lock();
    const detail::LoaderProgress empty;
    const auto &p = progress ? *progress : empty;
    archive.write(key + "order", torch::tensor(p.order, torch::kInt64));
    archive.write(key + "delivered", torch::tensor(static_cast<int64_t>(p.delivered)));
    archive.write(key + "batches", torch::tensor(static_cast<int64_t>(p.batches)));
    archive.write(key + "epochs_begun", torch::tensor(p.epochs_begun));
  }
  archive.write("accumulation_step", torch::tensor(static_cast<int64_t>(rt.accumulation_step)));
  archive.write("global_step", torch::tensor(rt.global_step));
  archive.write("unapplied_gradients", torch::tensor(static_cast<int64_t>(rt.unapplied_gradients)));
  archive.save_to(path);
}

int64_t read_int(torch::serialize::InputArchive &archive, const std::string &key) {
  torch::Tensor value;
  archive.read(key, value);
  return value.item<int64_t>();
}

void load_process_state(detail::Runtime &rt, const fs::path &path) {
  torch::serialize::InputArchive archive;
  archive.load_from(path.string());
  {
    torch::Tensor state;
    archive.read("rng/cpu", state);
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  auto cuda = cuda_generators();
  const auto saved_cuda = static_cast<size_t>(read_int(archive, "rng/cuda_count"));
  for (size_t i = 0; i < std::min(saved_cuda, cuda.size()); ++i) {
    torch::Tensor state;
    archive.read("rng/cuda_" + std::to_string(i), state);
    std::lock_guard<std::mutex> lock(cuda[i].mutex());
    cuda[i].set_state(state);
  }
  size_t index = 0;
  for (const auto &weak : rt.loader_context->loaders) {
    const std::string key = "loader_" + std::to_string(index++) + "/";
    const auto progress = weak.lock();
    if (!progress) {
      continue;
    }
    torch::Tensor order;
    archive.read(key + "order", order);
    order = order.contiguous();
    progress->order.assign(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
    progress->delivered = static_cast<size_t>(read_int(archive, key + "delivered"));
    progress->batches = static_cast<size_t>(read_int(archive, key + "batches"));
    progress->epochs_begun = read_int(archive, key + "epochs_begun");
    progress->resume = progress->delivered < progress->batches;
  }
  rt.loader_context->end_of_dataloader = false;
  rt.accumulation_step = static_cast<int>(read_int(archive, "accumulation_step"));
  rt.global_step = read_int(archive, "global_step");
  rt.unapplied_gradients = read_int(archive, "unapplied_gradients") != 0;
}

// Copies the archive's values into the module's own tensors, so that the optimizer and the
// gradient synchronisation keep pointing at the parameters they hold.
void copy_module_state(torch::nn::Module &module, torch::serialize::InputArchive &archive,
                       const std::string &where) {
  torch::NoGradGuard no_grad;
  const auto copy = [&](const std::string &name, torch::Tensor &target, bool is_buffer) {
    torch::Tensor value;
    archive.read(name, value, is_buffer);
    TORCH_CHECK(value.sizes() == target.sizes(), "accelerate: load_state: ", where, name,
                " has shape ", value.sizes(), " in the checkpoint but ", target.sizes(),
                " in the model");
    target.copy_(value);
  };
  for (auto &parameter : module.named_parameters(/*recurse=*/false)) {
    copy(parameter.key(), parameter.value(), false);
  }
  for (auto &buffer : module.named_buffers(/*recurse=*/false)) {
    copy(buffer.key(), buffer.value(), true);
  }
  for (const auto &child : module.named_children()) {
    torch::serialize::InputArchive child_archive;
    archive.read(child.key(), child_archive);
    copy_module_state(*child.value(), child_archive, where + child.key() + ".");
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
  if (manifest.value("format", "") != kFormat || manifest.value("version", 0) != kVersion) {
    throw std::runtime_error("accelerate: load_state: " + path.string() +
                             " is not an accelerate checkpoint of version " +
                             std::to_string(kVersion));
  }
  return manifest;
}

void require_count(const nlohmann::json &manifest, const std::string &kind, size_t here,
                   const fs::path &directory) {
  const auto saved = manifest.at(kind).get<size_t>();
  if (saved != here) {
    throw std::runtime_error("accelerate: load_state: " + directory.string() + " holds " +
                             std::to_string(saved) + " " + kind + " but this program prepared " +
                             std::to_string(here) +
                             "; prepare the same objects, in the same "
                             "order, before loading");
  }
}

} // namespace

std::string Accelerator::save_state(const std::string &directory) {
  auto &rt = *runtime_;
  const bool automatic = directory.empty();
  // Every process looks before any of them publishes (the first agree below orders it).
  const fs::path target =
      automatic ? detail::next_automatic_checkpoint(rt.options.project_dir) : fs::path(directory);
  const fs::path staging = detail::staging_directory_for(target);

  agree(rt, !is_main_process() ? std::string() : attempt([&] {
          // Left over from a save that was interrupted: never part of a checkpoint.
          fs::remove_all(staging);
          fs::create_directories(staging);
        }),
        "save_state (creating " + staging.string() + ")");

  agree(rt, attempt([&] {
          detail::write_durably(staging / process_file(rt.info.rank),
                                [&](const std::string &path) { save_process_state(rt, path); });
          if (!is_main_process()) {
            return;
          }
          for (size_t i = 0; i < rt.models.size(); ++i) {
            detail::write_durably(staging / file_for("model", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              rt.models[i]->save(archive);
              archive.save_to(path);
            });
          }
          for (size_t i = 0; i < rt.optimizers.size(); ++i) {
            detail::write_durably(staging / file_for("optimizer", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              rt.optimizers[i]->save(archive);
              archive.save_to(path);
            });
          }
          for (size_t i = 0; i < rt.schedulers.size(); ++i) {
            detail::write_durably(staging / file_for("scheduler", i), [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              archive.write("step_count", torch::tensor(static_cast<int64_t>(
                                              SchedulerPosition::of(*rt.schedulers[i]))));
              archive.save_to(path);
            });
          }
          if (rt.scaler) {
            detail::write_durably(staging / "scaler.pt", [&](const std::string &path) {
              torch::serialize::OutputArchive archive;
              rt.scaler->save(archive);
              archive.save_to(path);
            });
          }
        }),
        "save_state (writing " + staging.string() + ")");

  agree(rt, !is_main_process() ? std::string() : attempt([&] {
          const nlohmann::json manifest = {
              {"format", kFormat},
              {"version", kVersion},
              {"world_size", rt.info.world_size},
              {"models", rt.models.size()},
              {"optimizers", rt.optimizers.size()},
              {"schedulers", rt.schedulers.size()},
              {"loaders", rt.loader_context->loaders.size()},
              {"mixed_precision", rt.mixed_precision},
              {"global_step", rt.global_step},
          };
          detail::write_durably(staging / detail::kCheckpointManifest,
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
            detail::rotate_automatic_checkpoints(rt.options.project_dir, rt.options.total_limit);
          }
        }),
        "save_state (publishing " + target.string() + ")");
  return target.string();
}

std::string Accelerator::load_state(const std::string &directory) {
  auto &rt = *runtime_;
  fs::path source = directory;
  if (directory.empty()) {
    const auto found = detail::automatic_checkpoints(rt.options.project_dir);
    if (found.empty()) {
      throw std::runtime_error("accelerate: load_state: no complete checkpoint under " +
                               (fs::path(rt.options.project_dir) / "checkpoints").string());
    }
    source = found.back();
  }
  const auto manifest = read_manifest(source);
  const int saved_world = manifest.at("world_size").get<int>();
  if (saved_world != rt.info.world_size) {
    throw std::runtime_error(
        "accelerate: load_state: " + source.string() + " was saved by " +
        std::to_string(saved_world) + " processes and this job has " +
        std::to_string(rt.info.world_size) +
        ". A checkpoint's data positions and random generators belong to its processes, so it "
        "resumes only at the same world size; to start over at another size, load the model "
        "files (model_<i>.pt, torch::load) and begin a new epoch");
  }
  require_count(manifest, "models", rt.models.size(), source);
  require_count(manifest, "optimizers", rt.optimizers.size(), source);
  require_count(manifest, "schedulers", rt.schedulers.size(), source);
  require_count(manifest, "loaders", rt.loader_context->loaders.size(), source);

  for (size_t i = 0; i < rt.models.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from((source / file_for("model", i)).string(), rt.device);
    copy_module_state(*rt.models[i], archive, "model " + std::to_string(i) + " ");
  }
  for (size_t i = 0; i < rt.optimizers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from((source / file_for("optimizer", i)).string(), rt.device);
    rt.optimizers[i]->load(archive);
  }
  for (size_t i = 0; i < rt.schedulers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from((source / file_for("scheduler", i)).string());
    SchedulerPosition::of(*rt.schedulers[i]) =
        static_cast<unsigned>(read_int(archive, "step_count"));
  }
  if (rt.scaler && fs::exists(source / "scaler.pt")) {
    torch::serialize::InputArchive archive;
    archive.load_from((source / "scaler.pt").string());
    rt.scaler->load(archive);
  }
  load_process_state(rt, source / process_file(rt.info.rank));
  return source.string();
}

} // namespace accelerate
