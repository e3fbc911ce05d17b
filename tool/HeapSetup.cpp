//===- HeapSetup.cpp - malloc set up for clang's parse --------------------===//
#include "HeapSetup.h"

#include "environment_flag.h"
#include "host_allocator.h"

#include <cstdlib>

namespace accel::tool {

std::string setUpHeapForParsing() {
  using accelerate::launch::HostAllocatorTuning;
  // Address space, not memory: pages are resident only once clang touches them.
  constexpr std::size_t ReserveBytes = std::size_t{1} << 30;
  const char *Setting = std::getenv("ACCEL_REWRITE_MALLOC_TUNING");
  // The runtime's words (accel env says the same of the training processes), with this
  // tool's switch.
  HostAllocatorTuning Tuning = accelerate::launch::tune_host_allocator(
      accelerate::launch::is_truthy(Setting ? Setting : "true"));
  std::string Said =
      "malloc " + accelerate::launch::describe(Tuning, "ACCEL_REWRITE_MALLOC_TUNING");
  if (Tuning == HostAllocatorTuning::Tuned) {
    Said += "; " + accelerate::launch::describe(
                       accelerate::launch::back_heap_with_huge_pages(ReserveBytes));
  }
  return Said;
}

} // namespace accel::tool
