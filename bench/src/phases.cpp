// Where a training step's time goes (bench/scaling.py's investigation; docs/benchmarks.md,
// "Scaling"): the loop of `train`, with a clock read between its phases.
//
//   load      ++iterator / begin() and *iterator: the sampler, the per-sample get, Stack
//             (and, on a new epoch with 2 processes, the broadcast of the epoch's order)
//   zero      optimizer.zero_grad()
//   forward   model forward and the loss
//   backward  accelerator.backward(loss), split at the last gradient hook:
//     compute   from the call to the last parameter's gradient being ready (autograd; with
//               several buckets, the earlier buckets' sums are in here too)
//     tail      from there to the return: the last gradient's accumulation, the bucket's
//               averaging, the all-reduce (waiting for the peer included) and finalize
//   step      optimizer.step()
//
// Every rank prints one JSON line: the main thread's CPU time per step and its context
// switches; per phase the mean, median and 90th percentile in microseconds (with --cpu 1 also
// of each phase's thread CPU time); with --trace 1 the steady_clock time (µs) each step reached
// the last gradient hook, so that the ranks' arrival at the all-reduce can be compared (one
// clock for every process of a machine).
#include "bench.h"

#include <accelerate/accelerate.h>

#include <cstdio>
#include <sstream>

#include <sys/resource.h>
#include <time.h>

namespace accel_bench {
namespace {

// CPU time of the calling thread: unlike the wall clock, it does not count the time other
// programs held the core, nor sleeping in the all-reduce (spinning counts).
double thread_cpu_us() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

std::string stats_json(std::vector<double> values) {
  double sum = 0;
  for (double v : values) {
    sum += v;
  }
  const double mean = values.empty() ? 0 : sum / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  const double p90 = values.empty() ? 0 : values[values.size() * 9 / 10];
  char text[160];
  std::snprintf(text, sizeof(text), "{\"mean\": %.2f, \"median\": %.2f, \"p90\": %.2f}", mean,
                median(values), p90);
  return text;
}

} // namespace

int run_phases(const Args &args) {
  const std::string model_name = args.text("model", "mlp");
  const int64_t samples = args.integer("samples", 4096);
  const auto batch = static_cast<size_t>(args.integer("batch", 64));
  const int64_t steps = args.integer("steps", 1000);
  const int64_t warmup = args.integer("warmup", 50);
  const bool trace = args.integer("trace", 0) != 0;
  // --cpu 1: also each phase's thread CPU time (a system call per phase, about a microsecond).
  const bool cpu = args.integer("cpu", 0) != 0;

  accelerate::Accelerator accelerator;
  accelerate::set_seed(0);
  auto model = make_model(model_name);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      InMemoryDataset(samples, sample_shape(model_name), 10, 1234)
          .map(torch::data::transforms::Stack<>()),
      batch);

  Clock::time_point last_hook;
  for (auto &parameter : model->parameters()) {
    parameter.register_hook([&last_hook](const torch::Tensor &) { last_hook = Clock::now(); });
  }

  const char *names[] = {"load", "zero", "forward", "compute", "tail", "backward", "step", "total"};
  std::vector<std::vector<double>> phase(8), phase_cpu(8);
  double cpu_start = 0;
  rusage usage_start{};
  std::vector<double> arrivals, departures;
  Clock::time_point start;
  auto it = loader->begin();
  for (int64_t done = 0; done < warmup + steps; ++done) {
    if (done == warmup) {
      accelerator.wait_for_everyone();
      start = Clock::now();
      cpu_start = thread_cpu_us();
      getrusage(RUSAGE_THREAD, &usage_start);
    }
    double c[6] = {};
    if (cpu) {
      c[0] = thread_cpu_us();
    }
    const auto t0 = Clock::now();
    if (done > 0) {
      ++it;
    }
    if (it == loader->end()) {
      it = loader->begin();
    }
    auto &batch_data = *it;
    const auto t1 = Clock::now();
    if (cpu) {
      c[1] = thread_cpu_us();
    }
    optimizer.zero_grad();
    const auto t2 = Clock::now();
    if (cpu) {
      c[2] = thread_cpu_us();
    }
    auto loss =
        torch::nn::functional::cross_entropy(model->forward(batch_data.data), batch_data.target);
    const auto t3 = Clock::now();
    if (cpu) {
      c[3] = thread_cpu_us();
    }
    last_hook = t3;
    accelerator.backward(loss);
    const auto t4 = Clock::now();
    if (cpu) {
      c[4] = thread_cpu_us();
    }
    optimizer.step();
    const auto t5 = Clock::now();
    if (cpu) {
      c[5] = thread_cpu_us();
    }
    if (done >= warmup) {
      const double values[] = {us(t0, t1),        us(t1, t2), us(t2, t3), us(t3, last_hook),
                               us(last_hook, t4), us(t3, t4), us(t4, t5), us(t0, t5)};
      for (size_t k = 0; k < 8; ++k) {
        phase[k].push_back(values[k]);
      }
      if (cpu) {
        // load, zero, forward, -, -, backward, step, total
        const double used[] = {c[1] - c[0], c[2] - c[1], c[3] - c[2], 0,
                               0,           c[4] - c[3], c[5] - c[4], c[5] - c[0]};
        for (size_t k = 0; k < 8; ++k) {
          phase_cpu[k].push_back(used[k]);
        }
      }
      if (trace) {
        // Absolute steady_clock microseconds: the same clock in every process.
        arrivals.push_back(
            std::chrono::duration<double, std::micro>(last_hook.time_since_epoch()).count());
        departures.push_back(
            std::chrono::duration<double, std::micro>(t4.time_since_epoch()).count());
      }
    }
  }
  const double cpu_used = thread_cpu_us() - cpu_start;
  rusage usage_end{};
  getrusage(RUSAGE_THREAD, &usage_end);
  accelerator.wait_for_everyone();
  const double elapsed = seconds_since(start);

  std::ostringstream out;
  out << "{\"bench\": \"phases\", \"model\": \"" << model_name
      << "\", \"rank\": " << accelerator.process_index()
      << ", \"processes\": " << accelerator.num_processes() << ", \"batch\": " << batch
      << ", \"steps\": " << steps << ", \"threads\": " << torch::get_num_threads()
      << ", \"seconds\": " << elapsed << ", \"samples_per_s\": "
      << static_cast<double>(steps * static_cast<int64_t>(batch) * accelerator.num_processes()) /
             elapsed;
  out << ", \"cpu_us_per_step\": " << cpu_used / static_cast<double>(steps)
      << ", \"involuntary_switches\": " << usage_end.ru_nivcsw - usage_start.ru_nivcsw
      << ", \"voluntary_switches\": " << usage_end.ru_nvcsw - usage_start.ru_nvcsw;
  for (size_t k = 0; k < 8; ++k) {
    out << ", \"" << names[k] << "\": " << stats_json(phase[k]);
  }
  if (cpu) {
    for (size_t k : {0, 1, 2, 5, 6, 7}) {
      out << ", \"" << names[k] << "_cpu\": " << stats_json(phase_cpu[k]);
    }
  }
  if (trace) {
    out.precision(1);
    out << std::fixed;
    for (auto [name, values] : {std::pair{"arrive_us", &arrivals}, {"leave_us", &departures}}) {
      out << ", \"" << name << "\": [";
      for (size_t i = 0; i < values->size(); ++i) {
        out << (i ? ", " : "") << (*values)[i];
      }
      out << "]";
    }
  }
  out << "}\n";
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

} // namespace accel_bench
