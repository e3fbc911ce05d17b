// The gradient all-reduce for processes that share one machine: a sum through a shared-memory
// segment, two barriers and a few memory copies per piece, instead of Gloo's loopback TCP and
// its thread hand-offs (about 2 ms for 340 KB on 2 cores; see docs/design.md). Linux only.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace accelerate::detail {

class SharedMemoryAllreduce {
public:
  struct Verdict {
    /// Null: the gradients go through the backend.
    std::unique_ptr<SharedMemoryAllreduce> allreduce;
    std::string why_not;
    /// Every rank was willing and on one machine, yet the segment could not be made or mapped
    /// (a full or missing /dev/shm): worth a warning, unlike a job across machines.
    bool failed = false;
  };

  /// Every rank calls this, with the same store: rank 0 makes the segment, the others map it,
  /// and the name is removed from /dev/shm before anyone returns. Every rank gets the same
  /// verdict: an all-reduce when no rank refuses (`refusal` non-empty says why this one does),
  /// all run on one machine (same boot, same PID and network namespaces, the same /dev/shm) and the
  /// segment could be made. `piece_bytes` (0: chosen from the world size) is how much one round
  /// carries.
  static Verdict connect(c10d::Store &store, int rank, int size, std::chrono::milliseconds timeout,
                         const std::string &refusal, size_t piece_bytes = 0);
  /// A segment for sum_in_place only: one area of `area_bytes` per process, no result area.
  /// Every process calls it, in the same order as its other collectives, with the same size.
  static Verdict connect_areas(c10d::Store &store, int rank, int size,
                               std::chrono::milliseconds timeout, size_t area_bytes);
  ~SharedMemoryAllreduce();
  SharedMemoryAllreduce(const SharedMemoryAllreduce &) = delete;
  SharedMemoryAllreduce &operator=(const SharedMemoryAllreduce &) = delete;

  /// Replaces `tensor` (CPU, contiguous, any dtype ATen can add) by its sum over the processes,
  /// summed in rank order, so every process gets the same bits. Blocks until every process has
  /// contributed. Throws std::runtime_error when a peer exits first or the timeout passes; the
  /// object is unusable after that.
  void sum(const at::Tensor &tensor);
  /// Replaces `tensor` (CPU, contiguous, any dtype) by process `root`'s, byte for byte. Every
  /// process calls it with a tensor of the same size, in the same order as its sums; it fails
  /// as sum() does.
  void broadcast(const at::Tensor &tensor, int root);
  /// This process's area, piece_bytes() long. A tensor placed there (a gradient bucket) is
  /// summed by sum_in_place without being copied in or out.
  std::byte *own_area() const { return input(rank_); }
  /// Replaces `tensor`, which lies in own_area() at the same offset on every process, by its
  /// sum over the processes, in every process's area at once: process r adds up part r of all
  /// areas (in rank order, so every process gets the same bits) and writes it into each. One
  /// round, two barriers, no copy in or out. With `scale`, the sum is multiplied by it in the
  /// same round (an average: scale = 1 / processes). Fails as sum() does.
  void sum_in_place(const at::Tensor &tensor, double scale = 1.0);

  size_t piece_bytes() const { return piece_bytes_; }
  /// The name the segment had in /dev/shm (removed there once every rank had mapped it).
  const std::string &segment_name() const { return name_; }

private:
  struct RankState;
  SharedMemoryAllreduce() = default;
  void sum_piece(std::byte *data, size_t bytes, const at::Tensor &like);
  void broadcast_piece(std::byte *data, size_t bytes, int root);
  /// The checks every collective starts with; returns the tensor's data.
  std::byte *begin_collective(const at::Tensor &tensor);
  void check_sizes_match();
  void publish(uint32_t phase);
  void wait_for_all(uint32_t phase);
  void wait_for(int peer, uint32_t phase);
  [[noreturn]] void fail(const std::string &why);
  RankState &state(int rank) const;
  std::byte *input(int rank) const;
  std::byte *result() const;

  static Verdict connect(c10d::Store &store, int rank, int size, std::chrono::milliseconds timeout,
                         const std::string &refusal, size_t piece_bytes, bool result_area);

  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{0};
  std::vector<int> peer_pids_;
  std::string name_;
  void *mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  size_t piece_bytes_ = 0;
  uint32_t round_ = 0;
  bool broken_ = false;
  std::mutex mutex_; ///< one sum at a time: the rounds of two would interleave
};

} // namespace accelerate::detail
