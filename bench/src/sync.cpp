// Benchmark 3: the runtime's gradient synchronisation against one raw c10d all-reduce of the
// same number of floats, on a multi-process job (bench/run.py starts it on 2 processes).
//
// Two copies of the same model live in each process: one prepared (its backward synchronises
// gradients), one not (its backward is plain autograd). Per repetition, with a barrier before
// each timed region so that every process starts it together:
//   plain   loss.backward() of the unprepared copy                      -> backward alone
//   synced  accelerator.backward(loss) of the prepared copy             -> backward + sync
//   raw     ProcessGroupGloo::allreduce of P floats (own process group) -> the wire cost
//   reduce  accelerator.reduce of the same P floats                     -> the public call
//   clone   a copy of P floats into a new tensor (what reduce adds besides the all-reduce)
// The sync cost is synced - plain; the ratio raw / (synced - plain) is "sync throughput as a
// fraction of a raw all-reduce". Each repetition's time is the slowest process's; the order of
// the five measurements rotates from one repetition to the next; medians are reported.
#include "bench.h"

#include <accelerate/accelerate.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdio>
#include <functional>

namespace accel_bench {
namespace {

/// A Gloo process group of our own, configured like the runtime's on one machine, rendezvousing
/// through the runtime's store (as a client, under a prefix of its own).
c10::intrusive_ptr<c10d::ProcessGroupGloo> raw_gloo_group(const accelerate::ProcessInfo &info) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(info.master_port);
  store_options.isServer = false;
  store_options.waitWorkers = false;
  store_options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "accel_bench_raw", c10::make_intrusive<c10d::TCPStore>(info.master_addr, store_options));
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, info.rank, info.world_size, options);
}

} // namespace

int run_sync(const Args &args) {
  const int64_t layers = args.integer("layers", 8);
  const int64_t batch = args.integer("batch", 32);
  const int64_t reps = args.integer("reps", 30);
  const int64_t warmup = args.integer("warmup", 3);

  accelerate::Accelerator accelerator;
  const auto info = accelerate::detect_process_info();
  TORCH_CHECK(accelerator.distributed(),
              "sync needs a multi-process job (bench/run.py starts one)");

  torch::manual_seed(0);
  auto plain = make_model("deep", layers);
  torch::manual_seed(0);
  auto synced = make_model("deep", layers);
  accelerator.prepare(synced);
  const int64_t params = parameter_count(synced);

  auto group = raw_gloo_group(info);
  auto flat = torch::ones({params});
  auto inputs = torch::randn({batch, 1024});
  auto targets = torch::randint(10, {batch}, torch::kInt64);

  auto timed = [&](const std::function<void()> &prepare, const std::function<void()> &body) {
    prepare();
    accelerator.wait_for_everyone();
    const auto start = Clock::now();
    body();
    return seconds_since(start);
  };
  torch::Tensor loss;
  std::vector<std::function<double()>> measurements{
      [&] {
        return timed(
            [&] {
              plain->zero_grad();
              loss = torch::nn::functional::cross_entropy(plain->forward(inputs), targets);
            },
            [&] { loss.backward(); });
      },
      [&] {
        return timed(
            [&] {
              synced->zero_grad();
              loss = torch::nn::functional::cross_entropy(synced->forward(inputs), targets);
            },
            [&] { accelerator.backward(loss); });
      },
      [&] {
        return timed([&] { flat.fill_(1); },
                     [&] {
                       std::vector<at::Tensor> tensors{flat};
                       group->allreduce(tensors)->wait();
                     });
      },
      [&] { return timed([&] { flat.fill_(1); }, [&] { accelerator.reduce(flat, "sum"); }); },
      [&] { // what reduce adds besides the all-reduce: a copy into a new tensor
        return timed([&] { flat.fill_(1); }, [&] { auto copy = flat.clone(); });
      },
  };
  const size_t kinds = measurements.size();
  for (int64_t i = 0; i < warmup; ++i) {
    for (auto &measure : measurements) {
      measure();
    }
  }
  auto times = torch::zeros({reps, static_cast<int64_t>(kinds)}, torch::kFloat64);
  for (int64_t r = 0; r < reps; ++r) {
    for (size_t k = 0; k < kinds; ++k) {
      const size_t which = (static_cast<size_t>(r) + k) % kinds;
      times[r][static_cast<int64_t>(which)] = measurements[which]();
    }
  }
  // The job's time for a repetition is its slowest process's.
  auto slowest = accelerator.reduce(times, "max");
  if (accelerator.is_main_process()) {
    std::vector<double> med;
    for (size_t k = 0; k < kinds; ++k) {
      auto column = slowest.select(1, static_cast<int64_t>(k)).contiguous();
      med.push_back(
          median(std::vector<double>(column.data_ptr<double>(), column.data_ptr<double>() + reps)));
    }
    const double sync = med[1] - med[0];
    const double mb = static_cast<double>(params) * 4 / 1e6;
    std::printf("{\"bench\": \"sync\", \"processes\": %d, \"params\": %lld, \"megabytes\": %.2f, "
                "\"batch\": %lld, \"reps\": %lld, \"backward_ms\": %.3f, "
                "\"backward_sync_ms\": %.3f, \"sync_ms\": %.3f, \"raw_allreduce_ms\": %.3f, "
                "\"reduce_ms\": %.3f, \"clone_ms\": %.3f, \"sync_vs_raw\": %.4f, "
                "\"sync_vs_reduce\": %.4f}\n",
                accelerator.num_processes(), static_cast<long long>(params), mb,
                static_cast<long long>(batch), static_cast<long long>(reps), med[0] * 1e3,
                med[1] * 1e3, sync * 1e3, med[2] * 1e3, med[3] * 1e3, med[4] * 1e3, med[2] / sync,
                med[3] / sync);
  }
  accelerator.wait_for_everyone();
  return 0;
}

} // namespace accel_bench
