#include "shared_memory_allreduce.h"

#include "job_segments.h"
#include "test_faults.h"

#include "process_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#ifdef __linux__
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace accelerate::detail {

// One cache line per rank, so that a rank announcing its progress does not disturb the lines
// the others poll. `phase` is the futex word.
struct alignas(64) SharedMemoryAllreduce::RankState {
  std::atomic<uint32_t> phase;
  std::atomic<uint32_t> waiters;     ///< processes sleeping on `phase`: only then is a wake needed
  std::atomic<uint64_t> total_bytes; ///< the size of the tensor being summed, checked by all
  std::atomic<uint64_t> area_offset; ///< sum_in_place: where in the area it lies, checked too
};

namespace {

// Segment layout: header, one RankState per rank, then (from a page boundary) one input area
// per rank and the result area, piece_bytes each.
struct Header {
  uint64_t magic;
  uint64_t nonce;
  uint64_t size;
  uint64_t piece_bytes;
};
constexpr uint64_t kMagic = 0x31756d732d636361; // "acc-smu1"
constexpr size_t kStatesOffset = 64;
static_assert(sizeof(Header) <= kStatesOffset);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

size_t data_offset(int size) {
  const size_t end_of_states = kStatesOffset + 64 * static_cast<size_t>(size);
  return (end_of_states + 4095) / 4096 * 4096;
}

size_t default_piece_bytes(int size) {
  // About 32 MiB in all (containers often give /dev/shm 64 MiB), 256 KiB to 4 MiB per area.
  const size_t share = (size_t{32} << 20) / static_cast<size_t>(size + 1);
  const size_t bytes = std::clamp(share, size_t{256} << 10, size_t{4} << 20);
  return bytes / 64 * 64; // every element size divides 64
}

bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0; // counters wrap
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

#ifdef __linux__
std::string first_line(const std::string &path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_target(const char *path) {
  char target[256];
  const ssize_t length = ::readlink(path, target, sizeof(target) - 1);
  return length > 0 ? std::string(target, static_cast<size_t>(length)) : std::string();
}

// Processes that agree on this see one /dev/shm (checked again with the nonce) and each
// other's pids, which is how a peer's exit is noticed. A process in another network namespace
// is another machine to the job (it was launched as one, e.g. with `ip netns exec`): its
// gradients take the network path, as they would between real machines.
std::string machine_identity() {
  std::string identity = first_line("/proc/sys/kernel/random/boot_id") + " " +
                         link_target("/proc/self/ns/pid") + " " + link_target("/proc/self/ns/net");
  // Tests pretend to be on two machines with this.
  if (const char *test = std::getenv("ACCELERATE_TEST_MACHINE_ID")) {
    identity += std::string(" ") + test;
  }
  return identity;
}

// The segment's name: after the job when a WorkerGroup started us, so that the group can
// remove it should rank 0 die before it does (job_segments.h); after rank 0's pid otherwise.
std::string new_segment_name(uint64_t nonce) {
  const char *job = std::getenv(launch::kJobIdVariable);
  const std::string prefix = job != nullptr && *job != '\0'
                                 ? launch::job_segment_prefix(job)
                                 : "accel-" + std::to_string(::getpid()) + "-";
  return "/" + prefix + std::to_string(nonce);
}

bool process_exited(int pid) {
  if (::kill(pid, 0) == -1 && errno == ESRCH) {
    return true;
  }
  // A zombie (exited, not yet reaped by its parent) still answers kill(pid, 0).
  const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
  const auto end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos || end_of_name + 2 >= stat.size()) {
    return false; // /proc hidden (hidepid): kill's answer and the timeout decide
  }
  const char state = stat[end_of_name + 2];
  return state == 'Z' || state == 'X';
}

long futex(std::atomic<uint32_t> *word, int op, uint32_t value, const timespec *timeout) {
  // Not FUTEX_PRIVATE: the word is shared between processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op, value, timeout, nullptr, 0);
}

std::string error_text(const std::string &what) { return what + ": " + std::strerror(errno); }

// Maps a segment; nullptr and *why_not when it cannot.
void *map_segment(int fd, size_t bytes, std::string *why_not) {
  void *mapping = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapping == MAP_FAILED) {
    *why_not = error_text("mmap");
    return nullptr;
  }
  return mapping;
}

// Rank 0: creates the segment with every page allocated up front (a full /dev/shm is an error
// here rather than a SIGBUS in the middle of training). Returns the mapping or nullptr.
void *create_segment(const std::string &name, size_t bytes, const Header &header,
                     std::string *why_not) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *why_not = error_text("shm_open(" + name + ")");
    return nullptr;
  }
  void *mapping = nullptr;
  if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    errno = error;
    *why_not = error_text("allocating " + std::to_string(bytes >> 20) + " MiB in /dev/shm");
  } else {
    mapping = map_segment(fd, bytes, why_not);
  }
  ::close(fd);
  if (mapping == nullptr) {
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  std::memcpy(mapping, &header, sizeof(header));
  return mapping;
}

