// Stack Overflow answer style: a custom Dataset without the Stack transform, so each batch
// is a std::vector<Example<>> that the loop stacks by hand; the default (random) sampler;
// a CrossEntropyLoss module; the device picked with an if. After training, an evaluation
// loop over a test loader computes accuracy as correct / total. 2-space indent, std::cout.
//
// Corpus: batches as std::vector<Example<>> stacked by hand, a progress line every 8 steps
// divided by a number written out, and a test loop after training.
//
//   so_vector_eval BATCH OUT_DIR   prints progress, the test accuracy, "metric" lines, and
//                                  writes OUT_DIR/model.pt
#include <torch/torch.h>
#include <iostream>
#include <vector>

class MyDataset : public torch::data::Dataset<MyDataset> {
  torch::Tensor images_, labels_;
 public:
  MyDataset(int64_t n, bool train) {
    auto gen = at::detail::createCPUGenerator(train ? 123 : 456);
    labels_ = torch::randint(0, 2, {n}, gen);
    images_ = torch::randn({n, 1, 4, 4}, gen) + labels_.view({n, 1, 1, 1}).to(torch::kFloat);
  }
  torch::data::Example<> get(size_t index) override {
    return {images_[index], labels_[index]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }
};

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)))),
        fc(register_module("fc", torch::nn::Linear(4 * 4 * 4, 2))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv(x));
    return fc(x.view({x.size(0), -1}));
  }
  torch::nn::Conv2d conv;
  torch::nn::Linear fc;
};
TORCH_MODULE(ConvNet);

int main(int argc, char** argv) {
  if (argc < 3) return 1;
  int batch_size = atoi(argv[1]);
  std::string save_dir = argv[2];
  torch::manual_seed(0);

  torch::Device device(torch::kCPU);
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA);
  }

  auto data_loader = torch::data::make_data_loader(MyDataset(256, true), batch_size);
  auto test_loader = torch::data::make_data_loader(MyDataset(128, false), 32);

  ConvNet net;
  net->to(device);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.01));
  torch::nn::CrossEntropyLoss criterion;

  for (size_t epoch = 1; epoch <= 3; ++epoch) {
    float running_loss = 0.0;
    size_t batch_index = 0;
    for (auto& batch : *data_loader) {
      std::vector<torch::Tensor> xs, ys;
      for (auto& example : batch) {
        xs.push_back(example.data);
        ys.push_back(example.target);
      }
      auto inputs = torch::stack(xs).to(device);
      auto targets = torch::stack(ys).to(device);

      optimizer.zero_grad();
      torch::Tensor prediction = net->forward(inputs);
      torch::Tensor loss = criterion(prediction, targets);
      loss.backward();
      optimizer.step();

      running_loss += loss.item<float>();
      if (++batch_index % 8 == 0) {
        std::cout << "Epoch: " << epoch << " | Batch: " << batch_index
                  << " | Loss: " << running_loss / 8 << std::endl;
        running_loss = 0.0;
      }
    }
  }

  net->eval();
  torch::NoGradGuard no_grad;
  int correct = 0, total = 0;
  for (const auto& batch : *test_loader) {
    std::vector<torch::Tensor> xs, ys;
    for (const auto& example : batch) {
      xs.push_back(example.data);
      ys.push_back(example.target);
    }
    auto output = net->forward(torch::stack(xs).to(device));
    auto predicted = output.argmax(1);
    total += ys.size();
    correct += predicted.eq(torch::stack(ys).to(device)).sum().item<int>();
  }
  std::cout << "Accuracy of the network on the test images: " << 100 * correct / total << " %" << std::endl;
  std::cout << "metric accuracy " << static_cast<double>(correct) / total << std::endl;
  torch::save(net, save_dir + "/model.pt");
  return 0;
}
