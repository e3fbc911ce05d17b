#include "host_allocator.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>
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

// The kernel's transparent-huge-page mode: the bracketed word of "always [madvise] never".
std::string huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos || close < open
             ? ""
             : text.substr(open + 1, close - open - 1);
}

std::size_t huge_page_bytes() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  std::size_t bytes = 0;
  return in >> bytes && bytes != 0 && (bytes & (bytes - 1)) == 0 ? bytes : std::size_t{2} << 20;
}

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

HugePageHeap back_heap_with_huge_pages(std::size_t reserve_bytes) {
#if defined(__GLIBC__)
  std::lock_guard<std::mutex> lock(g_mutex);
  constexpr std::size_t kMostBytes = std::size_t{1} << 30;
  if (!g_tuned || reserve_bytes == 0 || reserve_bytes > kMostBytes) {
    return HugePageHeap::NotGrown;
  }
  const std::string mode = huge_page_mode();
  if (mode == "always") {
    return HugePageHeap::AlwaysOn;
  }
  if (mode != "madvise") {
    return HugePageHeap::Unavailable;
  }
  // glibc grows the heap by what a request needs plus M_TOP_PAD: one block larger than the
  // heap's free top (and below the 32 MiB mmap threshold) makes it take the whole
  // reservation in one sbrk. Freeing the block leaves it all free at the top, where a trim
  // threshold above the reservation keeps it (mallopt(3): M_TOP_PAD, M_TRIM_THRESHOLD).
  const std::size_t free_top = mallinfo2().keepcost;
  const std::size_t probe_bytes = free_top + (1 << 20);
  if (probe_bytes >= static_cast<std::size_t>(kMmapThresholdBytes)) {
    return HugePageHeap::NotGrown;
  }
  constexpr int kDefaultTopPad = 128 << 10;
  const auto *before = static_cast<const char *>(::sbrk(0));
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(reserve_bytes + (512 << 20))) != 1 ||
      mallopt(M_TOP_PAD, static_cast<int>(reserve_bytes)) != 1) {
    return HugePageHeap::NotGrown;
  }
  void *volatile probe = std::malloc(probe_bytes); // volatile: the pair must not be elided
  std::free(probe);
  mallopt(M_TOP_PAD, kDefaultTopPad);
  const auto *after = static_cast<const char *>(::sbrk(0));
  if (before == reinterpret_cast<const char *>(-1) || after < before + reserve_bytes) {
    return HugePageHeap::NotGrown; // no sbrk, or the heap went to mappings of its own
  }
  // Huge pages form only on aligned ranges: advise from the first boundary in the heap.
  const std::uintptr_t align = huge_page_bytes();
  const std::uintptr_t start =
      (reinterpret_cast<std::uintptr_t>(before) + align - 1) & ~(align - 1);
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(after);
  if (end <= start || ::madvise(reinterpret_cast<void *>(start), end - start, MADV_HUGEPAGE) != 0) {
    return HugePageHeap::NotGrown;
  }
  return HugePageHeap::Advised;
#else
  (void)reserve_bytes;
  return HugePageHeap::NotGrown;
#endif
}

std::string describe(HugePageHeap heap) {
  switch (heap) {
  case HugePageHeap::Advised:
    return "huge pages for the heap (advised)";
  case HugePageHeap::AlwaysOn:
    return "huge pages for the heap (the kernel's default: THP always)";
  case HugePageHeap::Unavailable:
    return "no huge pages (THP is off in this kernel)";
  case HugePageHeap::NotGrown:
    return "no huge pages (the heap could not be reserved)";
  }
  return "unknown";
}

std::string describe(HostAllocatorTuning tuning, std::string_view switch_variable) {
  const std::string variable(switch_variable);
  switch (tuning) {
  case HostAllocatorTuning::Tuned:
    return "on: blocks up to 32 MiB come from malloc's heap, which keeps up to 1 GiB of freed "
           "memory (" +
           variable + "=false turns it off)";
  case HostAllocatorTuning::TurnedOff:
    return "off (" + variable + " turns it off)";
  case HostAllocatorTuning::UserSettings:
    return "left to the environment (GLIBC_TUNABLES or MALLOC_*_ set malloc's thresholds)";
  case HostAllocatorTuning::OtherAllocator:
    return "not applicable (malloc is not glibc's)";
  }
  return "unknown";
}

} // namespace accelerate::launch
