// Worker output for `accel launch`: lines prefixed with the rank, whole where the worker writes
// them whole; optionally one log file per rank; the last stderr lines of each rank kept for the
// failure summary.
#pragma once

#include <chrono>
#include <deque>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace accelerate::launch {

struct WorkerOutputOptions {
  int first_rank = 0;     ///< global rank of local worker 0
  bool prefix = true;     ///< "[rank3] " before each console line
  int only_rank = -1;     ///< when >= 0, the console shows this global rank only
  int tee = 3;            ///< with a log dir: streams also shown on the console (1 out, 2 err)
  std::string log_dir;    ///< one file per rank: rank<N>.log
  size_t tail_lines = 10; ///< stderr lines kept per rank for the summary
  int stdout_fd = STDOUT_FILENO; ///< where the console's stream 1 goes
  int stderr_fd = STDERR_FILENO; ///< and stream 2
};

/// Passes workers' output on as it arrives, in pieces that keep lines whole where it can:
/// a line is written when its newline arrives; text before a `\r` (a progress bar) at once,
/// the prefix written again after it; text with no end yet once it is kHoldTime old
/// (flush_due) or kHoldBytes long, the rest of its line following later without a prefix.
/// Holds at most kHoldBytes per stream of each worker, however long a line is, and looks at
/// each byte once.
class WorkerOutput {
public:
  using Clock = std::chrono::steady_clock;
  /// How long the start of a line waits for its end before it is shown.
  static constexpr std::chrono::milliseconds kHoldTime{200};
  /// How much of a line is held, at most, before it is shown.
  static constexpr size_t kHoldBytes = 64 * 1024;
  /// How much of a stderr line the failure summary keeps.
  static constexpr size_t kTailLineBytes = 4096;

  /// With a log directory: creates it if needed and each rank's log (0600); throws
  /// std::runtime_error naming --log_dir and the file when it cannot, and refuses to write a
  /// log through a symbolic link.
  WorkerOutput(int local_workers, WorkerOutputOptions options);
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput &) = delete;
  WorkerOutput &operator=(const WorkerOutput &) = delete;

  /// A chunk of local worker `local`'s stream (1 stdout, 2 stderr), arrived at `now`.
  void add(int local, int stream, std::string_view chunk, Clock::time_point now = Clock::now());
  /// Shows the text held since kHoldTime before `now` or earlier; returns how long until the
  /// next held text is due (Clock::duration::max() when nothing is held).
  Clock::duration flush_due(Clock::time_point now = Clock::now());
  /// Writes out what is held and ends an unfinished line (at the end of a run).
  void flush();
  /// The last stderr lines of local worker `local`.
  const std::deque<std::string> &stderr_tail(int local) const { return tails_[local]; }
  /// Bytes held, over every worker and stream (for tests of the bound).
  size_t held_bytes() const;

private:
  /// One stream of one worker.
  struct Stream {
    std::string held; ///< text of the current piece not shown yet
    Clock::time_point held_since;
    bool mid_line = false;     ///< part of the current console line was shown (no prefix now)
    std::string tail_line;     ///< the current stderr line, for the summary (capped)
    bool after_return = false; ///< the last piece ended with '\r'
  };

  /// Shows `text` (the held text and what follows it up to here) ending with `end` ('\n',
  /// '\r', or 0 for a piece of an unfinished line): gathers it for write_out().
  void show(int local, int stream, std::string_view text, char end);
  void end_tail_line(int local, Stream &state);
  /// Writes what show() gathered: one write() per console stream and per log.
  void write_out();
  void write_all(int fd, std::string_view text);

  WorkerOutputOptions options_;
  std::vector<Stream> streams_[2]; ///< per stream, per worker
  std::vector<std::deque<std::string>> tails_;
  std::vector<int> logs_;            ///< one file descriptor per rank, with a log directory
  std::string console_out_[2];       ///< gathered for stdout and stderr, not written yet
  std::vector<std::string> log_out_; ///< gathered for each log, not written yet
  /// Per console stream: the local worker whose unfinished line the console shows, or -1.
  int open_line_[2] = {-1, -1};
};

} // namespace accelerate::launch
