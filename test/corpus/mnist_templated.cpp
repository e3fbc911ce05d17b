// Corpus: the shape of PyTorch's own C++ MNIST example. Templated train and test functions
// take the model, the device and the loader; the device comes from a DeviceType variable set
// by an `if`; a plain-Module convolutional net (`Net model;`, `model.forward`); SGD with
// momentum; the data are MNIST-format files (written here, then read by
// torch::data::datasets::MNIST; the first 320 and 100 examples are used, with Normalize and
// Stack); the test function reports the average loss and the accuracy of every epoch.
//
//   mnist_templated BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

struct Net : torch::nn::Module {
  Net()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(4 * 12 * 12, 32))),
        fc2(register_module("fc2", torch::nn::Linear(32, 10))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv->forward(x), 2));
    x = torch::relu(fc1->forward(x.view({-1, 4 * 12 * 12})));
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }

  torch::nn::Conv2d conv;
  torch::nn::Linear fc1, fc2;
};

template <typename DataLoader>
void train(size_t epoch, Net &model, torch::Device device, DataLoader &data_loader,
           torch::optim::Optimizer &optimizer) {
  model.train();
  for (auto &batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = torch::nll_loss(output, targets);
    loss.backward();
    optimizer.step();
  }
  std::printf("epoch %zu done\n", epoch);
}

template <typename DataLoader>
void test(size_t epoch, Net &model, torch::Device device, DataLoader &data_loader,
          size_t dataset_size) {
  torch::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int64_t correct = 0;
  for (const auto &batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += torch::nll_loss(output, targets, /*weight=*/{}, torch::Reduction::Sum)
                     .template item<double>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }
  std::printf("metric test_loss_%zu %.6f\n", epoch, test_loss / static_cast<double>(dataset_size));
  std::printf("metric test_accuracy_%zu %.6f\n", epoch,
              static_cast<double>(correct) / static_cast<double>(dataset_size));
}

// ---- MNIST-format files: big-endian headers, then one unsigned byte per pixel or label ----
void write_big_endian(std::ofstream &out, uint32_t value) {
  const char bytes[4] = {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
                         static_cast<char>(value >> 8), static_cast<char>(value)};
  out.write(bytes, 4);
}

// Full-size MNIST files (LibTorch's reader checks the counts: 60000 and 10000): each "digit"
// is a bright 6x6 square at a place that depends on its class, over noise.
void write_mnist_files(const std::string &dir, const std::string &prefix, int64_t count,
                       uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  auto labels = torch::randint(10, {count}, generator, torch::kUInt8);
  auto squares = torch::zeros({10, 28, 28}, torch::kUInt8);
  for (int64_t label = 0; label < 10; ++label) {
    squares[label].narrow(0, 2 + 2 * label, 6).narrow(1, 20 - 2 * label, 6).fill_(140);
  }
  auto noise = torch::randint(100, {count, 28, 28}, generator, torch::kUInt8);
  auto images = torch::maximum(noise, squares.index_select(0, labels.to(torch::kLong)));
  // Written under a name of this process's own, then renamed: two processes writing the same
  // files side by side never read each other's half-written ones.
  const std::string suffix = ".tmp" + std::to_string(::getpid());
  const std::string image_file = dir + "/" + prefix + "-images-idx3-ubyte";
  const std::string label_file = dir + "/" + prefix + "-labels-idx1-ubyte";
  {
    std::ofstream out(image_file + suffix, std::ios::binary);
    for (uint32_t word : {2051u, static_cast<uint32_t>(count), 28u, 28u}) {
      write_big_endian(out, word);
    }
    out.write(static_cast<const char *>(images.data_ptr()), count * 28 * 28);
  }
  {
    std::ofstream out(label_file + suffix, std::ios::binary);
    write_big_endian(out, 2049u);
    write_big_endian(out, static_cast<uint32_t>(count));
    out.write(static_cast<const char *>(labels.data_ptr()), count);
  }
  std::rename((image_file + suffix).c_str(), image_file.c_str());
  std::rename((label_file + suffix).c_str(), label_file.c_str());
}

// The first `count` examples of an MNIST split, read by LibTorch's MNIST dataset: the whole
// split would make the corpus slow.
class MnistPart : public torch::data::datasets::Dataset<MnistPart> {
public:
  MnistPart(const std::string &root, torch::data::datasets::MNIST::Mode mode, size_t count)
      : mnist_(root, mode), count_(count) {}
  torch::data::Example<> get(size_t index) override { return mnist_.get(index); }
  torch::optional<size_t> size() const override { return count_; }

private:
  torch::data::datasets::MNIST mnist_;
  size_t count_;
};

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  write_mnist_files(out_dir, "train", 60000, 21);
  write_mnist_files(out_dir, "t10k", 10000, 22);

  torch::manual_seed(1);
  torch::DeviceType device_type;
  if (torch::cuda::is_available()) {
    device_type = torch::kCUDA;
  } else {
    device_type = torch::kCPU;
  }
  torch::Device device(device_type);

  Net model;
  model.to(device);

  auto train_dataset = MnistPart(out_dir, torch::data::datasets::MNIST::Mode::kTrain, 320)
                           .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(torch::data::transforms::Stack<>());
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      std::move(train_dataset), batch_size);

  auto test_dataset = MnistPart(out_dir, torch::data::datasets::MNIST::Mode::kTest, 100)
                          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(torch::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader = torch::data::make_data_loader(std::move(test_dataset), 50);

  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(0.02).momentum(0.5));

  for (size_t epoch = 1; epoch <= 3; ++epoch) {
    train(epoch, model, device, *train_loader, optimizer);
    test(epoch, model, device, *test_loader, test_dataset_size);
  }
  torch::save(model.parameters(), out_dir + "/model.pt");
}