// The other ranks: maps the segment rank 0 made and checks that it is that segment.
void *open_segment(const std::string &name, size_t bytes, const Header &expected,
                   std::string *why_not) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    *why_not = error_text("shm_open(" + name + ")");
    return nullptr;
  }
  struct stat info{};
  void *mapping = nullptr;
  if (::fstat(fd, &info) != 0 || info.st_uid != ::geteuid() || (info.st_mode & 0777) != 0600) {
    // Only a segment of ours: one that another user made, or could write, is not mapped.
    *why_not = name + " is not this user's private segment";
  } else if (static_cast<size_t>(info.st_size) != bytes) {
    *why_not = name + " does not have the expected size";
  } else {
    mapping = map_segment(fd, bytes, why_not);
  }
  ::close(fd);
  if (mapping != nullptr && std::memcmp(mapping, &expected, sizeof(expected)) != 0) {
    *why_not = name + " is not the segment rank 0 made (another /dev/shm?)";
    ::munmap(mapping, bytes);
    mapping = nullptr;
  }
  return mapping;
}
#endif

std::string key(const std::string &name, int rank) { return name + "/" + std::to_string(rank); }

// A value `peer` puts in the store. Its absence past the timeout means the peer exited or
// hangs: say so in words rather than with the store's key names.
std::string answer_of(c10d::Store &store, const std::string &name, int peer, int rank,
                      std::chrono::milliseconds timeout) {
  try {
    return store.get_to_str(name);
  } catch (const std::exception &error) {
    throw std::runtime_error("accelerate: rank " + std::to_string(rank) +
                             " gave up setting up shared-memory gradient sums: rank " +
                             std::to_string(peer) + " did not answer within " +
                             seconds_text(timeout) + " (it exited or hangs): " + message_of(error));
  }
}

} // namespace

SharedMemoryAllreduce::Verdict SharedMemoryAllreduce::connect(c10d::Store &store, int rank,
                                                              int size,
                                                              std::chrono::milliseconds timeout,
                                                              const std::string &refusal,
                                                              size_t piece_bytes) {
  return connect(store, rank, size, timeout, refusal, piece_bytes, /*result_area=*/true);
}

SharedMemoryAllreduce::Verdict
SharedMemoryAllreduce::connect_areas(c10d::Store &store, int rank, int size,
                                     std::chrono::milliseconds timeout, size_t area_bytes) {
  return connect(store, rank, size, timeout, "", (area_bytes + 63) / 64 * 64,
                 /*result_area=*/false);
}

