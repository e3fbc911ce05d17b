#include "config_command.h"

#include "launch_config.h"

#include <iostream>
#include <stdexcept>

namespace accel::cli {
namespace {

// One question with a default; an empty answer takes the default. End of input takes the
// defaults of every remaining question, so piped answers may stop early; but input that ends
// before the first answer (an empty pipe, </dev/null) answered nothing, and writes nothing.
class Asker {
public:
  Asker(std::istream &in, std::ostream &out) : in_(in), out_(out) {}

  std::string text(const std::string &question, const std::string &fallback) {
    out_ << question << " [" << fallback << "]: " << std::flush;
    std::string answer;
    if (!std::getline(in_, answer)) {
      out_ << "\n";
      if (!answered_) {
        throw std::runtime_error(
            "no answers: the input ended before the first question was answered, so no config "
            "was written (answer in a terminal or pipe the answers; `accel config default` "
            "writes a default config)");
      }
      return fallback;
    }
    answered_ = true;
    while (!answer.empty() && (answer.back() == ' ' || answer.back() == '\r')) {
      answer.pop_back();
    }
    return answer.empty() ? fallback : answer;
  }

  int number(const std::string &question, int fallback, int lowest, int highest) {
    for (int tries = 0; tries < 3; ++tries) {
      const auto answer = text(question, std::to_string(fallback));
      try {
        size_t used = 0;
        const int value = std::stoi(answer, &used);
        if (used == answer.size() && value >= lowest && value <= highest) {
          return value;
        }
      } catch (const std::exception &) {
      }
      out_ << "Please enter a whole number from " << lowest << " to " << highest << ".\n";
    }
    throw std::runtime_error("no valid answer to: " + question);
  }

  bool yes_no(const std::string &question, bool fallback) {
    for (int tries = 0; tries < 3; ++tries) {
      auto answer =
          text(question + (fallback ? " (YES/no)" : " (yes/NO)"), fallback ? "yes" : "no");
      for (auto &c : answer) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      if (answer == "yes" || answer == "y") {
        return true;
      }
      if (answer == "no" || answer == "n") {
        return false;
      }
      out_ << "Please answer yes or no.\n";
    }
    throw std::runtime_error("no valid answer to: " + question);
  }

  std::string choice(const std::string &question, const std::vector<std::string> &options,
                     size_t fallback) {
    out_ << question << "\n";
    for (size_t i = 0; i < options.size(); ++i) {
      out_ << "  [" << i << "] " << options[i] << "\n";
    }
    const int index =
        number("Your choice", static_cast<int>(fallback), 0, static_cast<int>(options.size()) - 1);
    return options[index];
  }

private:
  std::istream &in_;
  std::ostream &out_;
  bool answered_ = false; ///< a line was read, even an empty one (taking a default)
};

} // namespace

int run_config_questions(const std::string &path, std::istream &in, std::ostream &out) {
  Asker ask(in, out);
  LaunchConfig config;
  config.compute_environment = "LOCAL_MACHINE";
  const auto type = ask.choice("Which type of machine are you using?",
                               {"No distributed training", "multi-CPU", "multi-GPU"}, 1);
  config.distributed_type = type == "multi-CPU"   ? "MULTI_CPU"
                            : type == "multi-GPU" ? "MULTI_GPU"
                                                  : "NO";
  config.use_cpu = type != "multi-GPU";
  config.num_machines = 1;
  config.machine_rank = 0;
  if (type != "No distributed training") {
    config.num_machines = ask.number("How many different machines will you use?", 1, 1, 65536);
    if (*config.num_machines > 1) {
      config.machine_rank =
          ask.number("What is the rank of this machine?", 0, 0, *config.num_machines - 1);
      config.main_process_ip = ask.text(
          "What is the IP address of the machine that will host the main process?", "127.0.0.1");
      config.main_process_port = ask.number(
          "What is the port you will use to communicate with the main process?", 29500, 1, 65535);
      config.same_network = ask.yes_no("Are all the machines on the same local network?", true);
      config.rdzv_backend = "static";
    }
    const std::string unit = type == "multi-GPU" ? "GPU(s)" : "processes";
    config.num_processes = ask.number("How many " + unit +
                                          " should be used in total, across "
                                          "all machines?",
                                      2 * *config.num_machines, 1, 65536);
    if (type == "multi-GPU") {
      config.gpu_ids = ask.text("What GPU(s) (by id) should be used for training on this "
                                "machine, as a comma-separated list?",
                                "all");
    }
  } else {
    config.num_processes = 1;
  }
  config.debug = ask.yes_no("Should distributed operations be checked while running for errors? "
                            "This can avoid timeout issues but will be slower.",
                            false);
  const auto precision =
      ask.choice("Do you wish to use mixed precision?", {"no", "fp16", "bf16"}, 0);
  config.mixed_precision = precision;
  write_file_atomically(path, config_to_yaml(config), /*overwrite=*/true);
  out << "accelerate configuration saved at " << path << "\n";
  return 0;
}

int run_config_default(const std::string &path, std::ostream &out) {
  LaunchConfig config;
  config.compute_environment = "LOCAL_MACHINE";
  config.debug = false;
  config.distributed_type = "NO";
  config.mixed_precision = "no";
  config.num_machines = 1;
  config.machine_rank = 0;
  config.num_processes = 1;
  config.rdzv_backend = "static";
  config.same_network = true;
  config.use_cpu = true;
  config.gpu_ids = "all";
  write_file_atomically(path, config_to_yaml(config), /*overwrite=*/false);
  out << "accelerate configuration saved at " << path << "\n";
  return 0;
}

} // namespace accel::cli
