// Corpus: a two-arm spiral classifier written in a 4-space, long-line style (lines past 100
// columns are the author's, and must survive the rewrite as they are); the training loop is in
// main and reports the epoch's running loss and accuracy as sums over the epoch divided by the
// training-set size (printf); RMSprop; cross_entropy on raw logits; a test loop in main.
//
//   spiral_report BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

struct SpiralNet : torch::nn::Module {
    SpiralNet() {
        hidden1 = register_module("hidden1", torch::nn::Linear(torch::nn::LinearOptions(2, 24)));
        hidden2 = register_module("hidden2", torch::nn::Linear(torch::nn::LinearOptions(24, 24)));
        head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(24, 2)));
    }

    torch::Tensor forward(torch::Tensor points) {
        return head->forward(torch::tanh(hidden2->forward(torch::tanh(hidden1->forward(points)))));
    }

    torch::nn::Linear hidden1{nullptr}, hidden2{nullptr}, head{nullptr};
};

// Points along two interleaved spirals; the label says which arm a point lies on.
class SpiralDataset : public torch::data::datasets::Dataset<SpiralDataset> {
  public:
    SpiralDataset(int64_t n_points, uint64_t seed) {
        auto gen = at::detail::createCPUGenerator(seed);
        auto t = torch::rand({n_points}, gen) * 3.0 * M_PI;
        labels_ = torch::randint(2, {n_points}, gen);
        auto angle = t + labels_.to(torch::kFloat) * M_PI;
        points_ = torch::stack({t * torch::cos(angle), t * torch::sin(angle)}, /*dim=*/1) / 5.0 + 0.05 * torch::randn({n_points, 2}, gen);
    }

    torch::data::Example<> get(size_t index) override { return {points_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]}; }

    torch::optional<size_t> size() const override { return static_cast<size_t>(labels_.size(0)); }

  private:
    torch::Tensor points_, labels_;
};

int main(int argc, char *argv[]) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
        return 1;
    }
    const int64_t batch_size = std::strtoll(argv[1], nullptr, 10);
    const std::string out_dir(argv[2]);

    torch::manual_seed(2024);
    auto model = std::make_shared<SpiralNet>();
    torch::optim::RMSprop optimizer(model->parameters(), torch::optim::RMSpropOptions(0.01).alpha(0.9));

    auto train_set = SpiralDataset(256, 31).map(torch::data::transforms::Stack<>());
    const size_t n_train = train_set.size().value();
    auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(std::move(train_set), batch_size);
    auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(SpiralDataset(128, 32).map(torch::data::transforms::Stack<>()), 32);

    for (int epoch = 1; epoch <= 5; ++epoch) {
        model->train();
        double running_loss = 0.0;
        int64_t num_correct = 0;
        for (auto &batch : *train_loader) {
            auto data = batch.data;
            auto target = batch.target;
            optimizer.zero_grad();
            auto logits = model->forward(data);
            auto loss = torch::nn::functional::cross_entropy(logits, target);
            loss.backward();
            optimizer.step();
            running_loss += loss.item<double>() * data.size(0);
            num_correct += logits.argmax(1).eq(target).sum().item<int64_t>();
        }
        std::printf("epoch %d: train loss %.4f acc %.4f\n", epoch, running_loss / n_train, static_cast<double>(num_correct) / n_train);
        std::printf("metric train_loss_%d %.6f\n", epoch, running_loss / n_train);
        std::printf("metric train_acc_%d %.6f\n", epoch, static_cast<double>(num_correct) / n_train);

        torch::NoGradGuard no_grad;
        model->eval();
        double test_loss = 0.0;
        int64_t test_correct = 0, test_count = 0;
        for (const auto &batch : *test_loader) {
            auto logits = model->forward(batch.data);
            test_loss += torch::nn::functional::cross_entropy(logits, batch.target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
            test_correct += logits.argmax(1).eq(batch.target).sum().item<int64_t>();
            test_count += batch.data.size(0);
        }
        std::printf("epoch %d: test  loss %.4f acc %.4f (%lld samples)\n", epoch, test_loss / test_count, static_cast<double>(test_correct) / test_count, static_cast<long long>(test_count));
        std::printf("metric test_acc_%d %.6f\n", epoch, static_cast<double>(test_correct) / test_count);
    }

    torch::save(model, out_dir + "/model.pt");
    return 0;
}
