#include "launch_command.h"

#include "listen_socket.h"
#include "option_values.h"
#include "worker_group.h"
#include "worker_output.h"

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace accel::cli {
namespace {

constexpr int kDefaultPort = 29500;

std::atomic<int> g_stop_signal{0};

extern "C" void remember_signal(int signal) { g_stop_signal.store(signal); }

// Binds the rendezvous port for rank 0's store. On one machine a busy port is replaced by a
// free one; across machines every launcher must agree on it, so a busy port is an error.
int bind_store_socket(const std::string &address, int &port, bool single_machine) {
  try {
    return accelerate::detail::listen_on(address, port);
  } catch (const accelerate::detail::ListenError &error) {
    if (!single_machine) {
      // Only a busy port is helped by another port.
      const std::string advice =
          error.error == EADDRINUSE ? " (choose another --main_process_port)"
          : error.error == EADDRNOTAVAIL
              ? " (--main_process_ip " + address +
                    " is not an address of this machine; machine 0 hosts the rendezvous, so "
                    "give every machine one of machine 0's own addresses)"
              : "";
      throw std::runtime_error(error.what() + advice);
    }
    if (error.error != EADDRINUSE) {
      throw; // one machine binds 127.0.0.1: anything but a busy port is not ours to work around
    }
  }
  const int fd = accelerate::detail::listen_on(address, 0);
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr *>(&bound), &length);
  const int busy = port;
  port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 &>(bound).sin6_port
                                           : reinterpret_cast<sockaddr_in &>(bound).sin_port);
  std::cerr << "accel: port " << busy << " is busy; using port " << port << " instead\n";
  return fd;
}

std::string describe_failure(const accelerate::launch::WorkerExit &exit, int global_rank,
                             const std::deque<std::string> &tail) {
  auto copy = exit;
  copy.rank = global_rank;
  std::string text = "  " + copy.describe() + "\n";
  for (const auto &line : tail) {
    text += "    | " + line + "\n";
  }
  return text;
}

// The verbose plan's words for the gradient compression ("" when there is none).
std::string compression_text(const LaunchConfig &config) {
  const auto hook = config.comm_hook.value_or("no");
  if (hook == "no") {
    return "";
  }
  if (hook == "powersgd") {
    // Set only when given, so the workers otherwise inherit this environment's values, and the
    // runtime's defaults apply without them: say what the workers will use.
    const auto setting = [](const std::optional<int> &given, const char *variable,
                            const char *fallback) {
      if (given) {
        return std::to_string(*given);
      }
      const char *inherited = std::getenv(variable);
      return inherited != nullptr && *inherited != '\0'
                 ? std::string(inherited) + " (" + variable + ")"
                 : std::string(fallback);
    };
    return ", gradients compressed by PowerSGD (rank " +
           setting(config.powersgd_rank, "ACCELERATE_POWERSGD_RANK", "1") + ", from step " +
           setting(config.powersgd_start_iter, "ACCELERATE_POWERSGD_START_ITER", "1000") + ")";
  }
  return ", gradients compressed to " + hook;
}

} // namespace

std::string resolve_program(const std::string &program) {
  namespace fs = std::filesystem;
  auto runnable = [](const fs::path &path) {
    return fs::is_regular_file(path) && ::access(path.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    if (!runnable(program)) {
      throw std::runtime_error("cannot run '" + program + "': " +
                               (fs::exists(program) ? "not an executable file" : "no such file"));
    }
    return program;
  }
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const auto candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (runnable(candidate)) {
      return candidate.string();
    }
    start = end + 1;
  }
  throw std::runtime_error("cannot run '" + program + "': not found in PATH");
}