SharedMemoryAllreduce::Verdict
SharedMemoryAllreduce::connect(c10d::Store &store, int rank, int size,
                               std::chrono::milliseconds timeout, const std::string &refusal,
                               size_t piece_bytes, bool result_area) {
  Verdict verdict;
#ifndef __linux__
  (void)store, (void)rank, (void)size, (void)timeout, (void)refusal, (void)piece_bytes,
      (void)result_area;
  verdict.why_not = "shared-memory all-reduce is implemented for Linux only";
  return verdict;
#else
  if (size < 2) {
    verdict.why_not = "one process";
    return verdict;
  }
  std::unique_ptr<SharedMemoryAllreduce> self(new SharedMemoryAllreduce());
  self->rank_ = rank;
  self->size_ = size;
  self->timeout_ = timeout;
  self->piece_bytes_ = piece_bytes != 0 ? piece_bytes / 64 * 64 : default_piece_bytes(size);
  const size_t areas = static_cast<size_t>(size) + (result_area ? 1 : 0);
  self->mapping_bytes_ = data_offset(size) + areas * self->piece_bytes_;

  // 1. Who is willing, and who runs where.
  store.set(key("refusal", rank), "-" + refusal);
  store.set(key("machine", rank), machine_identity());
  store.set(key("pid", rank), std::to_string(::getpid()));
  std::string problem; // the reason not to use shared memory, if any
  std::vector<std::string> machines;
  for (int peer = 0; peer < size; ++peer) {
    const auto answer = [&](const char *name) {
      return answer_of(store, key(name, peer), peer, rank, timeout);
    };
    const auto theirs = answer("refusal").substr(1);
    if (problem.empty() && !theirs.empty()) {
      problem = "rank " + std::to_string(peer) + ": " + theirs;
    }
    machines.push_back(answer("machine"));
    self->peer_pids_.push_back(std::stoi(answer("pid")));
  }
  for (int peer = 0; peer < size && problem.empty(); ++peer) {
    if (machines[peer] != machines[0]) {
      problem = "rank " + std::to_string(peer) + " runs on another machine than rank 0";
    }
  }

  const bool willing_and_together = problem.empty();

  // 2. Rank 0 makes the segment and names it; the others map it.
  std::random_device entropy;
  Header header{kMagic, (uint64_t{entropy()} << 32) | entropy(), static_cast<uint64_t>(size),
                self->piece_bytes_};
  // From its creation on, the name leaves /dev/shm on every way out of here, a store that
  // throws because a peer died included.
  struct UnlinkOnExit {
    std::string name;
    ~UnlinkOnExit() {
      if (!name.empty()) {
        ::shm_unlink(name.c_str());
      }
    }
  } unlink_on_exit;
  if (rank == 0) {
    if (problem.empty()) {
      self->name_ = new_segment_name(header.nonce);
      self->mapping_ = create_segment(self->name_, self->mapping_bytes_, header, &problem);
      if (self->mapping_ != nullptr) {
        unlink_on_exit.name = self->name_;
      }
    }
    store.set("segment",
              problem.empty() ? self->name_ + " " + std::to_string(header.nonce) : "-" + problem);
  } else {
    const std::string segment = answer_of(store, "segment", 0, rank, timeout);
    if (segment.rfind('-', 0) == 0) {
      problem = segment.substr(1);
    } else {
      const auto space = segment.find(' ');
      self->name_ = segment.substr(0, space);
      header.nonce = std::stoull(segment.substr(space + 1));
      self->mapping_ = open_segment(self->name_, self->mapping_bytes_, header, &problem);
      if (!problem.empty()) {
        problem = "rank " + std::to_string(rank) + ": " + problem;
      }
    }
  }

  // 3. One verdict for all: rank 0 collects every rank's answer, removes the name (each
  // mapping keeps the memory; nothing is left in /dev/shm), then announces it.
  test_fault_point("shared-memory");
  store.set(key("mapped", rank), "-" + problem);
  if (rank == 0) {
    for (int peer = 0; peer < size && verdict.why_not.empty(); ++peer) {
      verdict.why_not = answer_of(store, key("mapped", peer), peer, rank, timeout).substr(1);
    }
    if (self->mapping_ != nullptr) {
      ::shm_unlink(self->name_.c_str());
      unlink_on_exit.name.clear();
    }
    store.set("verdict", "-" + verdict.why_not);
  } else {
    verdict.why_not = answer_of(store, "verdict", 0, rank, timeout).substr(1);
  }
  if (verdict.why_not.empty()) {
    verdict.allreduce = std::move(self);
  } else {
    verdict.failed = willing_and_together; // (self's destructor unmaps)
  }
  return verdict;
#endif
}

SharedMemoryAllreduce::~SharedMemoryAllreduce() {
#ifdef __linux__
  if (mapping_ != nullptr) {
    ::munmap(mapping_, mapping_bytes_);
  }
#endif
}

SharedMemoryAllreduce::RankState &SharedMemoryAllreduce::state(int rank) const {
  return *reinterpret_cast<RankState *>(static_cast<std::byte *>(mapping_) + kStatesOffset +
                                        64 * static_cast<size_t>(rank));
}

std::byte *SharedMemoryAllreduce::input(int rank) const {
  return static_cast<std::byte *>(mapping_) + data_offset(size_) +
         static_cast<size_t>(rank) * piece_bytes_;
}

std::byte *SharedMemoryAllreduce::result() const { return input(size_); }

std::byte *SharedMemoryAllreduce::begin_collective(const at::Tensor &tensor) {
  if (broken_) {
    throw std::runtime_error("shared-memory all-reduce: an earlier one failed on this process");
  }
  if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
    throw std::invalid_argument("shared-memory all-reduce: needs a contiguous CPU tensor");
  }
  const size_t bytes = tensor.numel() * tensor.element_size();
  state(rank_).total_bytes.store(bytes, std::memory_order_relaxed); // published with the phase
  state(rank_).area_offset.store(0, std::memory_order_relaxed);
  return static_cast<std::byte *>(tensor.data_ptr());
}

