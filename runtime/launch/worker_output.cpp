#include "worker_output.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <sys/stat.h>

namespace accelerate::launch {
namespace {

// The line ends ('\n' and '\r') of one chunk, in order, each byte looked at once however many
// there are: the next '\n' is found once and kept until passed, and '\r' is searched for only
// up to it (memchr runs at memory speed; string_view::find_first_of compares each byte with
// each end in turn).
class LineEnds {
public:
  explicit LineEnds(std::string_view text) : text_(text) {}
  /// The first line end at or after `from`, or npos.
  size_t next(size_t from) {
    if (newline_ != std::string_view::npos && newline_ < from) {
      newline_ = find('\n', from, text_.size());
    } else if (!searched_) {
      newline_ = find('\n', from, text_.size());
      searched_ = true;
    }
    const size_t limit = newline_ == std::string_view::npos ? text_.size() : newline_;
    const size_t ret = find('\r', from, limit);
    return ret != std::string_view::npos ? ret : newline_;
  }

private:
  size_t find(char c, size_t from, size_t until) const {
    if (from >= until) {
      return std::string_view::npos;
    }
    const auto *at = static_cast<const char *>(std::memchr(text_.data() + from, c, until - from));
    return at == nullptr ? std::string_view::npos : static_cast<size_t>(at - text_.data());
  }

  std::string_view text_;
  size_t newline_ = std::string_view::npos;
  bool searched_ = false;
};

} // namespace

WorkerOutput::WorkerOutput(int local_workers, WorkerOutputOptions options)
    : options_(std::move(options)), tails_(local_workers) {
  streams_[0].resize(local_workers);
  streams_[1].resize(local_workers);
  if (options_.log_dir.empty()) {
    return;
  }
  const std::filesystem::path dir = options_.log_dir;
  if (std::error_code error; !std::filesystem::create_directories(dir, error) && error) {
    throw std::runtime_error("--log_dir " + dir.string() +
                             ": cannot create the directory: " + error.message());
  }
  for (int local = 0; local < local_workers; ++local) {
    const auto path = dir / ("rank" + std::to_string(options_.first_rank + local) + ".log");
    // Only the user reads the logs: a program's output may hold data or secrets. Created 0600
    // (and made so if it was there before). Never through a symbolic link: one left in the
    // directory could point the log at any file the user can write.
    const int fd =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      const int error = errno;
      for (int open : logs_) {
        ::close(open);
      }
      logs_.clear();
      throw std::runtime_error(
          "--log_dir: cannot write the log " + path.string() + ": " +
          (error == ELOOP ? std::string("it is a symbolic link (remove it; logs are not written "
                                        "through links)")
                          : std::string(std::strerror(error))));
    }
    ::fchmod(fd, 0600);
    logs_.push_back(fd);
  }
  log_out_.resize(logs_.size());
}

WorkerOutput::~WorkerOutput() {
  for (int fd : logs_) {
    ::close(fd);
  }
}

void WorkerOutput::add(int local, int stream, std::string_view chunk, Clock::time_point now) {
  auto &state = streams_[stream == 2 ? 1 : 0][local];
  LineEnds ends(chunk);
  for (size_t at = 0; at < chunk.size();) {
    const size_t end = ends.next(at);
    if (end == std::string_view::npos) {
      const auto rest = chunk.substr(at);
      if (state.held.size() + rest.size() < kHoldBytes) {
        if (state.held.empty()) {
          state.held_since = now;
        }
        state.held.append(rest);
        break;
      }
      // A long line: shown in pieces, so that what is held stays bounded.
      if (!state.held.empty()) {
        show(local, stream, state.held, 0);
        state.held.clear();
      }
      show(local, stream, rest, 0);
      break;
    }
    if (state.held.empty()) {
      show(local, stream, chunk.substr(at, end - at), chunk[end]);
    } else {
      state.held.append(chunk.substr(at, end - at));
      show(local, stream, state.held, chunk[end]);
      state.held.clear();
    }
    at = end + 1;
  }
  write_out();
}

WorkerOutput::Clock::duration WorkerOutput::flush_due(Clock::time_point now) {
  auto next = Clock::duration::max();
  for (int index : {0, 1}) {
    for (size_t local = 0; local < streams_[index].size(); ++local) {
      auto &state = streams_[index][local];
      if (state.held.empty()) {
        continue;
      }
      const auto due = state.held_since + kHoldTime;
      if (due <= now) {
        show(static_cast<int>(local), index + 1, state.held, 0);
        state.held.clear();
      } else {
        next = std::min(next, due - now);
      }
    }
  }
  write_out();
  return next;
}

