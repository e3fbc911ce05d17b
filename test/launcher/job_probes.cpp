#include "job_probes.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace accel_test {
namespace fs = std::filesystem;

std::string write_pid(const std::string &dir) {
  return "echo $$ > " + dir + "/$RANK.tmp && mv " + dir + "/$RANK.tmp " + dir + "/$RANK.pid";
}

std::vector<pid_t> read_pids(const std::string &dir) {
  std::vector<pid_t> pids;
  for (const auto &entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".pid") {
      std::ifstream in(entry.path());
      pid_t pid = 0;
      if (in >> pid && pid > 0) {
        pids.push_back(pid);
      }
    }
  }
  return pids;
}

bool alive(pid_t pid) { return kill(pid, 0) == 0; }

bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

bool wait_until(const std::function<bool()> &condition, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

std::vector<pid_t> processes_with_variable(const std::string &name, const std::string &value) {
  const std::string wanted = name + "=" + value;
  std::vector<pid_t> found;
  for (const auto &entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    const std::string environment((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
    // Entries are NUL-terminated: match a whole one.
    for (size_t start = 0; start < environment.size();) {
      const size_t end = environment.find('\0', start);
      const size_t length = (end == std::string::npos ? environment.size() : end) - start;
      if (environment.compare(start, length, wanted) == 0 && running(std::stoi(pid))) {
        found.push_back(std::stoi(pid));
        break;
      }
      start += length + 1;
    }
  }
  return found;
}

std::vector<std::string> shared_memory_entries(const std::string &prefix) {
  std::vector<std::string> found;
  std::error_code error;
  for (const auto &entry : fs::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) == 0) {
      found.push_back(name);
    }
  }
  return found;
}

} // namespace accel_test
