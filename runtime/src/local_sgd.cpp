// Local SGD: gradients stay on their process, parameters are averaged every K steps
// (accelerate/local_sgd.h; docs/runtime.md, "LocalSGD").
#include "accelerate/local_sgd.h"

#include "runtime.h"

#include <exception>
#include <iostream>
#include <map>
#include <stdexcept>
#include <unordered_set>

namespace accelerate {

namespace detail {

void average_parameters(Runtime &rt) {
  ProcessGroup *group = rt.process.group.get();
  if (group == nullptr) {
    return;
  }
  torch::NoGradGuard no_grad;
  // The same parameters in the same order on every process: the models in order of prepare.
  std::vector<torch::Tensor> parameters;
  std::unordered_set<const c10::TensorImpl *> seen;
  for (torch::nn::Module *model : rt.prepared.training.live().models) {
    for (const auto &parameter : model->parameters()) {
      if (seen.insert(parameter.unsafeGetTensorImpl()).second) {
        parameters.push_back(parameter);
      }
    }
  }
  // One exchange per dtype and device, of all those parameters flattened together.
  std::map<std::pair<int, std::string>, std::vector<torch::Tensor>> groups;
  for (const auto &parameter : parameters) {
    groups[{static_cast<int>(parameter.scalar_type()), parameter.device().str()}].push_back(
        parameter);
  }
  const double world = static_cast<double>(group->size());
  for (auto &[key, members] : groups) {
    std::vector<torch::Tensor> flat_views;
    for (const auto &parameter : members) {
      flat_views.push_back(parameter.detach().reshape({-1}));
    }
    torch::Tensor flat = torch::cat(flat_views);
    group->all_reduce(flat, c10d::ReduceOp::SUM, "Local SGD's parameter average");
    flat.div_(world);
    int64_t offset = 0;
    for (auto &parameter : members) {
      const int64_t count = parameter.numel();
      parameter.detach().copy_(flat.narrow(0, offset, count).view_as(parameter));
      offset += count;
    }
  }
}

} // namespace detail

namespace {
void communicate_as_now(detail::GradientState &gradients) {
  for (auto &sync : gradients.live_syncs()) {
    sync->set_enabled(gradients.communicates());
  }
}
} // namespace

LocalSGD::LocalSGD(Accelerator &accelerator, int local_sgd_steps, bool enabled)
    : accelerator_(accelerator), local_sgd_steps_(local_sgd_steps), enabled_(enabled),
      uncaught_(std::uncaught_exceptions()) {
  if (local_sgd_steps < 1) {
    throw std::invalid_argument("accelerate: LocalSGD takes local_sgd_steps of at least 1, not " +
                                std::to_string(local_sgd_steps));
  }
  auto &gradients = accelerator_.runtime().gradients;
  if (enabled_ && gradients.local_sgd_run) {
    throw std::logic_error("accelerate: a LocalSGD inside a run that does Local SGD already "
                           "(Options::local_sgd_steps, ACCELERATE_LOCAL_SGD_STEPS or accel launch "
                           "--local_sgd_steps): use one or the other");
  }
  if (enabled_) {
    ++gradients.local_sgd_scopes;
    communicate_as_now(gradients);
  }
}

void LocalSGD::step() {
  ++steps_;
  if (enabled_ && steps_ % local_sgd_steps_ == 0) {
    detail::average_parameters(accelerator_.runtime());
  }
}

LocalSGD::~LocalSGD() {
  if (!enabled_) {
    return;
  }
  auto &rt = accelerator_.runtime();
  // Leaving because of an exception: the other processes may never get here, and a
  // collective now would wait for them forever.
  if (std::uncaught_exceptions() == uncaught_) {
    try {
      detail::average_parameters(rt);
    } catch (const std::exception &error) {
      std::cerr << "accelerate: LocalSGD could not average the parameters at its end: "
                << error.what() << "\n";
    }
  }
  --rt.gradients.local_sgd_scopes;
  communicate_as_now(rt.gradients);
}

} // namespace accelerate
