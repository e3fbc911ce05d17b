// The shared-memory gradient all-reduce: real processes on one machine, the segment they map,
// the same sums as Gloo, and loud failures instead of hangs.
#include "multiprocess.h"
#include "process_group.h"
#include "shared_memory_allreduce.h"

#include <accelerate/accelerate.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/torch.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;
using accelerate::detail::ProcessGroup;
using accelerate::detail::ProcessGroupOptions;
using accelerate::detail::SharedMemoryAllreduce;

std::shared_ptr<ProcessGroup> connect(std::chrono::milliseconds timeout = 30s,
                                      bool shared_memory = true) {
  ProcessGroupOptions options;
  options.timeout = timeout;
  options.shared_memory = shared_memory;
  return ProcessGroup::connect(accelerate::detect_process_info(), c10::DeviceType::CPU, options);
}

// What rank `rank` contributes: different on every rank, not integers (so the order of the
// additions shows in the bits).
torch::Tensor contribution(int rank, int64_t numel, torch::ScalarType dtype) {
  auto generator = at::detail::createCPUGenerator(100 + rank);
  return (torch::randn({numel}, generator, torch::kDouble) * 1000).to(dtype);
}

TEST(SharedMemory, SumsEveryDtypeAndSizeAsGlooDoes) {
  // Three processes so that parts differ in size and the sum has more than two terms; a small
  // piece so that tensors take several rounds.
  auto results = accel_test::run_in_processes(3, [](const accel_test::Peer &peer) {
    auto group = connect();
    // A second segment, beside the group's, with pieces of 4 KiB.
    c10d::PrefixStore store("test/shm",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect(store, peer.rank, 3, 30s, "", 4096);
    ASSERT_TRUE(verdict.allreduce) << verdict.why_not;
    auto &shm = verdict.allreduce;
    EXPECT_EQ(shm->piece_bytes(), 4096u);
    for (auto dtype :
         {torch::kFloat, torch::kDouble, torch::kBFloat16, torch::kHalf, torch::kLong}) {
      // 0 and 1 element (parts of ranks without elements), odd sizes, one piece exactly, and
      // 2.5 pieces.
      const auto element = static_cast<int64_t>(c10::elementSize(dtype));
      for (int64_t numel : std::vector<int64_t>{0, 1, 7, 1023, 4096 / element, 10000 / element}) {
        auto mine = contribution(peer.rank, numel, dtype);
        auto expected = contribution(0, numel, dtype) + contribution(1, numel, dtype);
        expected += contribution(2, numel, dtype);
        shm->sum(mine);
        EXPECT_TRUE(torch::equal(mine, expected))
            << c10::toString(dtype) << " numel " << numel << " on rank " << peer.rank;
        // Gloo sums the same contributions to the same values, up to the rounding of its own
        // order of additions (a few units in the last place of 16-bit types at ~1000).
        std::vector<at::Tensor> gloo{contribution(peer.rank, numel, dtype)};
        group->wait(group->backend().allreduce(gloo), "all-reduce");
        const double atol = c10::elementSize(dtype) == 2 ? 64 : 1e-2;
        EXPECT_TRUE(torch::allclose(gloo[0].to(torch::kDouble), mine.to(torch::kDouble), 0, atol))
            << c10::toString(dtype) << " numel " << numel;
      }
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, TheGroupUsesItOnOneMachineAndLeavesNothingInDevShm) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect();
    ASSERT_NE(group->shared_memory(), nullptr) << group->shared_memory_unused_because();
    const auto name = group->shared_memory()->segment_name();
    EXPECT_EQ(name.rfind("/accel-", 0), 0u) << name;
    // Rank 0 removed the name once both had mapped it: a crash leaves nothing behind.
    EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name)) << name;
    auto mine = torch::full({5}, static_cast<float>(peer.rank + 1));
    group->shared_memory()->sum(mine);
    EXPECT_TRUE(torch::equal(mine, torch::full({5}, 3.f)));
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, ProcessesOnDifferentMachinesUseGloo) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    // Rank 1 pretends to be elsewhere: both must decide against shared memory, together.
    if (peer.rank == 1) {
      setenv("ACCELERATE_TEST_MACHINE_ID", "elsewhere", 1);
    }
    auto group = connect();
    EXPECT_EQ(group->shared_memory(), nullptr);
    EXPECT_EQ(group->shared_memory_unused_because(), "rank 1 runs on another machine than rank 0");
    c10d::PrefixStore store("test/shm",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect(store, peer.rank, 2, 30s, "");
    EXPECT_FALSE(verdict.failed) << "nothing to warn about: Gloo is the way across machines";
    group->barrier();
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, ASegmentThatCannotBeMadeMeansGlooEverywhereAndNothingLeft) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect();
    group->barrier();
    // 1 TiB areas: more than /dev/shm holds, refused before a page is allocated.
    c10d::PrefixStore store("test/shm",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect(store, peer.rank, 2, 30s, "", size_t{1} << 40);
    EXPECT_EQ(verdict.allreduce, nullptr);
    EXPECT_TRUE(verdict.failed) << "worth a warning: everyone was willing";
    EXPECT_NE(verdict.why_not.find("allocating 3145728 MiB in /dev/shm: "), std::string::npos)
        << verdict.why_not;
    group->barrier();
    if (peer.rank == 0) { // rank 0 names its segments accel-<pid>-<nonce>
      const std::string mine = "accel-" + std::to_string(getpid()) + "-";
      for (const auto &entry : std::filesystem::directory_iterator("/dev/shm")) {
        EXPECT_NE(entry.path().filename().string().rfind(mine, 0), 0u)
            << entry.path() << " left behind";
      }
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, OneProcessTurningItOffTurnsItOffForAll) {
  // Through the Accelerator: rank 1's environment says no; rank 0 would. Neither may wait for
  // the other's segment.
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    if (peer.rank == 1) {
      setenv("ACCELERATE_SHARED_MEMORY", "false", 1);
    }
    accelerate::Options options;
    options.timeout = 20s;
    accelerate::Accelerator accelerator(options);
    EXPECT_EQ(accelerator.gradient_transport(),
              "gloo (not shared memory: rank 1: shared memory turned off "
              "(Options::shared_memory, ACCELERATE_SHARED_MEMORY))");
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, TheAcceleratorUsesItByDefault) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &) {
    accelerate::Accelerator accelerator;
    EXPECT_EQ(accelerator.gradient_transport(), "shared memory");
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Callers ask the group for a sum; the group sends CPU tensors through shared memory.
TEST(SharedMemory, TheGroupsSumOfCpuTensorsGoesThroughIt) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect();
    ASSERT_NE(group->shared_memory(), nullptr) << group->shared_memory_unused_because();
    // Not contiguous: summed through a dense copy, written back in place.
    auto mine = (torch::arange(6, torch::kFloat).reshape({2, 3}) * (peer.rank + 1)).t();
    group->sum(mine, "sum of a transposed tensor");
    EXPECT_TRUE(torch::equal(mine, (torch::arange(6, torch::kFloat).reshape({2, 3}) * 3).t()));
    // Only the shared-memory path compares sizes and says so: this error proves the route.
    auto uneven = torch::ones({peer.rank == 0 ? 10 : 12});
    try {
      group->sum(uneven, "uneven sum");
      ADD_FAILURE() << "sums of different sizes must fail";
    } catch (const std::runtime_error &error) {
      const std::string what = error.what();
      EXPECT_NE(what.find("accelerate: uneven sum failed on rank " + std::to_string(peer.rank)),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("sums 40 bytes"), std::string::npos) << what;
      EXPECT_NE(what.find("sums 48 bytes"), std::string::npos) << what;
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Broadcasts of CPU tensors take the segment too (a loader broadcasts every epoch's order):
// byte for byte from any root, over several pieces, between sums, through the group.
TEST(SharedMemory, BroadcastsFromAnyRootBetweenSums) {
  auto results = accel_test::run_in_processes(3, [](const accel_test::Peer &peer) {
    auto group = connect();
    ASSERT_NE(group->shared_memory(), nullptr) << group->shared_memory_unused_because();
    c10d::PrefixStore store("test/shm-broadcast",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect(store, peer.rank, 3, 30s, "", 4096);
    ASSERT_TRUE(verdict.allreduce) << verdict.why_not;
    auto &shm = verdict.allreduce;
    for (int root = 0; root < 3; ++root) {
      for (auto dtype : {torch::kFloat, torch::kLong, torch::kBool, torch::kHalf}) {
        // Empty, one element, one piece exactly, 2.5 pieces.
        const auto element = static_cast<int64_t>(c10::elementSize(dtype));
        for (int64_t numel : std::vector<int64_t>{0, 1, 4096 / element, 10240 / element}) {
          // NaNs and negative zeros travel as they are: a copy of bits, not a sum.
          auto mine = contribution(peer.rank, numel, torch::kFloat);
          if (numel > 1) {
            mine[0] = std::numeric_limits<float>::quiet_NaN();
            mine[1] = -0.0f;
          }
          mine = dtype == torch::kBool ? mine.gt(0) : mine.to(dtype);
          auto expected = contribution(root, numel, torch::kFloat);
          if (numel > 1) {
            expected[0] = std::numeric_limits<float>::quiet_NaN();
            expected[1] = -0.0f;
          }
          expected = dtype == torch::kBool ? expected.gt(0) : expected.to(dtype);
          shm->broadcast(mine, root);
          ASSERT_EQ(mine.numel(), expected.numel());
          // (An empty tensor has no data pointer to compare.)
          EXPECT_TRUE(numel == 0 ||
                      std::memcmp(mine.data_ptr(), expected.data_ptr(), numel * element) == 0)
              << c10::toString(dtype) << " numel " << numel << " from " << root << " on "
              << peer.rank;
          // A sum right after: the rounds of both kinds stay in step.
          auto one = torch::ones({5000}, torch::kDouble);
          shm->sum(one);
          EXPECT_TRUE(torch::equal(one, torch::full({5000}, 3.0)));
        }
      }
    }
    // Through the group, not contiguous: a transposed view, written back in place.
    auto view = (torch::arange(6, torch::kFloat).reshape({2, 3}) * (peer.rank + 1)).t();
    group->broadcast(view, 2, "broadcast of a transposed tensor");
    EXPECT_TRUE(torch::equal(view, (torch::arange(6, torch::kFloat).reshape({2, 3}) * 3).t()));
    // Only the shared-memory path compares sizes: this error proves the route.
    auto uneven = torch::ones({peer.rank == 0 ? 10 : 12});
    try {
      group->broadcast(uneven, 0, "uneven broadcast");
      ADD_FAILURE() << "broadcasts of different sizes must fail";
    } catch (const std::runtime_error &error) {
      EXPECT_NE(std::string(error.what()).find("accelerate: uneven broadcast failed on rank"),
                std::string::npos)
          << error.what();
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Gradient buckets live in areas every process maps and are summed where they lie: every
// area ends up holding the sum, bit for bit what sum() gives, and nothing around the tensor
// is touched.
TEST(SharedMemory, SumsInPlaceInEveryProcesssArea) {
  auto results = accel_test::run_in_processes(3, [](const accel_test::Peer &peer) {
    auto group = connect();
    c10d::PrefixStore store("test/shm-areas",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect_areas(store, peer.rank, 3, 30s, 100000);
    ASSERT_TRUE(verdict.allreduce) << verdict.why_not;
    auto &areas = verdict.allreduce;
    EXPECT_GE(areas->piece_bytes(), 100000u);
    for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16, torch::kLong}) {
      const auto element = static_cast<int64_t>(c10::elementSize(dtype));
      // Empty, fewer elements than processes, odd, and most of the area; at an offset.
      for (int64_t numel : std::vector<int64_t>{0, 2, 1001, 90000 / element}) {
        const int64_t offset = 64;
        auto whole = torch::from_blob(areas->own_area(), {100000 / element},
                                      torch::TensorOptions().dtype(dtype));
        whole.fill_(7);
        auto tensor = whole.narrow(0, offset / element, numel);
        tensor.copy_(contribution(peer.rank, numel, dtype));
        auto expected = contribution(0, numel, dtype) + contribution(1, numel, dtype);
        expected += contribution(2, numel, dtype);
        areas->sum_in_place(tensor);
        EXPECT_TRUE(torch::equal(tensor, expected))
            << c10::toString(dtype) << " numel " << numel << " on rank " << peer.rank;
        EXPECT_TRUE(torch::equal(whole.narrow(0, 0, offset / element),
                                 torch::full({offset / element}, 7, dtype)));
        const int64_t after = offset / element + numel;
        EXPECT_TRUE(torch::equal(whole.narrow(0, after, whole.numel() - after),
                                 torch::full({whole.numel() - after}, 7, dtype)));
        group->barrier(); // nobody refills its area while another still reads it
      }
    }
    // An average: the sum times the scale, in the same round, the same bits everywhere.
    auto averaged = torch::from_blob(areas->own_area(), {1000}, torch::kFloat);
    averaged.copy_(contribution(peer.rank, 1000, torch::kFloat));
    auto expected = contribution(0, 1000, torch::kFloat) + contribution(1, 1000, torch::kFloat);
    expected += contribution(2, 1000, torch::kFloat);
    areas->sum_in_place(averaged, 1.0 / 3);
    EXPECT_TRUE(torch::equal(averaged, expected * (1.0 / 3)));
    // A tensor outside the area is refused before any process waits for it.
    auto outside = torch::ones({4});
    EXPECT_THROW(areas->sum_in_place(outside), std::invalid_argument);
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// Whether `address` lies in a shared mapping of this process (a segment), not private memory.
bool in_shared_mapping(const void *address) {
  std::ifstream maps("/proc/self/maps");
  const auto where = reinterpret_cast<uintptr_t>(address);
  for (std::string line; std::getline(maps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::string permissions;
    std::istringstream fields(line);
    fields >> std::hex >> begin >> dash >> end >> permissions;
    if (where >= begin && where < end) {
      return permissions.size() == 4 && permissions[3] == 's';
    }
  }
  return false;
}

// Rank r's loss is (r + 1) * sum(output) on an input of ones (batch 3): every weight's average
// gradient is 3 * (1 + 2) / 2.
void expect_averaged_gradients(accelerate::Accelerator &accelerator, torch::nn::Linear &model,
                               int rank) {
  auto input = torch::ones({3, model->options.in_features()});
  accelerator.backward(model->forward(input).sum() * (rank + 1));
  EXPECT_TRUE(torch::allclose(model->weight.grad(), torch::full_like(model->weight, 4.5)));
}

// A prepared model's gradients are the sum's own memory: after backward .grad lies in this
// process's area of the bucket segment (no copy back), and every process holds the average.
TEST(SharedMemory, GradientsLiveInTheSharedAreas) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Accelerator accelerator;
    torch::nn::Linear model(300, 200);
    accelerator.prepare(model);
    expect_averaged_gradients(accelerator, model, peer.rank);
    EXPECT_TRUE(in_shared_mapping(model->weight.grad().data_ptr()))
        << "the gradient is not in a shared mapping";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

// When /dev/shm cannot hold the bucket areas, the buckets stay in private memory and the
// gradients are averaged all the same. Here a file-size limit below the areas' size (and above
// the first segment's) makes the allocation fail for real (EFBIG, SIGXFSZ ignored).
TEST(SharedMemory, BucketsThatDoNotFitStayPrivateAndStillAverage) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{size_t{20} << 20, size_t{20} << 20};
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
    accelerate::Accelerator accelerator;
    torch::nn::Linear model(2048, 2048); // 16.8 MB of gradients: 33.6 MB of areas
    accelerator.prepare(model);
    EXPECT_EQ(accelerator.gradient_transport(), "shared memory");
    expect_averaged_gradients(accelerator, model, peer.rank);
    EXPECT_FALSE(in_shared_mapping(model->weight.grad().data_ptr()))
        << "the areas should not have fit";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, DifferentSizesAreAnErrorNotAMixture) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect();
    ASSERT_NE(group->shared_memory(), nullptr) << group->shared_memory_unused_because();
    auto mine = torch::ones({peer.rank == 0 ? 10 : 12});
    try {
      group->shared_memory()->sum(mine);
      ADD_FAILURE() << "sums of different sizes must fail";
    } catch (const std::runtime_error &error) {
      const std::string expected = peer.rank == 0
                                       ? "process 1 sums 48 bytes where process 0 sums 40 bytes"
                                       : "process 0 sums 40 bytes where process 1 sums 48 bytes";
      EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
    }
    EXPECT_TRUE(torch::equal(mine, torch::ones_like(mine))) << "the tensor is left as it was";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(SharedMemory, APeerThatExitsIsNamedWithinMoments) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect(60s);
    ASSERT_NE(group->shared_memory(), nullptr) << group->shared_memory_unused_because();
    group->barrier();
    if (peer.rank == 1) {
      std::_Exit(0); // gone without a word, like a crash
    }
    const auto start = std::chrono::steady_clock::now();
    auto mine = torch::ones({100});
    try {
      group->shared_memory()->sum(mine);
      ADD_FAILURE() << "a sum without its peer must fail";
    } catch (const std::runtime_error &error) {
      EXPECT_NE(std::string(error.what()).find("process 1 (pid "), std::string::npos)
          << error.what();
      EXPECT_NE(std::string(error.what()).find("exited before contributing"), std::string::npos)
          << error.what();
    }
    // Noticed by the peer check, long before the 60 s timeout.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
    EXPECT_THROW(group->shared_memory()->sum(mine), std::runtime_error) << "stays failed";
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
  EXPECT_FALSE(results[0].exit.stopped_by_group) << "rank 0 hung: " << results[0].output;
}

TEST(SharedMemory, BackwardSaysWhichBucketAndWhichPeer) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    accelerate::Options options;
    options.timeout = 60s;
    accelerate::Accelerator accelerator(options);
    torch::nn::Linear model(4, 2);
    accelerator.prepare(model);
    accelerator.wait_for_everyone();
    if (peer.rank == 1) {
      std::_Exit(0);
    }
    auto loss = model->forward(torch::ones({3, 4})).sum();
    try {
      accelerator.backward(loss);
      ADD_FAILURE() << "a backward without its peer must fail";
    } catch (const std::exception &error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("accelerate: gradient all-reduce of bucket 0 failed on rank 0 of 2"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("process 1 (pid "), std::string::npos) << message;
    }
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
  EXPECT_FALSE(results[0].exit.stopped_by_group) << "rank 0 hung: " << results[0].output;
}

TEST(SharedMemory, APeerThatNeverComesTimesOut) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto group = connect(60s);
    // A segment with a 2 s timeout of its own (the group's rendezvous keeps its 60 s).
    c10d::PrefixStore store("test/shm",
                            c10::intrusive_ptr<c10d::Store>::reclaim_copy(&group->store()));
    auto verdict = SharedMemoryAllreduce::connect(store, peer.rank, 2, 2s, "");
    ASSERT_TRUE(verdict.allreduce) << verdict.why_not;
    if (peer.rank == 0) {
      auto mine = torch::ones({100});
      try {
        verdict.allreduce->sum(mine);
        ADD_FAILURE() << "a sum its peer never joins must fail";
      } catch (const std::runtime_error &error) {
        EXPECT_NE(
            std::string(error.what()).find("process 1 did not contribute its part within 2.0 s"),
            std::string::npos)
            << error.what();
      }
    }
    // Rank 1 stays alive, in the barrier, until rank 0 has given up.
    group->barrier();
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

} // namespace
