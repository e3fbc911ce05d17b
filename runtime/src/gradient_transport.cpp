// Accelerator::gradient_transport: which path this job's gradients take, for the self-test
// and for logs.
#include "accelerate/accelerator.h"

#include "runtime.h"

namespace accelerate {

std::string Accelerator::gradient_transport() const {
  const auto &group = runtime_->group;
  if (!group) {
    return "none (one process)";
  }
  if (group->shared_memory() != nullptr && runtime_->device.is_cpu()) {
    return "shared memory";
  }
  return group->backend_name() + " (not shared memory: " + group->shared_memory_unused_because() +
         ")";
}

} // namespace accelerate
