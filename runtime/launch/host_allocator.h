// glibc's malloc, which LibTorch's CPU allocator goes through, hands freed memory back to the
// kernel eagerly: blocks above a threshold that starts at 128 KiB get mappings of their own,
// unmapped when freed, and the top of the heap is trimmed past 128 KiB of free space. A
// training step frees and reallocates the same tensors every time, so every step pays for its
// memory again in page faults (the kernel zeroing pages): on the benchmark VM a `conv` step
// faulted 1,600 pages and spent 17% of its time in the kernel. The Accelerator raises both
// thresholds once per process. Shared by the runtime and `accel env`, which reports the plan.
#pragma once

#include <string>

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

/// One line for `accel env`.
std::string describe(HostAllocatorTuning tuning);

} // namespace accelerate::launch
