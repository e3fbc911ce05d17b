#include "collective_calls.h"

#include <sstream>

namespace accelerate::detail {
namespace {

constexpr int64_t kMaxDims = 16;
/// Columns before the sizes: collective, dtype, device type, ndim.
constexpr int64_t kHeader = 4;

const char *name_of(int64_t collective) {
  switch (static_cast<Collective>(collective)) {
  case Collective::Gather:
    return "gather";
  case Collective::Reduce:
    return "reduce";
  case Collective::Broadcast:
    return "broadcast";
  case Collective::PadAcrossProcesses:
    return "pad_across_processes";
  case Collective::ReduceNumber:
    return "reduce of a number";
  case Collective::Barrier:
    return "wait_for_everyone";
  }
  return "an unknown collective";
}

std::string shape_text(const at::Tensor &row) {
  std::ostringstream text;
  text << "[";
  const int64_t dims = row[3].item<int64_t>();
  for (int64_t d = 0; d < dims; ++d) {
    text << (d ? ", " : "") << row[kHeader + d].item<int64_t>();
  }
  text << "]";
  return text.str();
}

// "gather of Float [2, 3] on cpu", "wait_for_everyone".
std::string call_text(const at::Tensor &row) {
  std::string text = name_of(row[0].item<int64_t>());
  if (row[3].item<int64_t>() >= 0) {
    text += std::string(" of ") +
            c10::toString(static_cast<c10::ScalarType>(row[1].item<int64_t>())) + " " +
            shape_text(row) + " on " +
            c10::DeviceTypeName(static_cast<c10::DeviceType>(row[2].item<int64_t>()), true);
  }
  return text;
}

} // namespace

at::Tensor all_calls(ProcessGroup &group, Collective collective, const torch::Tensor *tensor) {
  const std::string what = name_of(static_cast<int64_t>(collective));
  auto mine = torch::zeros({kHeader + kMaxDims}, torch::kInt64);
  mine[0] = static_cast<int64_t>(collective);
  mine[3] = -1;
  if (tensor != nullptr) {
    TORCH_CHECK(tensor->dim() <= kMaxDims, "accelerate: ", what, " supports at most ", kMaxDims,
                " dimensions");
    mine[1] = static_cast<int64_t>(tensor->scalar_type());
    mine[2] = static_cast<int64_t>(tensor->device().type());
    mine[3] = tensor->dim();
    for (int64_t d = 0; d < tensor->dim(); ++d) {
      mine[kHeader + d] = tensor->size(d);
    }
  }
  return torch::stack(group.all_gather(mine, what + " (call exchange)"));
}

void require_same_calls(ProcessGroup &group, Collective collective, const torch::Tensor *tensor,
                        bool ignore_dim, int64_t dim) {
  const auto calls = all_calls(group, collective, tensor);
  const auto header = calls.narrow(1, 0, 3);
  for (int r = 1; r < group.size(); ++r) {
    if (!torch::equal(header[r], header[0])) {
      std::ostringstream message;
      message << "accelerate: the processes called different collectives, or passed tensors of "
                 "different types or devices, at the same point:";
      for (int q = 0; q < group.size(); ++q) {
        message << (q ? "," : "") << " rank " << q << " " << call_text(calls[q]);
      }
      throw std::runtime_error(message.str());
    }
  }
  auto shapes = calls.narrow(1, 3, 1 + kMaxDims).clone();
  if (ignore_dim) {
    shapes.select(1, 1 + dim).zero_();
  }
  for (int r = 1; r < group.size(); ++r) {
    if (!torch::equal(shapes[r], shapes[0])) {
      std::ostringstream message;
      message << "accelerate: " << name_of(static_cast<int64_t>(collective))
              << " needs the same tensor shape"
              << (ignore_dim ? " outside dimension " + std::to_string(dim) : std::string())
              << " on every process, got";
      for (int q = 0; q < group.size(); ++q) {
        message << (q ? "," : "") << " rank " << q << " " << shape_text(calls[q]);
      }
      throw std::runtime_error(message.str());
    }
  }
}

at::Tensor sizes_at(const at::Tensor &calls, int64_t dim) { return calls.select(1, kHeader + dim); }

} // namespace accelerate::detail
