#include "worker_output.h"

#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace accelerate::launch {

WorkerOutput::WorkerOutput(int local_workers, WorkerOutputOptions options)
    : options_(std::move(options)), tails_(local_workers) {
  pending_[0].resize(local_workers);
  pending_[1].resize(local_workers);
  if (!options_.log_dir.empty()) {
    std::filesystem::create_directories(options_.log_dir);
    for (int local = 0; local < local_workers; ++local) {
      const auto path = std::filesystem::path(options_.log_dir) /
                        ("rank" + std::to_string(options_.first_rank + local) + ".log");
      // Only the user reads the logs: a program's output may hold data or secrets. Created
      // 0600 (and made so if it was there before), then opened as a stream.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd >= 0) {
        ::fchmod(fd, 0600);
        ::close(fd);
      }
      logs_.push_back(std::make_unique<std::ofstream>(path, std::ios::trunc));
      if (!*logs_.back()) {
        throw std::runtime_error("cannot write the log file " + path.string());
      }
    }
  }
}

void WorkerOutput::add(int local, int stream, std::string_view chunk) {
  auto &pending = pending_[stream == 2 ? 1 : 0][local];
  pending.append(chunk);
  size_t start = 0;
  for (size_t newline; (newline = pending.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    emit(local, stream, pending.substr(start, newline - start));
  }
  pending.erase(0, start);
}

void WorkerOutput::flush() {
  for (int stream : {1, 2}) {
    auto &pending = pending_[stream - 1];
    for (size_t local = 0; local < pending.size(); ++local) {
      if (!pending[local].empty()) {
        emit(static_cast<int>(local), stream, pending[local]);
        pending[local].clear();
      }
    }
  }
  for (auto &log : logs_) {
    log->flush();
  }
}

void WorkerOutput::emit(int local, int stream, const std::string &line) {
  const int rank = options_.first_rank + local;
  // The summary shows the last stderr lines: a C++ backtrace that c10 logged must not push the
  // program's own message out of them.
  const bool backtrace =
      line.rfind("frame #", 0) == 0 || line.rfind("Exception raised from ", 0) == 0;
  if (stream == 2 && !backtrace) {
    auto &tail = tails_[local];
    tail.push_back(line);
    if (tail.size() > options_.tail_lines) {
      tail.pop_front();
    }
  }
  bool to_console = options_.only_rank < 0 || options_.only_rank == rank;
  if (!logs_.empty()) {
    *logs_[local] << line << '\n';
    to_console = to_console && (options_.tee & stream) != 0;
  }
  if (!to_console) {
    return;
  }
  // One write() per line: lines from different ranks never mix.
  std::string text = options_.prefix ? "[rank" + std::to_string(rank) + "] " : std::string();
  text += line;
  text += '\n';
  const int fd = stream == 2 ? STDERR_FILENO : STDOUT_FILENO;
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n <= 0) {
      break;
    }
    written += static_cast<size_t>(n);
  }
}

} // namespace accelerate::launch
