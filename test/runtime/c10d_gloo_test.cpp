// The communication base, tested without our own wrappers: two real processes rendezvous
// through c10d's TCPStore on 127.0.0.1 and talk through the Gloo backend compiled into the
// torch wheel's libtorch_cpu, with Debian's gloo headers (docs/design.md, "Gloo headers").
#include "multiprocess.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include <gtest/gtest.h>

namespace {

using namespace std::chrono_literals;

c10::intrusive_ptr<c10d::TCPStore> open_store(const accel_test::Peer &peer,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(peer.port);
  options.isServer = peer.rank == 0;
  options.numWorkers = peer.world_size;
  options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

c10::intrusive_ptr<c10d::ProcessGroupGloo> open_gloo(const c10::intrusive_ptr<c10d::Store> &store,
                                                     const accel_test::Peer &peer,
                                                     std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, peer.rank, peer.world_size, options);
}

TEST(C10dGloo, TwoProcessesAllReduceBroadcastAndBarrierThroughGloo) {
  auto results = accel_test::run_in_processes(2, [](const accel_test::Peer &peer) {
    auto store = open_store(peer, 30s);
    auto gloo = open_gloo(store, peer, 30s);

    // Sums: rank r contributes r+1 in every element, in float and in int64.
    std::vector<at::Tensor> floats{torch::full({4096}, peer.rank + 1.0f)};
    gloo->allreduce(floats)->wait();
    EXPECT_TRUE(torch::all(floats[0] == 3.0f).item<bool>());
    std::vector<at::Tensor> integers{torch::arange(10, torch::kInt64) * (peer.rank + 1)};
    gloo->allreduce(integers)->wait();
    EXPECT_TRUE(torch::equal(integers[0], torch::arange(10, torch::kInt64) * 3));

    // Broadcast from rank 1: rank 0's own values are replaced.
    std::vector<at::Tensor> broadcast{torch::full({3, 5}, 10.0f * peer.rank)};
    c10d::BroadcastOptions from_one;
    from_one.rootRank = 1;
    gloo->broadcast(broadcast, from_one)->wait();
    EXPECT_TRUE(torch::all(broadcast[0] == 10.0f).item<bool>());

    gloo->barrier()->wait();

    // Clean shutdown: the backend, then the store, go away while both peers are alive.
    gloo.reset();
    store.reset();
  });
  EXPECT_TRUE(accel_test::all_succeeded(results));
}

TEST(C10dGloo, APeerThatNeverArrivesIsAnErrorNotAHang) {
  // One process is started for a world of two, so the Gloo rendezvous can never complete.
  accel_test::RunOptions options;
  options.world_size = 2;
  options.timeout = 60s;
  auto results = accel_test::run_in_processes(
      1,
      [](const accel_test::Peer &peer) {
        const auto start = std::chrono::steady_clock::now();
        std::string message;
        try {
          // Rank 0 hosts the store and waits there for its missing worker.
          auto store = open_store(peer, 3s);
          open_gloo(store, peer, 3s);
        } catch (const std::exception &error) {
          message = error.what();
        }
        const auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_FALSE(message.empty()) << "creating the backend without its peer must fail";
        EXPECT_LT(waited, 30s) << "the failure must come from the timeout, not a hang";
        std::cout << "error seen: " << message.substr(0, 300) << "\n";
      },
      options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(accel_test::all_succeeded(results));
  EXPECT_FALSE(results[0].exit.stopped_by_group) << "the worker hung until the harness stopped it";
}

} // namespace
