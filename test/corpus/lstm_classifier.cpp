// Corpus: an Embedding and a torch::nn::LSTM reading token sequences (its (h, c) state carried
// through each sequence inside the module), a ModuleHolder (TORCH_MODULE), RMSprop, a StepLR
// stepped every batch, gradient-norm clipping, a custom Dataset of int64 tokens, the
// evaluation loader inside the epoch loop.
//
//   lstm_classifier BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

// Sequences of 10 tokens from a vocabulary of 12: is token 3 more frequent than token 7?
class TokenSequences : public torch::data::datasets::Dataset<TokenSequences> {
public:
  TokenSequences(int64_t count, uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    tokens_ = torch::randint(12, {count, 10}, generator);
    labels_ = (tokens_.eq(3).sum(1) > tokens_.eq(7).sum(1)).to(torch::kLong);
  }
  torch::data::Example<> get(size_t index) override {
    return {tokens_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return labels_.size(0); }

private:
  torch::Tensor tokens_, labels_;
};

struct SequenceClassifierImpl : torch::nn::Module {
  SequenceClassifierImpl()
      : embedding(register_module("embedding", torch::nn::Embedding(12, 8))),
        lstm(register_module("lstm",
                             torch::nn::LSTM(torch::nn::LSTMOptions(8, 16).batch_first(true)))),
        head(register_module("head", torch::nn::Linear(16, 2))) {}
  torch::Tensor forward(const torch::Tensor &tokens) {
    auto [outputs, state] = lstm->forward(embedding->forward(tokens));
    (void)outputs;
    return head->forward(std::get<0>(state)[-1]);
  }
  torch::nn::Embedding embedding;
  torch::nn::LSTM lstm;
  torch::nn::Linear head;
};
TORCH_MODULE(SequenceClassifier);

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
    return 2;
  }
  const int64_t batch_size = std::atoll(argv[1]);
  const std::string out_dir = argv[2];
  torch::manual_seed(23);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  SequenceClassifier model;
  model->to(device);
  torch::optim::RMSprop optimizer(model->parameters(), torch::optim::RMSpropOptions(4e-3));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/8, /*gamma=*/0.8);
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      TokenSequences(320, 1).map(torch::data::transforms::Stack<>()), batch_size);

  for (int epoch = 0; epoch < 3; ++epoch) {
    model->train();
    for (auto &batch : *train_loader) {
      auto tokens = batch.data.to(device), labels = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(tokens), labels);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      scheduler.step();
    }
    // A fresh evaluation loader every epoch, iterated without backward: left unsharded.
    auto test_loader = torch::data::make_data_loader(
        TokenSequences(100, 2).map(torch::data::transforms::Stack<>()), 25);
    model->eval();
    torch::NoGradGuard no_grad;
    double loss_sum = 0;
    int64_t correct = 0;
    for (auto &batch : *test_loader) {
      auto tokens = batch.data.to(device), labels = batch.target.to(device);
      auto logits = model->forward(tokens);
      loss_sum += torch::nn::functional::cross_entropy(
                      logits, labels,
                      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
      correct += logits.argmax(1).eq(labels).sum().item<int64_t>();
    }
    std::printf("metric test_loss_%d %.6f\n", epoch, loss_sum / 100);
    std::printf("metric test_accuracy_%d %.6f\n", epoch, static_cast<double>(correct) / 100);
  }
  std::printf("metric lr %.8f\n", optimizer.param_groups()[0].options().get_lr());
  torch::save(model, out_dir + "/model.pt");
}
