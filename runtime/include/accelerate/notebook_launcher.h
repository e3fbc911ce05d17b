// accelerate::notebook_launcher: run a training function on N processes from inside a program
// (a notebook, a test, a quick experiment), no command line needed.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace accelerate {

struct NotebookLauncherOptions {
  /// Prefix each line the workers print with "[rankN] ".
  bool prefix_output = true;
  /// The whole run's limit; past it every worker is stopped and the call throws.
  std::chrono::milliseconds timeout = std::chrono::hours(24);
};

namespace detail {

/// Forks `num_processes` workers with the variables `accel launch` sets (a free loopback port
/// for the rendezvous) and runs `body` in each; returns the bytes rank 0's body returned.
/// Throws std::runtime_error naming the rank and its error when a worker throws, crashes or is
/// killed, after stopping the others; refuses before forking when forking is unsafe.
std::string run_in_forked_workers(int num_processes, const std::function<std::string()> &body,
                                  const NotebookLauncherOptions &options);

/// Carries a function's result from rank 0 back to the caller.
template <typename T, typename = void> struct ResultCodec {
  static_assert(sizeof(T) == 0, "notebook_launcher returns void, arithmetic values, std::string, "
                                "torch::Tensor or std::vector<torch::Tensor>");
};
template <typename T> struct ResultCodec<T, std::enable_if_t<std::is_arithmetic_v<T>>> {
  static std::string encode(const T &value) {
    return std::string(reinterpret_cast<const char *>(&value), sizeof(T));
  }
  static T decode(const std::string &bytes) {
    T value{};
    std::memcpy(&value, bytes.data(), sizeof(T));
    return value;
  }
};
template <> struct ResultCodec<std::string> {
  static std::string encode(const std::string &value) { return value; }
  static std::string decode(const std::string &bytes) { return bytes; }
};
template <> struct ResultCodec<torch::Tensor> {
  static std::string encode(const torch::Tensor &value) {
    const auto bytes = torch::pickle_save(value.cpu());
    return std::string(bytes.begin(), bytes.end());
  }
  static torch::Tensor decode(const std::string &bytes) {
    return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toTensor();
  }
};
template <> struct ResultCodec<std::vector<torch::Tensor>> {
  static std::string encode(const std::vector<torch::Tensor> &value) {
    std::vector<torch::Tensor> on_cpu;
    for (const auto &tensor : value) {
      on_cpu.push_back(tensor.cpu());
    }
    const auto bytes = torch::pickle_save(c10::List<torch::Tensor>(on_cpu));
    return std::string(bytes.begin(), bytes.end());
  }
  static std::vector<torch::Tensor> decode(const std::string &bytes) {
    return torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toTensorVector();
  }
};

} // namespace detail

/// Runs fn(args...) on `num_processes` processes forked from this one and returns rank 0's
/// result. One process runs fn in the caller, without forking. See docs/runtime.md.
template <typename Fn, typename... Args>
auto notebook_launcher(Fn fn, int num_processes, const NotebookLauncherOptions &options = {},
                       Args... args) -> std::invoke_result_t<Fn &, Args &...> {
  using Result = std::invoke_result_t<Fn &, Args &...>;
  if (num_processes == 1) {
    return fn(args...);
  }
  auto bytes = detail::run_in_forked_workers(
      num_processes,
      [&]() -> std::string {
        if constexpr (std::is_void_v<Result>) {
          fn(args...);
          return {};
        } else {
          return detail::ResultCodec<Result>::encode(fn(args...));
        }
      },
      options);
  if constexpr (!std::is_void_v<Result>) {
    return detail::ResultCodec<Result>::decode(bytes);
  }
}

/// The same as notebook_launcher, under a plain name.
template <typename Fn, typename... Args>
auto launch_local(Fn fn, int num_processes, const NotebookLauncherOptions &options = {},
                  Args... args) {
  return notebook_launcher(std::move(fn), num_processes, options, std::move(args)...);
}

} // namespace accelerate
