// For the runtime's tests only: what they inspect of an Accelerator's internal state, which the
// public header keeps private. The runtime itself never needs it (its parts are the
// Accelerator's own members), and it is not installed.
#pragma once

#include "accelerate/accelerator.h"
#include "runtime.h"

#include <memory>
#include <vector>

namespace accelerate::detail {

class RuntimeAccess {
public:
  /// The gradient synchronisation of each prepared model (none in a one-process job).
  static const std::vector<std::shared_ptr<GradientSync>> &
  gradient_syncs(Accelerator &accelerator) {
    return accelerator.runtime().gradients.live_syncs();
  }
};

} // namespace accelerate::detail
