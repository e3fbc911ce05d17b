// Corpus: Allman braces throughout. The model comes from a factory function returning
// std::shared_ptr<Classifier> and is handed around as that shared_ptr (evaluation takes it by
// value); AdamW; the training loop in main sums the per-batch mean losses and prints their
// mean over the epoch's batches; evaluation returns the accuracy over an unsharded test loader.
//
//   allman_factory BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>

class Classifier : public torch::nn::Module
{
public:
    Classifier(int64_t inputs, int64_t hidden, int64_t classes)
    {
        input_layer = register_module("input_layer", torch::nn::Linear(inputs, hidden));
        output_layer = register_module("output_layer", torch::nn::Linear(hidden, classes));
    }

    torch::Tensor forward(const torch::Tensor& x)
    {
        return torch::log_softmax(output_layer->forward(torch::gelu(input_layer->forward(x))), 1);
    }

private:
    torch::nn::Linear input_layer{nullptr};
    torch::nn::Linear output_layer{nullptr};
};

std::shared_ptr<Classifier> make_model(int64_t inputs, int64_t classes)
{
    auto model = std::make_shared<Classifier>(inputs, 4 * inputs, classes);
    for (auto& p : model->named_parameters())
    {
        if (p.key().find("bias") != std::string::npos)
        {
            torch::NoGradGuard no_grad;
            p.value().zero_();
        }
    }
    return model;
}

// Four overlapping clouds in six dimensions.
class Clouds : public torch::data::datasets::Dataset<Clouds>
{
public:
    Clouds(int64_t count, uint64_t seed)
    {
        auto generator = at::detail::createCPUGenerator(seed);
        auto centres = torch::randn({4, 6}, at::detail::createCPUGenerator(1234));
        labels = torch::randint(4, {count}, generator);
        features = centres.index_select(0, labels) + 0.9 * torch::randn({count, 6}, generator);
    }

    torch::data::Example<> get(size_t index) override
    {
        const auto i = static_cast<int64_t>(index);
        return {features[i], labels[i]};
    }

    torch::optional<size_t> size() const override
    {
        return labels.size(0);
    }

private:
    torch::Tensor features;
    torch::Tensor labels;
};

template <typename Loader>
double evaluate(std::shared_ptr<Classifier> model, Loader& loader)
{
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t right = 0;
    int64_t all = 0;
    for (const auto& batch : loader)
    {
        right += model->forward(batch.data).argmax(1).eq(batch.target).sum().template item<int64_t>();
        all += batch.target.size(0);
    }
    model->train();
    return static_cast<double>(right) / static_cast<double>(all);
}

int main(int argc, char** argv)
{
    if (argc != 3)
    {
        std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
        return 2;
    }
    const auto batch_size = static_cast<size_t>(std::stoul(argv[1]));
    const std::string out_dir = argv[2];

    torch::manual_seed(5);
    std::shared_ptr<Classifier> model = make_model(6, 4);
    torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(5e-3).weight_decay(1e-2));

    auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        Clouds(256, 40).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(batch_size));
    auto test_loader = torch::data::make_data_loader(
        Clouds(200, 41).map(torch::data::transforms::Stack<>()), 50);

    for (int epoch = 1; epoch <= 4; ++epoch)
    {
        double total = 0.0;
        int batches = 0;
        for (auto& batch : *train_loader)
        {
            optimizer.zero_grad();
            torch::Tensor loss = torch::nll_loss(model->forward(batch.data), batch.target);
            loss.backward();
            optimizer.step();
            total += loss.item<double>();
            ++batches;
        }
        const double accuracy = evaluate(model, *test_loader);
        std::printf("Epoch %d | mean batch loss %.5f over %d batches | test accuracy %.4f\n",
                    epoch, total / batches, batches, accuracy);
        std::printf("metric mean_batch_loss_%d %.6f\n", epoch, total / batches);
        std::printf("metric test_accuracy_%d %.6f\n", epoch, accuracy);
    }

    torch::save(model, out_dir + "/model.pt");
}
