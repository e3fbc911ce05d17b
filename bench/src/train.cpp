// Benchmark 2 (C++ side): training throughput of a data-parallel job, the documented loop.
// Started once per process by bench/run.py with torchrun's variables, or by `accel launch`
// (bench/machines.py, two machines); rank 0 prints the result, with the gradient transport
// and compression the program used. bench/py_train.py is the same loop with Python Accelerate.
#include "bench.h"

#include <accelerate/accelerate.h>

#include <cstdio>

namespace accel_bench {
namespace {

// A JSON string literal of `text` (the transport contains parentheses and colons, never
// quotes, but escape anyway).
std::string json_string(const std::string &text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

} // namespace

int run_train(const Args &args) {
  const std::string model_name = args.text("model", "mlp");
  const int64_t samples = args.integer("samples", 4096);
  const auto batch = static_cast<size_t>(args.integer("batch", 64));
  const int64_t steps = args.integer("steps", 200);
  const int64_t warmup = args.integer("warmup", 20);

  accelerate::Accelerator accelerator;
  accelerate::set_seed(0);
  auto model = make_model(model_name);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      InMemoryDataset(samples, sample_shape(model_name), 10, 1234)
          .map(torch::data::transforms::Stack<>()),
      batch);

  int64_t done = 0;
  Clock::time_point start;
  double last_loss = 0;
  while (done < warmup + steps) {
    for (auto &batch_data : *loader) {
      if (done == warmup) {
        accelerator.wait_for_everyone();
        start = Clock::now();
      }
      optimizer.zero_grad();
      auto loss =
          torch::nn::functional::cross_entropy(model->forward(batch_data.data), batch_data.target);
      accelerator.backward(loss);
      accelerator.step(optimizer); // as optimizer.step(), and counts Local SGD's steps
      if (++done == warmup + steps) {
        last_loss = loss.item<double>();
        break;
      }
    }
  }
  accelerator.wait_for_everyone();
  const double elapsed = seconds_since(start);
  if (accelerator.is_main_process()) {
    std::printf("{\"bench\": \"train\", \"impl\": \"cpp\", \"model\": \"%s\", \"processes\": %d, "
                "\"batch\": %zu, \"steps\": %lld, \"params\": %lld, \"seconds\": %.4f, "
                "\"steps_per_s\": %.3f, \"loss\": %.4f, \"transport\": %s, \"comm_hook\": %s}\n",
                model_name.c_str(), accelerator.num_processes(), batch,
                static_cast<long long>(steps), static_cast<long long>(parameter_count(model)),
                elapsed, static_cast<double>(steps) / elapsed, last_loss,
                json_string(accelerator.gradient_transport()).c_str(),
                json_string(accelerator.comm_hook()).c_str());
  }
  return 0;
}

} // namespace accel_bench
