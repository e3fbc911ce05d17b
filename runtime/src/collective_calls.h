// Before a collective, the processes exchange what they are about to call (the collective and
// its tensor's dtype, device and shape), so that processes that call different things stop
// with an error naming each rank's call instead of a raw backend error, garbage or a hang.
#pragma once

#include "process_group.h"

#include <torch/torch.h>

#include <string>

namespace accelerate::detail {

enum class Collective : int64_t {
  Gather = 1,
  Reduce,
  Broadcast,
  PadAcrossProcesses,
  ReduceNumber,
  Barrier,
};

/// Every process's call, as rows of [collective, dtype, device type, ndim, size0, ...] (ndim
/// -1 for a collective that takes no tensor).
at::Tensor all_calls(ProcessGroup &group, Collective collective, const torch::Tensor *tensor);

/// Throws std::runtime_error, on every process alike, when the processes call different
/// collectives, or pass tensors of different dtypes, devices or shapes (outside dimension `dim`
/// with ignore_dim).
void require_same_calls(ProcessGroup &group, Collective collective, const torch::Tensor *tensor,
                        bool ignore_dim = false, int64_t dim = 0);

/// The size of dimension `dim` on every process, from all_calls' rows.
at::Tensor sizes_at(const at::Tensor &calls, int64_t dim);

} // namespace accelerate::detail
