// Corpus: a TORCH_MODULE holder (embedding, mean over tokens, linear head) passed by value to
// a templated training function that returns the epoch's mean loss (a sum over the epoch
// divided by the samples seen); the model is also handed to a utility as a
// std::shared_ptr<torch::nn::Module> (`model.ptr()`) to count its parameters; Adam with
// amsgrad; a SequentialSampler over the training set; main prints the report.
//
//   holder_counts BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

class TokenBagImpl : public torch::nn::Module {
public:
  TokenBagImpl(int64_t vocabulary, int64_t dim, int64_t classes)
      : embed_(torch::nn::EmbeddingOptions(vocabulary, dim)), head_(dim, classes) {
    register_module("embed", embed_);
    register_module("head", head_);
  }
  torch::Tensor forward(const torch::Tensor &tokens) {
    return head_->forward(embed_->forward(tokens).mean(1));
  }

private:
  torch::nn::Embedding embed_;
  torch::nn::Linear head_;
};
TORCH_MODULE(TokenBag);

int64_t count_parameters(const std::shared_ptr<torch::nn::Module> &module) {
  int64_t count = 0;
  for (const auto &parameter : module->parameters(/*recurse=*/true)) {
    count += parameter.numel();
  }
  return count;
}

// Six tokens out of 20; the label is whether more than half of them are "small" (< 10).
class Sentences : public torch::data::datasets::Dataset<Sentences> {
public:
  Sentences(int64_t size, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    tokens_ = torch::randint(20, {size, 6}, generator);
    labels_ = ((tokens_ < 10).sum(1) > 3).to(torch::kLong);
  }
  torch::data::Example<> get(size_t index) override {
    return {tokens_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return tokens_.size(0); }

private:
  torch::Tensor tokens_, labels_;
};

template <typename Loader>
double train_one_epoch(TokenBag model, torch::optim::Adam &adam, Loader &loader) {
  model->train();
  double running_loss = 0;
  int64_t seen = 0;
  for (auto &batch : loader) {
    torch::Tensor data = batch.data;
    adam.zero_grad();
    torch::Tensor loss = torch::cross_entropy_loss(model(data), batch.target);
    loss.backward();
    adam.step();
    running_loss += loss.item<double>() * data.size(0);
    seen += data.size(0);
  }
  return running_loss / seen;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR" << std::endl;
    return 2;
  }
  const int64_t batch_size = std::stoll(argv[1]);
  const std::string out_dir = argv[2];

  torch::manual_seed(8);
  TokenBag model(20, 8, 2);
  std::cout << "model has " << count_parameters(model.ptr()) << " parameters" << std::endl;
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.01).amsgrad(true));

  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Sentences(256, 61).map(torch::data::transforms::Stack<>()), batch_size);
  auto held_out = Sentences(100, 62).map(torch::data::transforms::Stack<>());
  auto held_out_loader = torch::data::make_data_loader(std::move(held_out), 100);

  for (int epoch = 1; epoch <= 5; ++epoch) {
    const double train_loss = train_one_epoch(model, adam, *loader);
    torch::NoGradGuard no_grad;
    model->eval();
    double accuracy = 0;
    for (const auto &batch : *held_out_loader) {
      accuracy = model(batch.data).argmax(1).eq(batch.target).to(torch::kDouble).mean().item<double>();
    }
    std::cout << "epoch " << epoch << " loss " << train_loss << " held-out accuracy " << accuracy
              << std::endl;
    std::cout << "metric train_loss_" << epoch << " " << train_loss << std::endl;
    std::cout << "metric accuracy_" << epoch << " " << accuracy << std::endl;
  }
  torch::save(model, out_dir + "/model.pt");
}