CLI::App *add_launch_command(CLI::App &app, LaunchRequest &request) {
  constexpr long kAny = std::numeric_limits<int>::max();
  auto *launch =
      app.add_subcommand("launch", "Run PROGRAM [ARGS...] on several processes and machines");
  auto &flags = request.flags;
  launch->add_option(both_spellings("config_file"), request.config_file,
                     "YAML config (default: Accelerate's default_config.yaml if it exists)");
  launch
      ->add_option(both_spellings("num_processes"), flags.num_processes,
                   "Processes in total, across machines")
      ->check(whole_number(1, kAny));
  launch->add_option(both_spellings("num_machines"), flags.num_machines)
      ->check(whole_number(1, kAny));
  launch->add_option(both_spellings("machine_rank"), flags.machine_rank)
      ->check(whole_number(0, kAny));
  launch->add_option(both_spellings("main_process_ip"), flags.main_process_ip);
  launch->add_option(both_spellings("main_process_port"), flags.main_process_port)
      ->check(whole_number(1, 65535));
  launch->add_option(both_spellings("mixed_precision"), flags.mixed_precision)
      ->check(one_of({"no", "fp16", "bf16"}));
  launch
      ->add_option(both_spellings("comm_hook"), flags.comm_hook,
                   "Gradient compression for the all-reduce: no, fp16, bf16 or powersgd (DDP's "
                   "hooks)")
      ->check(one_of({"no", "fp16", "bf16", "powersgd"}));
  launch
      ->add_option(both_spellings("powersgd_rank"), flags.powersgd_rank,
                   "PowerSGD: columns of each gradient matrix's factors (default 1)")
      ->check(whole_number(1, kMaxPowerSgdRank));
  launch
      ->add_option(both_spellings("powersgd_start_iter"), flags.powersgd_start_iter,
                   "PowerSGD: steps summed uncompressed first (default 1000)")
      ->check(whole_number(0, kMaxPowerSgdStartIter));
  launch
      ->add_option(both_spellings("gradient_accumulation_steps"), flags.gradient_accumulation_steps)
      ->check(whole_number(1, kAny));
  launch->add_flag("--cpu", request.cpu, "Train on the CPU even where CUDA is available");
  launch->add_flag(both_spellings("multi_gpu"), request.multi_gpu,
                   "Train on GPUs, one per process (distributed_type MULTI_GPU)");
  launch->add_option(both_spellings("gpu_ids"), flags.gpu_ids, "'all' or a list such as 0,1");
  launch
      ->add_option(both_spellings("num_cpu_threads_per_process"), flags.num_cpu_threads_per_process)
      ->check(whole_number(1, kAny));
  launch->add_option(both_spellings("rdzv_backend"), flags.rdzv_backend, "static (the only one)")
      ->check(one_of({"static"}, "accel's rendezvous is static: start every machine with the same "
                                 "--main_process_ip and --main_process_port"));
  launch->add_flag(both_spellings("same_network"), request.same_network,
                   "The machines share a local network (accepted; the rendezvous is the same)");
  // Not a config key (the request's, not LaunchConfig's): Accelerate 1.15 sets split_batches in
  // code only, and its config loader refuses keys it does not know.
  launch->add_flag(both_spellings("split_batches"), request.split_batches,
                   "Split every batch across the processes, so that together they see the "
                   "program's own batches (ACCELERATE_SPLIT_BATCHES; accel's own flag)");
  // Accelerate has Local SGD in code only (accelerate.local_sgd.LocalSGD): no key either.
  launch
      ->add_option(both_spellings("local_sgd_steps"), request.local_sgd_steps,
                   "Local SGD for the whole run: gradients stay on each process, parameters "
                   "are averaged every K optimizer steps (ACCELERATE_LOCAL_SGD_STEPS; accel's "
                   "own flag)")
      ->check(whole_number(1, kAny));
  launch->add_flag("--debug", request.debug,
                   "Check distributed operations for errors (ACCELERATE_DEBUG_MODE)");
  launch->add_flag("-v,--verbose", request.verbose,
                   "Log the plan and how each process sums gradients (ACCELERATE_LOG_LEVEL=INFO)");
  launch
      ->add_option(both_spellings("max_restarts"), request.max_restarts,
                   "Restart the whole job up to this many times after a failure")
      ->check(whole_number(0, kAny));
  launch
      ->add_option(both_spellings("monitor_interval"), request.monitor_interval,
                   "Seconds between checks on the workers")
      ->check(seconds_between(kMinMonitorSeconds, kMaxMonitorSeconds));
  launch
      ->add_option(both_spellings("rdzv_timeout"), request.rdzv_timeout,
                   "Seconds the processes may take to meet, and collectives to finish")
      ->check(seconds_between(kMinTimeoutSeconds, kMaxTimeoutSeconds));
  launch
      ->add_option("--tee", request.tee,
                   "With --log_dir: streams also shown here (0 none, 1 out, 2 err, 3 both)")
      ->check(whole_number(0, 3));
  launch->add_option(both_spellings("log_dir"), request.log_dir, "Write one log per rank here");
  launch->add_flag(both_spellings("no_prefix"), request.no_prefix,
                   "Do not prefix worker lines with their rank");
  launch
      ->add_option(both_spellings("only_rank"), request.only_rank,
                   "Show only this rank's output (e.g. 0)")
      ->check(whole_number(0, kAny));
  // Accelerate's flags for Python scripts: PROGRAM is always run directly, never by Python.
  launch->add_flag(both_spellings("no_python"), request.no_python,
                   "Accepted for Accelerate's sake: PROGRAM always runs directly, never under "
                   "Python");
  launch->add_flag("-m,--module", request.python_module,
                   "Not for native programs (Accelerate's: run a Python module); an error");
  // Everything from PROGRAM on belongs to the program, flags included: CLI11 leaves it in
  // remaining(), which run_launch's caller hands over as the command.
  launch->prefix_command();
  return launch;
}

