// How `accel launch` passes workers' output on (runtime/launch/worker_output.h): whole lines
// with the rank's prefix, the start of a line shown once it has waited kHoldTime, a '\r'
// progress bar at once with the prefix again after it, and a bounded amount held however long
// a line is. Time is passed in, so nothing here sleeps.
#include "worker_output.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

using accelerate::launch::WorkerOutput;
using accelerate::launch::WorkerOutputOptions;
using namespace std::chrono_literals;

// A pipe standing for the console: what WorkerOutput wrote so far, without blocking.
class Console {
public:
  Console() {
    EXPECT_EQ(::pipe2(fds_, O_CLOEXEC | O_NONBLOCK), 0);
    // Big enough for every test here but the long-line one, which drains as it goes.
    ::fcntl(fds_[1], F_SETPIPE_SZ, 1 << 20);
  }
  ~Console() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fd() const { return fds_[1]; }
  std::string take() {
    std::string text;
    char buffer[65536];
    for (ssize_t n; (n = ::read(fds_[0], buffer, sizeof(buffer))) > 0;) {
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }

private:
  int fds_[2] = {-1, -1};
};

WorkerOutputOptions to(const Console &out, const Console &err) {
  WorkerOutputOptions options;
  options.stdout_fd = out.fd();
  options.stderr_fd = err.fd();
  return options;
}

const auto t0 = WorkerOutput::Clock::time_point{} + 1h;

TEST(WorkerOutput, WholeLinesGetThePrefix) {
  Console out, err;
  WorkerOutput output(2, to(out, err));
  output.add(0, 1, "epoch 1\nepo", t0);
  output.add(1, 1, "rank one\n", t0);
  output.add(0, 1, "ch 2\n", t0 + 10ms);
  EXPECT_EQ(out.take(), "[rank0] epoch 1\n[rank1] rank one\n[rank0] epoch 2\n");
  EXPECT_EQ(err.take(), "");
}

TEST(WorkerOutput, APartialLineIsShownOnceItHasWaitedTheHoldTime) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  output.add(0, 1, "loading...", t0);
  EXPECT_EQ(output.flush_due(t0 + 50ms), WorkerOutput::kHoldTime - 50ms);
  EXPECT_EQ(out.take(), "");
  EXPECT_EQ(output.flush_due(t0 + WorkerOutput::kHoldTime), WorkerOutput::Clock::duration::max());
  EXPECT_EQ(out.take(), "[rank0] loading...");
  // The rest of the line follows without a second prefix.
  output.add(0, 1, " done\n", t0 + 1s);
  EXPECT_EQ(out.take(), " done\n");
  EXPECT_EQ(output.held_bytes(), 0u);
}

TEST(WorkerOutput, ACarriageReturnShowsTheProgressBarAtOnce) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  output.add(0, 2, "10%\r", t0);
  EXPECT_EQ(err.take(), "[rank0] 10%\r");
  output.add(0, 2, "20%\r30%", t0);
  EXPECT_EQ(err.take(), "[rank0] 20%\r");
  output.add(0, 2, "\rdone\r\n", t0);
  EXPECT_EQ(err.take(), "[rank0] 30%\r[rank0] done\r\n");
  // The summary keeps what the line showed last.
  ASSERT_EQ(output.stderr_tail(0).size(), 1u);
  EXPECT_EQ(output.stderr_tail(0).back(), "done");
}

// Line ends of both kinds in one chunk, and a chunk that is all progress bar: each piece gets
// its prefix, in order.
TEST(WorkerOutput, ManyLineEndsInOneChunk) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  output.add(0, 1, "a\rb\rc\nd\re\n\nf", t0);
  EXPECT_EQ(out.take(), "[rank0] a\r[rank0] b\r[rank0] c\n[rank0] d\r[rank0] e\n[rank0] \n");
  std::string bar, expected;
  for (int i = 0; i < 10000; ++i) {
    bar += std::to_string(i % 10) + "\r";
    expected += "[rank0] " + std::to_string(i % 10) + "\r";
  }
  output.add(0, 1, bar, t0);
  EXPECT_EQ(out.take(), "[rank0] f" + expected.substr(8));
}

TEST(WorkerOutput, AnotherRanksLineStartsOnALineOfItsOwn) {
  Console out, err;
  WorkerOutput output(2, to(out, err));
  output.add(0, 1, "step 1 ", t0);
  output.flush_due(t0 + 1s);
  output.add(1, 1, "hello\n", t0 + 1s);
  output.add(0, 1, "ok\n", t0 + 2s);
  EXPECT_EQ(out.take(), "[rank0] step 1 \n[rank1] hello\n[rank0] ok\n");
}

TEST(WorkerOutput, StderrTailKeepsWholeLinesShownInPieces) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  output.add(0, 2, "accelerate: rank 0 ", t0);
  output.flush_due(t0 + 1s);
  output.add(0, 2, "failed\nlast words", t0 + 2s);
  output.flush();
  EXPECT_EQ(err.take(), "[rank0] accelerate: rank 0 failed\n[rank0] last words\n");
  ASSERT_EQ(output.stderr_tail(0).size(), 2u);
  EXPECT_EQ(output.stderr_tail(0)[0], "accelerate: rank 0 failed");
  EXPECT_EQ(output.stderr_tail(0)[1], "last words");
}

TEST(WorkerOutput, AProgressBarLeftOpenIsEndedAtTheEnd) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  output.add(0, 1, "99%\r", t0);
  output.flush();
  EXPECT_EQ(out.take(), "[rank0] 99%\r\n");
}

// 200 MB without a newline (the issue's `head -c 200000000 /dev/zero | tr '\0' a`): what is held
// never exceeds kHoldBytes, every byte comes out once, behind one prefix.
TEST(WorkerOutput, ALineWithoutEndIsHeldBoundedAndPassedOn) {
  Console out, err;
  WorkerOutput output(1, to(out, err));
  const std::string chunk(65536, 'a');
  const size_t total = 200'000'000;
  size_t shown = 0, most_held = 0;
  std::string first;
  for (size_t sent = 0; sent < total;) {
    const size_t n = std::min(chunk.size(), total - sent);
    output.add(0, 1, std::string_view(chunk).substr(0, n), t0);
    sent += n;
    most_held = std::max(most_held, output.held_bytes());
    const auto text = out.take();
    if (first.size() < 16) {
      first += text.substr(0, 16);
    }
    shown += text.size();
  }
  output.flush();
  shown += out.take().size();
  EXPECT_LE(most_held, WorkerOutput::kHoldBytes);
  EXPECT_EQ(first.substr(0, 12), "[rank0] aaaa");
  EXPECT_EQ(shown, total + std::string("[rank0] \n").size());
}

} // namespace
