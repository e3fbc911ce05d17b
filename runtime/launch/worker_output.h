// Worker output for `accel launch`: whole lines, prefixed with the rank, never interleaved
// mid-line; optionally one log file per rank; the last stderr lines of each rank kept for the
// failure summary.
#pragma once

#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace accelerate::launch {

struct WorkerOutputOptions {
  int first_rank = 0;     ///< global rank of local worker 0
  bool prefix = true;     ///< "[rank3] " before each console line
  int only_rank = -1;     ///< when >= 0, the console shows this global rank only
  int tee = 3;            ///< with a log dir: streams also shown on the console (1 out, 2 err)
  std::string log_dir;    ///< one file per rank: rank<N>.log
  size_t tail_lines = 10; ///< stderr lines kept per rank for the summary
};

class WorkerOutput {
public:
  WorkerOutput(int local_workers, WorkerOutputOptions options);

  /// A chunk of local worker `local`'s stream (1 stdout, 2 stderr).
  void add(int local, int stream, std::string_view chunk);
  /// Writes out lines that had no newline yet (at the end of a run).
  void flush();
  /// The last stderr lines of local worker `local`.
  const std::deque<std::string> &stderr_tail(int local) const { return tails_[local]; }

private:
  void emit(int local, int stream, const std::string &line);

  WorkerOutputOptions options_;
  std::vector<std::string> pending_[2]; ///< per stream, per worker: text after the last newline
  std::vector<std::deque<std::string>> tails_;
  std::vector<std::unique_ptr<std::ofstream>> logs_;
};

} // namespace accelerate::launch
