// glibc's malloc, which LibTorch's CPU allocator goes through, hands freed memory back to the
// kernel eagerly: blocks above a threshold that starts at 128 KiB get mappings of their own,
// unmapped when freed, and the top of the heap is trimmed past 128 KiB of free space. A
// training step frees and reallocates the same tensors every time, so every step pays for its
// memory again in page faults (the kernel zeroing pages): on the benchmark VM a `conv` step
// faulted 1,600 pages and spent 17% of its time in the kernel. The Accelerator raises both
// thresholds once per process. Shared by the runtime, `accel env`, which reports the plan, and
// accel-rewrite, which also backs the heap with huge pages (back_heap_with_huge_pages).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace accelerate::launch {

enum class HostAllocatorTuning {
  Tuned,          ///< glibc's thresholds raised (or, for a plan, would be)
  TurnedOff,      ///< Options::tune_malloc = false or ACCELERATE_MALLOC_TUNING=false
  UserSettings,   ///< GLIBC_TUNABLES or MALLOC_*_ set malloc's thresholds: those stand
  OtherAllocator, ///< malloc is not glibc's (jemalloc, tcmalloc, ... preloaded)
};

/// The largest block served from the heap instead of a mapping of its own (glibc accepts at
/// most 32 MiB on 64-bit systems), and how much free memory the heap keeps before trimming.
constexpr int kMmapThresholdBytes = 32 << 20;
constexpr int kTrimThresholdBytes = 1 << 30;

/// What tune_host_allocator would do in this process and environment, without doing it.
HostAllocatorTuning plan_host_allocator_tuning(bool wanted);

/// Tunes this process's malloc, once, as planned; a later call returns Tuned once it has been.
HostAllocatorTuning tune_host_allocator(bool wanted);

/// What a tuning decision means, in one line (`accel env`, `accel-rewrite -v`); switch_variable
/// names the variable that turns the tuning off for that program.
std::string describe(HostAllocatorTuning tuning,
                     std::string_view switch_variable = "ACCELERATE_MALLOC_TUNING");

enum class HugePageHeap {
  Advised,     ///< the heap was grown by the reservation, advised for huge pages
  AlwaysOn,    ///< the kernel backs all anonymous memory with huge pages already (THP "always")
  Unavailable, ///< THP "never", or a kernel without transparent huge pages
  NotGrown,    ///< malloc is not tuned, or its heap could not grow in one piece by the
               ///< reservation (RLIMIT_DATA, strict overcommit, a heap already that large)
};

/// clang's parse of LibTorch's headers (accel-rewrite) allocates about 0.6 GB in small blocks
/// and walks it through pointers: with 4 KiB pages most of those walks miss the TLB. This
/// grows malloc's heap by `reserve_bytes` of address space at once (not memory: a page costs
/// nothing until touched) and asks the kernel to back that range with transparent huge pages,
/// as glibc's own `glibc.malloc.hugetlb=1` tunable would, which only takes effect when set
/// before the process starts. The heap then keeps up to reserve_bytes + 512 MiB of freed
/// memory instead of trimming it. Call once, before threads start, after tune_host_allocator
/// returned Tuned. At most 1 GiB.
HugePageHeap back_heap_with_huge_pages(std::size_t reserve_bytes);

/// One line, for accel-rewrite -v.
std::string describe(HugePageHeap heap);

} // namespace accelerate::launch