void SharedMemoryAllreduce::sum(const at::Tensor &tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto *data = begin_collective(tensor);
  const size_t bytes = tensor.numel() * tensor.element_size();
  for (size_t done = 0; done < bytes; done += piece_bytes_) {
    sum_piece(data + done, std::min(piece_bytes_, bytes - done), tensor);
  }
}

void SharedMemoryAllreduce::broadcast(const at::Tensor &tensor, int root) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (root < 0 || root >= size_) {
    throw std::invalid_argument("shared-memory broadcast: no process " + std::to_string(root));
  }
  auto *data = begin_collective(tensor);
  const size_t bytes = tensor.numel() * tensor.element_size();
  for (size_t done = 0; done < bytes; done += piece_bytes_) {
    broadcast_piece(data + done, std::min(piece_bytes_, bytes - done), root);
  }
}

void SharedMemoryAllreduce::check_sizes_match() {
  const uint64_t mine = state(rank_).total_bytes.load(std::memory_order_relaxed);
  const uint64_t my_offset = state(rank_).area_offset.load(std::memory_order_relaxed);
  for (int peer = 0; peer < size_; ++peer) {
    const uint64_t theirs = state(peer).total_bytes.load(std::memory_order_relaxed);
    const uint64_t their_offset = state(peer).area_offset.load(std::memory_order_relaxed);
    // Summing would mix unrelated memory: the processes' models differ.
    const std::string model_hint = " (do all processes build the same model?)";
    if (theirs != mine) {
      fail("process " + std::to_string(peer) + " sums " + std::to_string(theirs) +
           " bytes where process " + std::to_string(rank_) + " sums " + std::to_string(mine) +
           " bytes" + model_hint);
    }
    if (their_offset != my_offset) {
      fail("process " + std::to_string(peer) + " sums at byte " + std::to_string(their_offset) +
           " of its area where process " + std::to_string(rank_) + " sums at byte " +
           std::to_string(my_offset) + model_hint);
    }
  }
}

void SharedMemoryAllreduce::sum_in_place(const at::Tensor &tensor, double scale) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto *data = begin_collective(tensor);
  const size_t bytes = tensor.numel() * tensor.element_size();
  const std::byte *own = own_area();
  if (bytes != 0 && (data < own || data + bytes > own + piece_bytes_)) {
    throw std::invalid_argument("shared-memory all-reduce: the tensor is not in this process's "
                                "area of the segment");
  }
  // (An empty tensor has no data pointer; it still takes its round, as on every process.)
  const auto offset = bytes == 0 ? size_t{0} : static_cast<size_t>(data - own);
  state(rank_).area_offset.store(offset, std::memory_order_relaxed); // published with the phase
  // sum_piece's two barriers, with the areas themselves as inputs and outputs: after the first,
  // every area holds its process's values; process r then owns part r of every area until
  // the second (nobody else reads or writes it), and after it every area holds the sums.
  ++round_;
  const uint32_t inputs_ready = 2 * round_ - 1;
  const uint32_t sums_ready = 2 * round_;
  publish(inputs_ready);
  test_fault_point("all-reduce");
  wait_for_all(inputs_ready);
  check_sizes_match();

  const auto element = static_cast<size_t>(tensor.element_size());
  const auto elements = static_cast<int64_t>(bytes / element);
  const int64_t begin = elements * rank_ / size_;
  const int64_t end = elements * (rank_ + 1) / size_;
  if (end > begin) {
    const auto options = tensor.options();
    const auto part = [&](int peer) {
      return at::from_blob(input(peer) + offset + begin * element, {end - begin}, options);
    };
    auto sum = part(0);
    for (int peer = 1; peer < size_; ++peer) {
      sum.add_(part(peer)); // in rank order, as sum() adds
    }
    if (scale != 1.0) {
      sum.mul_(scale); // while the part is still in this core's caches
    }
    for (int peer = 1; peer < size_; ++peer) {
      part(peer).copy_(sum);
    }
  }
  publish(sums_ready);
  wait_for_all(sums_ready);
}

