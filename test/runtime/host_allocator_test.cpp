// The Accelerator raises glibc malloc's thresholds, so that a step's freed tensors are reused
// rather than unmapped and faulted in again; a user's own malloc settings stand. Each test runs
// its body in a fresh process: malloc's state is per process, and others may have tuned it.
#include "host_allocator.h"
#include "multiprocess.h"

#include <accelerate/accelerate.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

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

// accel-rewrite's heap (back_heap_with_huge_pages): where the kernel gives huge pages on
// request only (THP "madvise"), blocks malloc carves from the reserved heap get them.

std::string huge_page_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(in, text);
  const auto open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos
             ? "absent"
             : text.substr(open + 1, close - open - 1);
}

// This process's anonymous memory in huge pages, in KiB.
long anonymous_huge_kib() {
  std::ifstream in("/proc/self/smaps_rollup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(std::strlen("AnonHugePages:")));
    }
  }
  return -1;
}

// Allocates and touches 64 MiB in 1 MiB blocks (all from the heap once malloc is tuned) and
// returns how many KiB of this process's memory are in huge pages then.
long huge_kib_after_touching_64_mib() {
  std::vector<void *> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(std::malloc(1 << 20));
    std::memset(blocks.back(), 1, 1 << 20);
  }
  const long kib = anonymous_huge_kib();
  for (void *block : blocks) {
    std::free(block);
  }
  return kib;
}

#define SKIP_WITHOUT_MADVISED_HUGE_PAGES()                                                         \
  if (huge_page_mode() != "madvise") {                                                             \
    GTEST_SKIP() << "transparent huge pages here: " << huge_page_mode() << ", not madvise";        \
  }

TEST(HostAllocator, AHeapBackedWithHugePagesGetsThem) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  SKIP_WITHOUT_MADVISED_HUGE_PAGES();
  using namespace accelerate::launch;
  auto results = run_in_processes(1, [&](const Peer &) {
    ASSERT_EQ(tune_host_allocator(true), HostAllocatorTuning::Tuned);
    ASSERT_EQ(back_heap_with_huge_pages(std::size_t{256} << 20), HugePageHeap::Advised);
    // 64 MiB span at least 31 aligned 2 MiB pages; the kernel may refuse a few.
    EXPECT_GE(huge_kib_after_touching_64_mib(), 32 * 1024);
  });
  EXPECT_TRUE(all_succeeded(results));
}

TEST(HostAllocator, AnUntunedHeapIsNotBackedWithHugePages) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  SKIP_WITHOUT_MADVISED_HUGE_PAGES();
  using namespace accelerate::launch;
  auto results = run_in_processes(1, [&](const Peer &) {
    ASSERT_EQ(tune_host_allocator(false), HostAllocatorTuning::TurnedOff);
    EXPECT_EQ(back_heap_with_huge_pages(std::size_t{256} << 20), HugePageHeap::NotGrown);
    EXPECT_LT(huge_kib_after_touching_64_mib(), 32 * 1024);
  });
  EXPECT_TRUE(all_succeeded(results));
}

} // namespace
