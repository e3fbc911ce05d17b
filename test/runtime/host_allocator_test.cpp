// The Accelerator raises glibc malloc's thresholds, so that a step's freed tensors are reused
// rather than unmapped and faulted in again; a user's own malloc settings stand. Each test runs
// its body in a fresh process: malloc's state is per process, and others may have tuned it.
#include "host_allocator.h"
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

using namespace accel_test;
using accelerate::launch::HostAllocatorTuning;

constexpr size_t kBlock = 24 << 20; // above glibc's default thresholds, below the tuned ones

#if defined(__GLIBC__)
// Bytes malloc holds in mappings of their own (each large block it did not put on the heap).
size_t mapped_bytes() { return mallinfo2().hblkhd; }
#endif

// glibc only: under the sanitizers malloc is theirs, and there is nothing to tune.
#define SKIP_WITHOUT_GLIBC_MALLOC()                                                                \
  if (accelerate::launch::plan_host_allocator_tuning(true) ==                                      \
      HostAllocatorTuning::OtherAllocator) {                                                       \
    GTEST_SKIP() << "malloc is not glibc's here";                                                  \
  }

void observe(const accelerate::Options &options, bool expect_mapped, bool expect_kept) {
#if defined(__GLIBC__)
  auto results = run_in_processes(1, [&](const Peer &) {
    accelerate::Accelerator accelerator(options);
    const size_t mapped_before = mapped_bytes();
    const size_t heap_before = mallinfo2().arena;
    void *block = std::malloc(kBlock);
    ASSERT_NE(block, nullptr);
    static_cast<char *>(block)[kBlock - 1] = 1;
    EXPECT_EQ(mapped_bytes() >= mapped_before + kBlock, expect_mapped);
    std::free(block);
    EXPECT_EQ(mallinfo2().arena >= heap_before + kBlock, expect_kept);
  });
  EXPECT_TRUE(all_succeeded(results));
#else
  (void)options, (void)expect_mapped, (void)expect_kept;
#endif
}

TEST(HostAllocator, AnAcceleratorKeepsLargeBlocksOnTheHeapAfterTheyAreFreed) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  observe({}, /*expect_mapped=*/false, /*expect_kept=*/true);
}

TEST(HostAllocator, TurnedOffMallocKeepsItsDefaults) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  accelerate::Options options;
  options.tune_malloc = false;
  observe(options, /*expect_mapped=*/true, /*expect_kept=*/false);
}

TEST(HostAllocator, TheEnvironmentTurnsItOff) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  setenv("ACCELERATE_MALLOC_TUNING", "false", 1); // inherited by the worker
  observe({}, /*expect_mapped=*/true, /*expect_kept=*/false);
  unsetenv("ACCELERATE_MALLOC_TUNING");
}

// glibc reads GLIBC_TUNABLES and MALLOC_*_ when the process starts; a program started with any
// of them set chose its own thresholds, and the Accelerator leaves malloc alone.
TEST(HostAllocator, MallocSettingsInTheEnvironmentStand) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  setenv("MALLOC_ARENA_MAX", "4", 1); // inherited by the worker
  observe({}, /*expect_mapped=*/true, /*expect_kept=*/false);
  unsetenv("MALLOC_ARENA_MAX");
}

TEST(HostAllocator, ThePlanFollowsTheSwitchAndTheEnvironment) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  using accelerate::launch::plan_host_allocator_tuning;
  EXPECT_EQ(plan_host_allocator_tuning(true), HostAllocatorTuning::Tuned);
  EXPECT_EQ(plan_host_allocator_tuning(false), HostAllocatorTuning::TurnedOff);
  for (const char *name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                           "MALLOC_MMAP_MAX_", "MALLOC_ARENA_MAX"}) {
    setenv(name, "1", 1);
    EXPECT_EQ(plan_host_allocator_tuning(true), HostAllocatorTuning::UserSettings) << name;
    unsetenv(name);
  }
  setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=512", 1);
  EXPECT_EQ(plan_host_allocator_tuning(true), HostAllocatorTuning::Tuned) << "not malloc's";
  setenv("GLIBC_TUNABLES", "glibc.rtld.optional_static_tls=512:glibc.malloc.tcache_count=0", 1);
  EXPECT_EQ(plan_host_allocator_tuning(true), HostAllocatorTuning::UserSettings);
  unsetenv("GLIBC_TUNABLES");
}

} // namespace
