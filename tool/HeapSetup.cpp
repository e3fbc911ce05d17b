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
  switch (accelerate::launch::tune_host_allocator(
      accelerate::launch::is_truthy(Setting ? Setting : "true"))) {
  case HostAllocatorTuning::Tuned:
    return "malloc tuned, " + accelerate::launch::describe(
                                  accelerate::launch::back_heap_with_huge_pages(ReserveBytes));
  case HostAllocatorTuning::TurnedOff:
    return "malloc left alone (ACCEL_REWRITE_MALLOC_TUNING)";
  case HostAllocatorTuning::UserSettings:
    return "malloc left alone (GLIBC_TUNABLES or MALLOC_*_ set it up)";
  case HostAllocatorTuning::OtherAllocator:
    return "malloc left alone (not glibc's)";
  }
  return "";
}

} // namespace accel::tool
