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
  return group->gradient_transport();
}

} // namespace accelerate