void SharedMemoryAllreduce::sum_piece(std::byte *data, size_t bytes, const at::Tensor &like) {
  // A reduce-scatter then an all-gather through the segment: every rank copies its piece in;
  // rank r sums part r of all inputs (in rank order) into the result; every rank copies the
  // result out. Two barriers; one buffer each suffices because a rank can only write its
  // input for round n+1 after everyone has finished reading round n's (they announced round
  // n's second phase only after their sums).
  ++round_;
  const uint32_t inputs_ready = 2 * round_ - 1;
  const uint32_t sums_ready = 2 * round_;

  std::memcpy(input(rank_), data, bytes);
  publish(inputs_ready);
  test_fault_point("all-reduce");
  wait_for_all(inputs_ready);
  check_sizes_match();

  const auto element = static_cast<size_t>(like.element_size());
  const auto elements = static_cast<int64_t>(bytes / element);
  const int64_t begin = elements * rank_ / size_;
  const int64_t end = elements * (rank_ + 1) / size_;
  if (end > begin) {
    const auto options = like.options();
    const auto part = [&](std::byte *area) {
      return at::from_blob(area + begin * element, {end - begin}, options);
    };
    auto sum = part(result());
    at::add_out(sum, part(input(0)), part(input(1)));
    for (int peer = 2; peer < size_; ++peer) {
      sum.add_(part(input(peer)));
    }
  }
  publish(sums_ready);
  wait_for_all(sums_ready);
  std::memcpy(data, result(), bytes);
}

void SharedMemoryAllreduce::broadcast_piece(std::byte *data, size_t bytes, int root) {
  // The rounds of sum_piece, through the root's input area: the root copies its piece in, the
  // others copy it out once it is there, and the second barrier keeps the root from writing
  // its next piece (or its next sum's) before everyone has read this one.
  ++round_;
  const uint32_t piece_ready = 2 * round_ - 1;
  const uint32_t piece_read = 2 * round_;

  if (rank_ == root) {
    std::memcpy(input(root), data, bytes);
  }
  publish(piece_ready);
  wait_for_all(piece_ready);
  check_sizes_match();
  if (rank_ != root) {
    std::memcpy(data, input(root), bytes);
  }
  publish(piece_read);
  wait_for_all(piece_read);
}

void SharedMemoryAllreduce::publish(uint32_t phase) {
  auto &mine = state(rank_);
  mine.phase.store(phase, std::memory_order_seq_cst);
  // Paired with wait_for: a sleeper counts itself before re-reading phase, so either it sees
  // the new phase or this sees it waiting.
  if (mine.waiters.load(std::memory_order_seq_cst) != 0) {
#ifdef __linux__
    futex(&mine.phase, FUTEX_WAKE, INT_MAX, nullptr);
#endif
  }
}

void SharedMemoryAllreduce::wait_for_all(uint32_t phase) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) {
      wait_for(peer, phase);
    }
  }
}

void SharedMemoryAllreduce::wait_for(int peer, uint32_t phase) {
  auto &theirs = state(peer);
  // At the second barrier the peer arrives within microseconds: spin. At the first, it is
  // one training step's jitter away, tens of microseconds to a millisecond or two: keep
  // polling, but give the core to anything else runnable on it (another program; a peer
  // sharing this core) at every poll. Sleeping in the kernel is what costs here: the idle
  // core halts, and waking it is slower than the wait was (on a 2-vCPU VM the shipped
  // 50 µs spin then futex cost a quarter of the MLP benchmark's 2-process throughput).
  // Only a longer wait (a peer evaluating, checkpointing, loading) sleeps on the futex.
  const auto start = std::chrono::steady_clock::now();
  const auto spin_until = start + std::chrono::microseconds(50);
  const auto poll_until = start + std::chrono::milliseconds(2);
  for (int i = 0;; ++i) {
    if (reached(theirs.phase.load(std::memory_order_acquire), phase)) {
      return;
    }
    if (i % 64 == 63) {
      const auto now = std::chrono::steady_clock::now();
      if (now > poll_until) {
        break;
      }
      if (now > spin_until) {
#ifdef __linux__
        ::sched_yield();
#endif
      }
    }
    cpu_relax();
  }
#ifdef __linux__
  const auto deadline = start + timeout_;
  while (true) {
    theirs.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = theirs.phase.load(std::memory_order_seq_cst);
    if (!reached(seen, phase)) {
      // Wake up now and then to notice a peer that is gone.
      const timespec slice{0, 50 * 1000 * 1000};
      futex(&theirs.phase, FUTEX_WAIT, seen, &slice);
    }
    theirs.waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (reached(theirs.phase.load(std::memory_order_acquire), phase)) {
      return;
    }
    if (process_exited(peer_pids_[peer])) {
      fail("process " + std::to_string(peer) + " (pid " + std::to_string(peer_pids_[peer]) +
           ") exited before contributing its part");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      fail("process " + std::to_string(peer) + " did not contribute its part within " +
           seconds_text(timeout_));
    }
  }
#endif
}

void SharedMemoryAllreduce::fail(const std::string &why) {
  broken_ = true;
  throw std::runtime_error("shared-memory all-reduce: " + why);
}

} // namespace accelerate::detail
