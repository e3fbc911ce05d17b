#include "training_objects.h"

#include <algorithm>
#include <unordered_set>

namespace accelerate::detail {
namespace {

std::vector<WeakTensor> weak_parameters(const torch::optim::Optimizer &optimizer) {
  std::vector<WeakTensor> parameters;
  for (const auto &group : optimizer.param_groups()) {
    for (const auto &parameter : group.params()) {
      parameters.push_back(weak_tensor(parameter));
    }
  }
  return parameters;
}

template <typename T, typename Dead> void erase_if(std::vector<T> &items, Dead dead) {
  items.erase(std::remove_if(items.begin(), items.end(), dead), items.end());
}

} // namespace

bool all_alive(const std::vector<WeakTensor> &tensors) {
  return std::none_of(tensors.begin(), tensors.end(),
                      [](const WeakTensor &tensor) { return tensor.expired(); });
}

bool TrainingObjects::Model::alive() const {
  if (!by_value) {
    return !owner.expired();
  }
  return all_alive(tensors) && std::none_of(children.begin(), children.end(),
                                            [](const auto &child) { return child.expired(); });
}

bool TrainingObjects::Optimizer::alive() const { return all_alive(parameters); }

bool TrainingObjects::scheduler_alive(const Scheduler &scheduler) const {
  return std::any_of(optimizers_.begin(), optimizers_.end(), [&](const Optimizer &optimizer) {
    return optimizer.id == scheduler.optimizer_id && optimizer.alive();
  });
}

void TrainingObjects::sweep() {
  erase_if(models_, [](const Model &model) { return !model.alive(); });
  erase_if(optimizers_, [](const Optimizer &optimizer) { return !optimizer.alive(); });
  erase_if(schedulers_, [&](const Scheduler &scheduler) { return !scheduler_alive(scheduler); });
}

LiveObjects TrainingObjects::live() const {
  LiveObjects live;
  for (const auto &model : models_) {
    if (model.alive()) {
      live.models.push_back(model.module);
    }
  }
  for (const auto &optimizer : optimizers_) {
    if (optimizer.alive()) {
      live.optimizers.push_back(optimizer.optimizer);
    }
  }
  for (const auto &scheduler : schedulers_) {
    if (scheduler_alive(scheduler)) {
      live.schedulers.push_back(scheduler.scheduler);
    }
  }
  return live;
}

bool TrainingObjects::add_model(torch::nn::Module &module,
                                const std::shared_ptr<torch::nn::Module> &owner) {
  sweep();
  // Two live objects never share an address, and the dead ones are gone.
  if (std::any_of(models_.begin(), models_.end(),
                  [&](const Model &model) { return model.module == &module; })) {
    return false;
  }
  Model model{&module, owner, owner == nullptr, {}, {}};
  if (model.by_value) {
    for (const auto &parameter : module.parameters()) {
      model.tensors.push_back(weak_tensor(parameter));
    }
    for (const auto &buffer : module.buffers()) {
      model.tensors.push_back(weak_tensor(buffer));
    }
    for (const auto &child : module.children()) {
      model.children.push_back(child);
    }
  }
  models_.push_back(std::move(model));
  return true;
}

void TrainingObjects::add_optimizer(torch::optim::Optimizer &optimizer) {
  sweep();
  auto parameters = weak_parameters(optimizer);
  std::unordered_set<const c10::TensorImpl *> mine;
  for (const auto &parameter : parameters) {
    mine.insert(parameter._unsafe_get_target());
  }
  const auto overlaps = [&](const Optimizer &older) {
    return older.optimizer == &optimizer ||
           std::any_of(older.parameters.begin(), older.parameters.end(),
                       [&](const auto &p) { return mine.count(p._unsafe_get_target()) != 0; });
  };
  auto first = std::find_if(optimizers_.begin(), optimizers_.end(), overlaps);
  if (first != optimizers_.end() && first->optimizer == &optimizer) {
    first->parameters = std::move(parameters); // prepared again: it keeps its place
    last_optimizer_id_ = first->id;
    return;
  }
  const uint64_t id = next_optimizer_id_++;
  last_optimizer_id_ = id;
  if (first == optimizers_.end()) {
    optimizers_.push_back({&optimizer, std::move(parameters), id});
    return;
  }
  // It takes the place of the first optimizer it shares a parameter with; the others go, and
  // the schedulers of all of them with them.
  std::unordered_set<uint64_t> replaced;
  for (auto &older : optimizers_) {
    if (overlaps(older)) {
      replaced.insert(older.id);
    }
  }
  *first = {&optimizer, std::move(parameters), id};
  erase_if(optimizers_, [&](const Optimizer &older) { return replaced.count(older.id) != 0; });
  erase_if(schedulers_,
           [&](const Scheduler &scheduler) { return replaced.count(scheduler.optimizer_id) != 0; });
}

void TrainingObjects::add_scheduler(torch::optim::LRScheduler &scheduler) {
  sweep();
  if (std::any_of(schedulers_.begin(), schedulers_.end(),
                  [&](const Scheduler &older) { return older.scheduler == &scheduler; })) {
    return;
  }
  // A scheduler holds its optimizer by reference, out of reach (protected): it is bound to the
  // optimizer prepared last, and goes when that one goes.
  const bool bound =
      std::any_of(optimizers_.begin(), optimizers_.end(),
                  [&](const auto &optimizer) { return optimizer.id == last_optimizer_id_; });
  TORCH_CHECK(bound, "accelerate: prepare a scheduler together with its optimizer "
                     "(accelerator.prepare(model, optimizer, scheduler)) or after it");
  schedulers_.push_back({&scheduler, last_optimizer_id_});
}

} // namespace accelerate::detail