LaunchConfig flag_settings(const LaunchRequest &request) {
  if (request.python_module) {
    throw std::runtime_error("-m/--module runs a Python module under Python Accelerate; accel "
                             "launch runs a native PROGRAM directly: give its path instead");
  }
  if (request.multi_gpu && request.cpu) {
    throw std::runtime_error("--multi_gpu and --cpu contradict each other: choose one");
  }
  LaunchConfig flags = request.flags;
  if (request.cpu) {
    flags.use_cpu = true;
  }
  if (request.multi_gpu) {
    flags.distributed_type = "MULTI_GPU";
    flags.use_cpu = false;
  }
  if (request.debug) {
    flags.debug = true;
  }
  if (request.same_network) {
    flags.same_network = true;
  }
  return flags;
}

LaunchConfig effective_config(const std::optional<std::string> &config_file,
                              const LaunchConfig &flags, bool default_file) {
  LaunchConfig config;
  std::vector<std::string> notes;
  if (config_file) {
    config = load_config_file(*config_file, &notes);
  } else if (const auto path = default_config_path();
             default_file && std::filesystem::exists(path)) {
    config = load_config_file(path, &notes);
  }
  for (const auto &note : notes) {
    std::cerr << "accel: note: " << note << "\n";
  }
  config.override_with(flags);
  return config;
}

