// Accelerator::gradient_transport, comm_hook and options: which path this job's gradients take,
// how they are compressed, and every setting as resolved, for the self-test, benchmarks and logs.
#include "accelerate/accelerator.h"

#include "runtime.h"

namespace accelerate {

std::string Accelerator::gradient_transport() const {
  const auto &group = runtime_->process.group;
  if (!group) {
    return "none (one process)";
  }
  return group->gradient_transport();
}

const std::string &Accelerator::comm_hook() const { return runtime_->process.options.comm_hook; }

const Options &Accelerator::options() const { return runtime_->process.options; }

} // namespace accelerate