void WorkerOutput::flush() {
  for (int index : {0, 1}) {
    for (size_t local = 0; local < streams_[index].size(); ++local) {
      auto &state = streams_[index][local];
      if (!state.held.empty() || state.mid_line) {
        show(static_cast<int>(local), index + 1, state.held, '\n');
        state.held.clear();
      } else if (!state.tail_line.empty()) {
        end_tail_line(static_cast<int>(local), state); // it ended with '\r'
      }
    }
  }
  // A progress bar's last '\r': the launcher's own messages start on a line of their own.
  for (int index : {0, 1}) {
    if (open_line_[index] >= 0) {
      console_out_[index] += '\n';
      open_line_[index] = -1;
    }
  }
  write_out();
}

void WorkerOutput::write_out() {
  for (int index : {0, 1}) {
    if (!console_out_[index].empty()) {
      write_all(index == 0 ? options_.stdout_fd : options_.stderr_fd, console_out_[index]);
      console_out_[index].clear();
    }
  }
  for (size_t local = 0; local < log_out_.size(); ++local) {
    if (!log_out_[local].empty()) {
      write_all(logs_[local], log_out_[local]);
      log_out_[local].clear();
    }
  }
}

size_t WorkerOutput::held_bytes() const {
  size_t held = 0;
  for (const auto &streams : streams_) {
    for (const auto &state : streams) {
      held += state.held.size();
    }
  }
  return held;
}

void WorkerOutput::end_tail_line(int local, Stream &state) {
  // The summary shows the last stderr lines: a C++ backtrace that c10 logged must not push the
  // program's own message out of them.
  const auto &line = state.tail_line;
  const bool backtrace =
      line.rfind("frame #", 0) == 0 || line.rfind("Exception raised from ", 0) == 0;
  if (!backtrace) {
    auto &tail = tails_[local];
    tail.push_back(line);
    if (tail.size() > options_.tail_lines) {
      tail.pop_front();
    }
  }
  state.tail_line.clear();
}

void WorkerOutput::show(int local, int stream, std::string_view text, char end) {
  if (text.empty() && end == 0) {
    return;
  }
  const int index = stream == 2 ? 1 : 0;
  auto &state = streams_[index][local];
  const int rank = options_.first_rank + local;
  // "done\r\n" ends the line "done": the '\n' alone gets no prefix of its own.
  const bool bare_newline = end == '\n' && text.empty() && state.after_return;

  if (stream == 2) {
    if (state.after_return && !text.empty()) {
      state.tail_line.clear(); // what followed a '\r' replaces what the line showed
    }
    state.tail_line.append(
        text.substr(0, kTailLineBytes - std::min(kTailLineBytes, state.tail_line.size())));
    if (end == '\n') {
      end_tail_line(local, state);
    }
  }
  if (end != 0) {
    state.after_return = end == '\r';
  } else if (!text.empty()) {
    state.after_return = false;
  }

  bool to_console = options_.only_rank < 0 || options_.only_rank == rank;
  if (!logs_.empty()) {
    log_out_[local].append(text);
    if (end != 0) {
      log_out_[local] += end;
    }
    to_console = to_console && (options_.tee & stream) != 0;
  }
  if (!to_console) {
    return;
  }
  // Pieces are gathered and written together (write_out): a line shown whole is never cut by
  // another rank's, and a progress bar's many '\r' cost one write() per read, not one each.
  auto &out = console_out_[index];
  int &open = open_line_[index];
  if (open >= 0 && open != local) {
    // Another rank's unfinished line is on the console: this one starts on a line of its own,
    // and the rest of that one gets its prefix again.
    out += '\n';
    streams_[index][open].mid_line = false;
    open = -1;
  }
  if (!state.mid_line && options_.prefix && !bare_newline) {
    out += "[rank" + std::to_string(rank) + "] ";
  }
  out.append(text);
  if (end != 0) {
    out += end;
  }
  state.mid_line = end == 0;
  open = end == '\n' ? -1 : local;
}

void WorkerOutput::write_all(int fd, std::string_view text) {
  for (size_t written = 0; written < text.size();) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    written += static_cast<size_t>(n);
  }
}

} // namespace accelerate::launch