int run_launch(const LaunchRequest &request) {
  const auto flags = flag_settings(request);
  std::vector<std::string> argv = request.command;
  if (!argv.empty() && argv[0].size() > 1 && argv[0][0] == '-') {
    // Before PROGRAM every word is the launcher's: this one is none of its options.
    throw std::runtime_error("unknown option '" + argv[0] +
                             "' (accel launch --help lists the options)");
  }
  if (argv.empty()) {
    throw std::runtime_error("accel launch needs a PROGRAM to run (accel launch --help)");
  }
  const auto config = effective_config(request.config_file, flags, request.default_config);
  const int world_size = config.num_processes.value_or(1);
  const int machines = config.num_machines.value_or(1);
  const int machine_rank = config.machine_rank.value_or(0);
  if (world_size % machines != 0) {
    throw std::runtime_error("--num_processes " + std::to_string(world_size) +
                             " is not a multiple of --num_machines " + std::to_string(machines));
  }
  if (request.only_rank >= world_size) {
    // Ranks are the job's, across machines: a rank past the last would show nothing at all.
    throw std::runtime_error("--only_rank " + std::to_string(request.only_rank) +
                             " is not a rank of this job (ranks 0 to " +
                             std::to_string(world_size - 1) + ")");
  }
  if (machine_rank >= machines) {
    throw std::runtime_error("--machine_rank " + std::to_string(machine_rank) +
                             " is not below --num_machines " + std::to_string(machines));
  }
  if ((config.powersgd_rank || config.powersgd_start_iter) &&
      config.comm_hook.value_or("no") != "powersgd") {
    std::cerr << "accel: note: powersgd_rank and powersgd_start_iter apply only with "
                 "--comm_hook powersgd (comm_hook is "
              << config.comm_hook.value_or("no") << ")\n";
  }
  if (machines > 1 && !config.main_process_ip) {
    throw std::runtime_error("several machines need --main_process_ip (the address of machine 0)");
  }
  const bool single_machine = machines == 1;
  const int per_machine = world_size / machines;
  const int first_rank = machine_rank * per_machine;
  const std::string master_addr = single_machine ? "127.0.0.1" : *config.main_process_ip;
  int port = config.main_process_port.value_or(kDefaultPort);

  argv[0] = resolve_program(argv[0]);

  int store_fd = -1;
  if (machine_rank == 0) {
    store_fd = bind_store_socket(master_addr, port, single_machine);
  }

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = config.num_cpu_threads_per_process.value_or(
      static_cast<int>(std::max(1u, cores / static_cast<unsigned>(per_machine))));

  if (request.verbose) {
    std::cerr << "accel: machine " << machine_rank << " of " << machines << ": ranks " << first_rank
              << " to " << first_rank + per_machine - 1 << " of " << world_size
              << ", rendezvous at " << master_addr << ":" << port << ", " << threads
              << " thread(s) per process" << compression_text(config)
              << (request.split_batches ? ", every batch split across the processes" : "")
              << (request.local_sgd_steps > 0
                      ? ", Local SGD (parameters averaged every " +
                            std::to_string(request.local_sgd_steps) + " steps)"
                      : "")
              << "\n";
  }

  struct sigaction action{};
  action.sa_handler = remember_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  int exit_code = 1;
  for (int attempt = 0; attempt <= request.max_restarts; ++attempt) {
    std::vector<accelerate::launch::WorkerSpec> specs(per_machine);
    for (int local = 0; local < per_machine; ++local) {
      auto &spec = specs[local];
      const int rank = first_rank + local;
      spec.argv = argv;
      spec.capture_output = true;
      spec.env = accelerate::launch::rank_environment(rank, world_size, local, per_machine,
                                                      master_addr, port);
      spec.env["GROUP_RANK"] = std::to_string(machine_rank);
      spec.env["ACCELERATE_MIXED_PRECISION"] = config.mixed_precision.value_or("no");
      spec.env["ACCELERATE_COMM_HOOK"] = config.comm_hook.value_or("no");
      // Only when given: the runtime's defaults (DDP's) apply otherwise.
      if (config.powersgd_rank) {
        spec.env["ACCELERATE_POWERSGD_RANK"] = std::to_string(*config.powersgd_rank);
      }
      if (config.powersgd_start_iter) {
        spec.env["ACCELERATE_POWERSGD_START_ITER"] = std::to_string(*config.powersgd_start_iter);
      }
      spec.env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] =
          std::to_string(config.gradient_accumulation_steps.value_or(1));
      spec.env["ACCELERATE_USE_CPU"] = config.use_cpu.value_or(false) ? "true" : "false";
      spec.env["ACCELERATE_DEBUG_MODE"] = config.debug.value_or(false) ? "true" : "false";
      // Only when given: otherwise the workers inherit the launcher's environment.
      if (request.split_batches) {
        spec.env["ACCELERATE_SPLIT_BATCHES"] = "true";
      }
      if (request.local_sgd_steps > 0) {
        spec.env["ACCELERATE_LOCAL_SGD_STEPS"] = std::to_string(request.local_sgd_steps);
      }
      spec.env["ACCELERATE_TIMEOUT"] = std::to_string(request.rdzv_timeout);
      spec.env["ACCELERATE_RESTART_COUNT"] = std::to_string(attempt);
      spec.env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
      if (request.verbose && std::getenv("ACCELERATE_LOG_LEVEL") == nullptr) {
        spec.env["ACCELERATE_LOG_LEVEL"] = "INFO";
      }
      if (std::getenv("OMP_NUM_THREADS") == nullptr) {
        spec.env["OMP_NUM_THREADS"] = std::to_string(threads);
      }
      if (config.gpu_ids && *config.gpu_ids != "all") {
        spec.env["CUDA_VISIBLE_DEVICES"] = *config.gpu_ids;
      }
      if (rank == 0 && store_fd >= 0) {
        spec.env["ACCELERATE_STORE_LISTEN_FD"] = std::to_string(store_fd);
        spec.inherit_fds.push_back(store_fd);
      }
      for (const auto &[name, value] : request.environment) {
        spec.env[name] = value;
      }
    }

    accelerate::launch::WorkerOutputOptions output_options;
    output_options.first_rank = first_rank;
    output_options.prefix = !request.no_prefix;
    output_options.only_rank = request.only_rank;
    output_options.tee = request.tee;
    output_options.log_dir = request.log_dir;
    accelerate::launch::WorkerOutput output(per_machine, output_options);

    std::vector<accelerate::launch::WorkerExit> exits;
    {
      accelerate::launch::WorkerGroup group(
          specs,
          [&output, &request, first_rank](int local, int stream, std::string_view chunk) {
            if (stream == 1 && request.capture_stdout) {
              request.capture_stdout(first_rank + local, chunk);
            } else {
              output.add(local, stream, chunk);
            }
          },
          [&output] { return output.flush_due(); });
      exits = group.wait(
          std::chrono::hours(24 * 365), std::chrono::seconds(5), &g_stop_signal,
          std::chrono::milliseconds(static_cast<int64_t>(request.monitor_interval * 1000.0)));
    }
    output.flush();

    if (const int signal = g_stop_signal.load(); signal != 0) {
      std::cerr << "accel: stopped by signal " << signal << "; every worker was stopped\n";
      exit_code = 128 + signal;
      break;
    }
    std::string summary;
    for (const auto &exit : exits) {
      if (!exit.succeeded() && !exit.stopped_by_group) {
        summary += describe_failure(exit, first_rank + exit.rank, output.stderr_tail(exit.rank));
      }
    }
    if (summary.empty()) {
      exit_code = 0;
      break;
    }
    std::cerr << "accel: " << request.job_name
              << " failed (root cause first; the other workers were stopped):\n"
              << summary;
    if (attempt < request.max_restarts) {
      std::cerr << "accel: restarting every worker (restart " << attempt + 1 << " of "
                << request.max_restarts << ")\n";
    }
  }
  if (store_fd >= 0) {
    ::close(store_fd);
  }
  return exit_code;
}

} // namespace accel::cli
