// A small training program that checkpoints every step, as a user's job would, for the resume
// and crash-safety tests (checkpoint_resume_test.cpp). It trains 3 epochs of a model with
// dropout (so the random generators matter) on shuffled data, with SGD+momentum and StepLR.
//
//   resume_training --project DIR --out FILE [--kill-after-step N] [--resume] [--fp16]
//
// --kill-after-step N: SIGKILL this process right after the checkpoint of step N.
// --resume: load the newest checkpoint under DIR before training.
// Each epoch ends with an evaluation through a loader made for that epoch. At the end the main
// process writes the parameters, the learning rate, the step count, the loss scale and the last
// evaluation's squared error to FILE (torch::save of a tensor list).
#include "../training_fixture.h"

#include <accelerate/accelerate.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

namespace {

struct DropoutNetImpl : torch::nn::Module {
  DropoutNetImpl() {
    first = register_module("first", torch::nn::Linear(8, 32));
    dropout = register_module("dropout", torch::nn::Dropout(0.3));
    second = register_module("second", torch::nn::Linear(32, 4));
  }
  torch::Tensor forward(torch::Tensor x) {
    return second->forward(dropout->forward(torch::relu(first->forward(x))));
  }
  torch::nn::Linear first{nullptr}, second{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(DropoutNet);

[[noreturn]] void usage(const std::string &problem) {
  std::cerr << "resume_training: " << problem
            << "\nusage: resume_training --project DIR --out FILE [--kill-after-step N] "
               "[--resume] [--fp16]\n";
  std::exit(2);
}

} // namespace

int main(int argc, char **argv) {
  std::string project, out;
  long kill_after_step = -1;
  bool resume = false, fp16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(arg + " needs a value");
      }
      return argv[++i];
    };
    if (arg == "--project") {
      project = value();
    } else if (arg == "--out") {
      out = value();
    } else if (arg == "--kill-after-step") {
      kill_after_step = std::stol(value());
    } else if (arg == "--resume") {
      resume = true;
    } else if (arg == "--fp16") {
      fp16 = true;
    } else {
      usage("unknown argument " + arg);
    }
  }
  if (project.empty() || out.empty()) {
    usage("--project and --out are required");
  }

  accelerate::Options options;
  options.project_dir = project;
  options.total_limit = 2;
  // fp16 loss scaling without autocast: the scaled arithmetic is exact, so resuming must be too.
  options.mixed_precision = fp16 ? "fp16" : "no";
  options.grad_scaler.growth_interval = 4;
  accelerate::Accelerator accelerator(options);
  accelerate::set_seed(42);
  DropoutNet model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/4, /*gamma=*/0.5);
  accelerator.prepare(model, optimizer, scheduler);
  // 48 samples, 8 a step in all (4 per process on 2, whole batches of 4 or halves of 8 under
  // accel launch --split_batches): 6 steps an epoch.
  const bool split = *accelerator.options().split_batches && accelerator.distributed();
  if (split) {
    accelerator.print("every batch split across ", accelerator.num_processes(), " processes");
  }
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::RandomSampler>(
      accel_test::RegressionDataset().map(torch::data::transforms::Stack<>()),
      split ? 8 : 8 / accelerator.num_processes());
  if (resume) {
    accelerator.print("resumed from ", accelerator.load_state());
  }
  std::vector<torch::Tensor> eval_errors;
  for (int64_t epoch = loader->completed_epochs(); epoch < 3; ++epoch) {
    // Made anew each epoch, as programs often do; it exists while checkpoints are written.
    auto eval_loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
        accel_test::RegressionDataset().map(torch::data::transforms::Stack<>()), split ? 10 : 5);
    for (auto &batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      accelerator.step(optimizer);
      accelerator.step(scheduler);
      accelerator.zero_grad(optimizer);
      accelerator.save_state();
      if (accelerator.global_step() == kill_after_step) {
        std::raise(SIGKILL);
      }
    }
    torch::NoGradGuard no_grad;
    model->eval();
    torch::Tensor squared_error = torch::zeros({});
    for (auto &batch : *eval_loader) {
      auto error = (model->forward(batch.data) - batch.target).pow(2).sum(1);
      squared_error += accelerator.gather_for_metrics(error).sum();
    }
    eval_errors.push_back(squared_error);
    model->train();
  }
  std::vector<torch::Tensor> result;
  for (const auto &parameter : model->parameters()) {
    result.push_back(parameter.detach().clone());
  }
  result.push_back(torch::tensor(optimizer.param_groups()[0].options().get_lr()));
  result.push_back(torch::tensor(accelerator.global_step()));
  result.push_back(torch::tensor(accelerator.loss_scale()));
  // The evaluation of the epochs this run finished (a resumed run finishes the last two).
  result.push_back(eval_errors.empty() ? torch::zeros({}) : eval_errors.back());
  accelerator.save(result, out);
  return 0;
}
