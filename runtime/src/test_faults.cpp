#include "test_faults.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace accelerate::detail {
namespace {

struct PlannedFault {
  std::string point;
  long occurrence = 1;
  std::string rank; // "*" for any
  std::string action;
};

// The plan, parsed once; a malformed one is a test's mistake and stops the process loudly.
const PlannedFault *planned_fault() {
  static const PlannedFault *const plan = []() -> const PlannedFault * {
    const char *text = std::getenv("ACCELERATE_TEST_FAULT");
    if (text == nullptr || *text == '\0') {
      return nullptr;
    }
    const std::string spec = text;
    const auto first = spec.find(':');
    const auto second = first == std::string::npos ? first : spec.find(':', first + 1);
    auto *fault = new PlannedFault();
    if (second != std::string::npos) {
      fault->point = spec.substr(0, first);
      fault->rank = spec.substr(first + 1, second - first - 1);
      fault->action = spec.substr(second + 1);
      if (const auto at = fault->point.find('@'); at != std::string::npos) {
        fault->occurrence = std::atol(fault->point.c_str() + at + 1);
        fault->point.resize(at);
      }
    }
    const bool known_action = fault->action == "kill" || fault->action == "segv" ||
                              fault->action == "exit" || fault->action == "hang" ||
                              fault->action == "stall";
    if (!known_action || fault->occurrence < 1 || fault->rank.empty()) {
      std::fprintf(stderr,
                   "accelerate: ACCELERATE_TEST_FAULT='%s' is not POINT[@N]:RANK:ACTION "
                   "(ACTION kill, segv, exit, hang or stall)\n",
                   text);
      std::_Exit(2);
    }
    return fault;
  }();
  return plan;
}

[[noreturn]] void fail_now(const std::string &action) {
  if (action == "kill") {
    std::raise(SIGKILL);
  } else if (action == "segv") {
    std::signal(SIGSEGV, SIG_DFL); // whatever handler LibTorch installed, die of it
    std::raise(SIGSEGV);
  } else if (action == "hang") {
    for (;;) {
      ::pause();
    }
  }
  std::_Exit(1);
}

} // namespace

void test_fault_point(std::string_view point) {
  const PlannedFault *fault = planned_fault();
  if (fault == nullptr || point != fault->point) {
    return;
  }
  if (fault->rank != "*") {
    const char *rank = std::getenv("RANK");
    if (fault->rank != (rank != nullptr ? rank : "0")) {
      return;
    }
  }
  static std::atomic<long> reached{0};
  if (++reached != fault->occurrence) {
    return;
  }
  if (fault->action == "stall") {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return;
  }
  fail_now(fault->action);
}

} // namespace accelerate::detail
