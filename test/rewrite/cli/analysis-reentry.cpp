// A trainer class whose optimizer is built from a list of tensors the caller passes (declined:
// the tool cannot tell its model), and an evaluation method that counts samples over the loader main
// hands it. Deciding whether that count is over a sharded loader asks whether main gets an
// accelerator, which the accelerator-parameter analysis was itself computing: the tool
// aborted ("the accelerator-parameter analyses need themselves"). It now declines, once.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/input.cpp
// RUN: %expect-exit 6 %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --input-file=%t/messages.txt
// RUN: diff %t/input.cpp %t/out.cpp
// CHECK: warning: this training is left as written, with its setup and helpers {{.*}}cannot tell which model optimizer member 'opt_' trains{{.*}} [accel-training-loop]
// CHECK-NOT: LLVM ERROR
#include <torch/torch.h>
#include <iostream>

struct Data : torch::data::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * double(i), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 128; }
};

class Trainer {
 public:
  Trainer(torch::nn::Linear m, std::vector<torch::Tensor> params) : model_(m), opt_(params, 0.1) {}
  template <typename Loader> void train_epoch(Loader& loader) {
    for (auto& batch : loader) {
      opt_.zero_grad();
      torch::mse_loss(model_(batch.data), batch.target).backward();
      opt_.step();
    }
  }
  template <typename Loader> int64_t evaluate(Loader& loader) {
    int64_t total = 0;
    for (auto& batch : loader) total += batch.data.size(0);
    return total;
  }
 private:
  torch::nn::Linear model_;
  torch::optim::SGD opt_;
};

int main() {
  auto loader = torch::data::make_data_loader(Data().map(torch::data::transforms::Stack<>()), 64);
  torch::nn::Linear net(4, 1);
  Trainer trainer(net, net->parameters());
  trainer.train_epoch(*loader);
  std::cout << trainer.evaluate(*loader) << std::endl;
}
