// Collectives on tensors (gather, gather_for_metrics, reduce, broadcast, pad_across_processes)
// and on numbers (reduce).
// Each checks first that every process calls the same collective with a tensor of the same
// dtype, device and shape (collective_calls.h), so a mismatch is an error naming every rank's
// call instead of a hang or garbage; in debug mode the number reduces do too.
#include "accelerate/accelerator.h"

#include "collective_calls.h"
#include "runtime.h"

#include <sstream>

namespace accelerate {
namespace {

using detail::Collective;
using detail::require_same_calls;

c10d::ReduceOp reduce_op(const std::string &op) {
  if (op == "sum" || op == "mean") {
    return c10d::ReduceOp::SUM;
  }
  if (op == "max") {
    return c10d::ReduceOp::MAX;
  }
  if (op == "min") {
    return c10d::ReduceOp::MIN;
  }
  throw std::invalid_argument(
      "accelerate: reduce takes \"sum\", \"mean\", \"max\" or \"min\", not \"" + op + "\"");
}

} // namespace

torch::Tensor Accelerator::gather(const torch::Tensor &tensor) {
  auto input = tensor.dim() == 0 ? tensor.unsqueeze(0) : tensor;
  auto *group = runtime_->process.group.get();
  if (group == nullptr) {
    return input.clone();
  }
  require_same_calls(*group, Collective::Gather, &input);
  return torch::cat(group->all_gather(input.contiguous(), "gather"), 0);
}

torch::Tensor Accelerator::gather_for_metrics(const torch::Tensor &tensor) {
  auto gathered = gather(tensor);
  const auto &context = *runtime_->prepared.loader_context;
  // On the last batch of an evenly sharded epoch, only the first `remainder` rows are real
  // samples; the rest repeat the start of the epoch.
  if (context.end_of_dataloader && context.remainder > 0 && context.remainder < gathered.size(0)) {
    return gathered.narrow(0, 0, context.remainder);
  }
  return gathered;
}

torch::Tensor Accelerator::reduce(const torch::Tensor &tensor, const std::string &op) {
  const auto which = reduce_op(op);
  auto result = tensor.clone();
  auto *group = runtime_->process.group.get();
  if (group != nullptr) {
    require_same_calls(*group, Collective::Reduce, &tensor);
    group->all_reduce(result, which, "reduce");
  }
  if (op == "mean") {
    result = result.is_floating_point() ? result.div_(num_processes())
                                        : result.to(torch::kFloat64).div_(num_processes());
  }
  return result;
}

namespace {

// A number combines as a tensor of one element: summed (and divided for "mean"), or its
// largest or smallest value across the processes.
void combine_number(detail::ProcessGroup &group, torch::Tensor &number, const std::string &op,
                    bool debug) {
  const auto which = reduce_op(op);
  if (debug) {
    require_same_calls(group, Collective::ReduceNumber, &number);
  }
  if (which == c10d::ReduceOp::SUM) {
    group.sum(number, "reduce of a number");
  } else {
    group.all_reduce(number, which, "reduce of a number");
  }
}

} // namespace

int64_t Accelerator::reduce_integer(int64_t value, const std::string &op) {
  reduce_op(op); // an unknown op is refused on one process too
  auto *group = runtime_->process.group.get();
  if (group == nullptr) {
    return value;
  }
  auto total = torch::tensor({value}, torch::dtype(torch::kInt64).device(runtime_->process.device));
  combine_number(*group, total, op, *runtime_->process.options.debug);
  const int64_t combined = total.item<int64_t>();
  return op == "mean" ? combined / group->size() : combined;
}

double Accelerator::reduce_floating(double value, const std::string &op) {
  reduce_op(op); // an unknown op is refused on one process too
  auto *group = runtime_->process.group.get();
  if (group == nullptr) {
    return value;
  }
  auto total =
      torch::tensor({value}, torch::dtype(torch::kFloat64).device(runtime_->process.device));
  combine_number(*group, total, op, *runtime_->process.options.debug);
  const double combined = total.item<double>();
  return op == "mean" ? combined / group->size() : combined;
}

torch::Tensor Accelerator::broadcast(const torch::Tensor &tensor, int src) {
  TORCH_CHECK(src >= 0 && src < num_processes(), "accelerate: broadcast from rank ", src,
              " but there are ", num_processes(), " processes");
  auto result = tensor.clone().contiguous();
  auto *group = runtime_->process.group.get();
  if (group != nullptr) {
    require_same_calls(*group, Collective::Broadcast, &tensor);
    group->broadcast(result, src, "broadcast");
  }
  return result;
}

torch::Tensor Accelerator::pad_across_processes(const torch::Tensor &tensor, int64_t dim,
                                                double pad_index, bool pad_first) {
  auto *group = runtime_->process.group.get();
  if (group == nullptr || tensor.dim() == 0) {
    return tensor;
  }
  if (dim < 0) {
    dim += tensor.dim();
  }
  TORCH_CHECK(dim >= 0 && dim < tensor.dim(), "accelerate: pad_across_processes: dimension ", dim,
              " out of range for a tensor of ", tensor.dim(), " dimensions");
  require_same_calls(*group, Collective::PadAcrossProcesses, &tensor, /*ignore_dim=*/true, dim);
  const auto calls = detail::all_calls(*group, Collective::PadAcrossProcesses, &tensor);
  const int64_t largest = detail::sizes_at(calls, dim).max().item<int64_t>();
  const int64_t missing = largest - tensor.size(dim);
  if (missing == 0) {
    return tensor;
  }
  auto sizes = tensor.sizes().vec();
  sizes[dim] = missing;
  auto padding = torch::full(sizes, pad_index, tensor.options());
  return pad_first ? torch::cat({padding, tensor}, dim) : torch::cat({tensor, padding}, dim);
}

} // namespace accelerate
