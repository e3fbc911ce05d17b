#include "host_allocator.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <malloc.h>
#endif

namespace accelerate::launch {
namespace {

// GLIBC_TUNABLES glibc.malloc.*, or the older MALLOC_*_ variables: the user chose.
bool environment_sets_malloc() {
  for (const char *name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX"}) {
    if (std::getenv(name) != nullptr) {
      return true;
    }
  }
  const char *tunables = std::getenv("GLIBC_TUNABLES");
  return tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr;
}

// malloc as this code resolves it lives in glibc unless another allocator was preloaded or
// linked in; mallopt would then tune an allocator nobody uses.
bool malloc_is_glibcs() {
#if defined(__GLIBC__)
  Dl_info where{};
  return dladdr(reinterpret_cast<void *>(&::malloc), &where) != 0 && where.dli_fname != nullptr &&
         std::strstr(where.dli_fname, "libc.so") != nullptr;
#else
  return false;
#endif
}

std::mutex g_mutex;
bool g_tuned = false;

} // namespace

HostAllocatorTuning plan_host_allocator_tuning(bool wanted) {
  if (!wanted) {
    return HostAllocatorTuning::TurnedOff;
  }
  if (environment_sets_malloc()) {
    return HostAllocatorTuning::UserSettings;
  }
  return malloc_is_glibcs() ? HostAllocatorTuning::Tuned : HostAllocatorTuning::OtherAllocator;
}

HostAllocatorTuning tune_host_allocator(bool wanted) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_tuned) {
    return HostAllocatorTuning::Tuned;
  }
  const auto plan = plan_host_allocator_tuning(wanted);
  if (plan != HostAllocatorTuning::Tuned) {
    return plan;
  }
#if defined(__GLIBC__)
  // Setting a threshold also stops glibc from moving the mmap threshold by itself.
  if (mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
      mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1) {
    g_tuned = true;
    return HostAllocatorTuning::Tuned;
  }
#endif
  return HostAllocatorTuning::OtherAllocator;
}

std::string describe(HostAllocatorTuning tuning) {
  switch (tuning) {
  case HostAllocatorTuning::Tuned:
    return "on: blocks up to 32 MiB come from malloc's heap, which keeps up to 1 GiB of freed "
           "memory (ACCELERATE_MALLOC_TUNING=false turns it off)";
  case HostAllocatorTuning::TurnedOff:
    return "off (ACCELERATE_MALLOC_TUNING turns it off)";
  case HostAllocatorTuning::UserSettings:
    return "left to the environment (GLIBC_TUNABLES or MALLOC_*_ set malloc's thresholds)";
  case HostAllocatorTuning::OtherAllocator:
    return "not applicable (malloc is not glibc's)";
  }
  return "unknown";
}

} // namespace accelerate::launch
