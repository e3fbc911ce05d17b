#include "grad_scaler.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/_amp_update_scale.h>

#include <map>
#include <set>

namespace accelerate::detail {

GradScaler::GradScaler(const GradScalerOptions &options, const torch::Device &device)
    : options_(options),
      scale_(torch::full({1}, options.init_scale, torch::dtype(torch::kFloat32).device(device))),
      growth_tracker_(torch::zeros({1}, torch::dtype(torch::kInt32).device(device))) {
  TORCH_CHECK(options.init_scale > 0 && options.growth_factor > 1 && options.backoff_factor > 0 &&
                  options.backoff_factor < 1 && options.growth_interval > 0,
              "accelerate: grad_scaler needs init_scale > 0, growth_factor > 1, 0 < "
              "backoff_factor < 1 and growth_interval > 0");
}

torch::Tensor GradScaler::scale(const torch::Tensor &loss) const {
  return loss * scale_.to(loss.device());
}

void GradScaler::unscale(const std::vector<torch::Tensor> &parameters) {
  auto found_inf = torch::zeros({1}, scale_.options());
  // The kernel takes the gradients of one device at a time; the reciprocal is taken in double
  // and rounded once, as Python's GradScaler does.
  const auto inverse = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  std::map<std::string, std::vector<at::Tensor>> by_device;
  for (const auto &parameter : parameters) {
    const auto &grad = parameter.grad();
    if (!grad.defined() || !unscaled_.emplace(parameter.unsafeGetTensorImpl(), found_inf).second) {
      continue;
    }
    TORCH_CHECK(!grad.is_sparse(), "accelerate: fp16 loss scaling does not handle sparse "
                                   "gradients");
    by_device[grad.device().str()].push_back(grad);
  }
  for (auto &[device, grads] : by_device) {
    auto device_found_inf = found_inf.to(grads.front().device());
    at::_amp_foreach_non_finite_check_and_unscale_(grads, device_found_inf,
                                                   inverse.to(grads.front().device()));
    found_inf += device_found_inf.to(found_inf.device()); // in place: unscaled_ shares it
  }
}

void GradScaler::unscale(torch::optim::Optimizer &optimizer) {
  for (const auto &group : optimizer.param_groups()) {
    unscale(group.params());
  }
}

torch::Tensor GradScaler::found_inf(torch::optim::Optimizer &optimizer) {
  unscale(optimizer);
  auto found = torch::zeros({1}, scale_.options());
  std::set<const c10::TensorImpl *> counted; // a flag shared by several parameters counts once
  for (const auto &group : optimizer.param_groups()) {
    for (const auto &parameter : group.params()) {
      const auto flag = unscaled_.find(parameter.unsafeGetTensorImpl());
      if (flag != unscaled_.end() && counted.insert(flag->second.unsafeGetTensorImpl()).second) {
        found += flag->second;
      }
    }
  }
  return found;
}

bool GradScaler::step(torch::optim::Optimizer &optimizer) {
  // Gradients are all-reduced before this point, so every process sees the same overflow and
  // takes the same decision without another collective.
  if (found_inf(optimizer).item<float>() != 0.0f) {
    return false;
  }
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (unscaled_.empty()) {
    return; // nothing was unscaled in this step: nothing to learn from it
  }
  auto found_inf = torch::zeros({1}, scale_.options());
  std::set<const c10::TensorImpl *> counted;
  for (const auto &[parameter, flag] : unscaled_) {
    if (counted.insert(flag.unsafeGetTensorImpl()).second) {
      found_inf += flag;
    }
  }
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor,
                         options_.backoff_factor, options_.growth_interval);
  unscaled_.clear();
}

double GradScaler::current_scale() const { return scale_.item<double>(); }

void GradScaler::save(torch::serialize::OutputArchive &archive) const {
  archive.write("scale", scale_.cpu());
  archive.write("growth_tracker", growth_tracker_.cpu());
}

void GradScaler::load(torch::serialize::InputArchive &archive) {
  torch::Tensor scale, growth_tracker;
  archive.read("scale", scale);
  archive.read("growth_tracker", growth_tracker);
  scale_.copy_(scale);
  growth_tracker_.copy_(growth_tracker);
  unscaled_.clear();
}

} // namespace accelerate::detail
