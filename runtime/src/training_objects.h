// What the program handed to prepare: models, optimizers and schedulers, held without keeping
// them alive, so that a training loop can make and prepare a new model and optimizer per fold
// (k-fold, sweeps, several models one after another) and let the old ones die. See
// docs/design.md, "Prepared objects die with their scope", also for what cannot be noticed (an
// optimizer destroyed while its model lives on, until an optimizer over its parameters is
// prepared).
//
// - A model held by a shared_ptr (a TORCH_MODULE holder, std::shared_ptr<M>) is followed by a
//   weak_ptr. One held by value is followed through weak references to its tensors and
//   submodules: it counts as gone as soon as any of them is (they die with it).
// - An optimizer is followed through weak references to its parameters: once any is gone, so
//   is the optimizer (it held them). A newly prepared optimizer that shares a parameter with an
//   older one replaces it (two optimizers stepping one parameter is never what a program that
//   prepares them one after the other means).
// - A scheduler follows the optimizer prepared last before it: it goes when that one goes.
//
// Preparing an object again changes nothing here. What dies is dropped before each use, so
// checkpoints hold the live objects, in the order they were first prepared.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace accelerate::detail {

using WeakTensor = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;

/// The live objects, in the order of prepare, for one use (a checkpoint): valid until the
/// program next destroys one of them.
struct LiveObjects {
  std::vector<torch::nn::Module *> models;
  std::vector<torch::optim::Optimizer *> optimizers;
  std::vector<torch::optim::LRScheduler *> schedulers;
};

class TrainingObjects {
public:
  /// Records a model; `owner` is the shared_ptr that holds it, null for a model held by value.
  /// Returns false when it was prepared already.
  bool add_model(torch::nn::Module &module, const std::shared_ptr<torch::nn::Module> &owner);
  /// Records an optimizer, replacing any older one that shares a parameter with it.
  void add_optimizer(torch::optim::Optimizer &optimizer);
  /// Records a scheduler, bound to the optimizer recorded last; refused when there is none.
  void add_scheduler(torch::optim::LRScheduler &scheduler);

  /// Drops what is gone.
  void sweep();
  /// The objects that are alive now (sweep() without changing the records).
  LiveObjects live() const;

private:
  struct Model {
    torch::nn::Module *module;
    std::weak_ptr<torch::nn::Module> owner; ///< expired from the start for a model by value
    bool by_value;
    std::vector<WeakTensor> tensors;                        ///< by value: parameters, buffers
    std::vector<std::weak_ptr<torch::nn::Module>> children; ///< by value: its submodules
    bool alive() const;
  };
  struct Optimizer {
    torch::optim::Optimizer *optimizer;
    std::vector<WeakTensor> parameters;
    uint64_t id; ///< what its schedulers refer to
    bool alive() const;
  };
  struct Scheduler {
    torch::optim::LRScheduler *scheduler;
    uint64_t optimizer_id;
  };

  bool scheduler_alive(const Scheduler &scheduler) const;

  std::vector<Model> models_;
  std::vector<Optimizer> optimizers_;
  std::vector<Scheduler> schedulers_;
  uint64_t next_optimizer_id_ = 1;
  uint64_t last_optimizer_id_ = 0; ///< the optimizer recorded last (0: none)
};

/// `tensor`, held weakly.
inline WeakTensor weak_tensor(const torch::Tensor &tensor) {
  return WeakTensor(tensor.getIntrusivePtr());
}

/// Whether every tensor is still alive.
bool all_alive(const std::vector<WeakTensor> &tensors);

} // namespace accelerate::detail
