// Corpus: a course exercise turned into C++. main's whole body sits in try { } catch, as the
// course's template has it; one classifier is trained in two phases with two optimizers one
// after the other (a few SGD epochs, then Adam), a progress line counts the samples seen as
// batch_idx * batch size, and one counter of correct predictions is used for the training
// accuracy, then reset and reused for the test accuracy.
//
//   course_classifier BATCH OUT_DIR   prints progress and accuracies and "metric NAME VALUE"
//                                     lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace {

struct Blobs : torch::data::datasets::Dataset<Blobs> {
    torch::Tensor features, labels;
    Blobs(int64_t count, int64_t classes) {
        labels = torch::arange(count) % classes;
        torch::Tensor centers = torch::randn({classes, 5}) * 2;
        features = centers.index_select(0, labels) + torch::randn({count, 5});
    }
    torch::data::Example<> get(size_t i) override {
        return {features[static_cast<int64_t>(i)], labels[static_cast<int64_t>(i)]};
    }
    torch::optional<size_t> size() const override { return features.size(0); }
};

struct ClassifierImpl : torch::nn::Module {
    torch::nn::Linear fc1{nullptr}, fc2{nullptr};
    ClassifierImpl() : fc1(register_module("fc1", torch::nn::Linear(5, 16))),
                       fc2(register_module("fc2", torch::nn::Linear(16, 3))) {}
    torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
};
TORCH_MODULE(Classifier);

} // namespace

int main(int argc, char **argv) {
    try {
        if (argc != 3) {
            std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
            return 2;
        }
        const int64_t batch_size = std::atoll(argv[1]);
        const std::string out_dir = argv[2];
        torch::manual_seed(5);
        auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
            Blobs(96, 3).map(torch::data::transforms::Stack<>()), batch_size);
        auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
            Blobs(48, 3).map(torch::data::transforms::Stack<>()), 16);

        Classifier model;
        int64_t correct = 0;
        torch::optim::SGD warmup(model->parameters(), torch::optim::SGDOptions(0.05));
        for (int epoch = 0; epoch < 2; ++epoch) {
            int64_t batch_idx = 0;
            for (auto &batch : *train_loader) {
                warmup.zero_grad();
                auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
                loss.backward();
                warmup.step();
                if (batch_idx % 2 == 0) {
                    std::printf("warmup %d [%lld] loss %.4f\n", epoch,
                                static_cast<long long>(batch_idx * batch.data.size(0)), loss.item<float>());
                }
                ++batch_idx;
            }
        }
        torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(0.005));
        for (int epoch = 0; epoch < 3; ++epoch) {
            correct = 0;
            double total_loss = 0;
            int batches = 0;
            for (auto &batch : *train_loader) {
                adam.zero_grad();
                auto output = model->forward(batch.data);
                auto loss = torch::nn::functional::cross_entropy(output, batch.target);
                loss.backward();
                adam.step();
                total_loss += loss.item<double>();
                ++batches;
                correct += output.argmax(1).eq(batch.target).sum().item<int64_t>();
            }
            std::printf("epoch %d mean batch loss %.4f train accuracy %.4f\n", epoch,
                        total_loss / batches, static_cast<double>(correct) / 96);
        }
        correct = 0;
        {
            torch::NoGradGuard no_grad;
            for (auto &batch : *test_loader) {
                correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
            }
        }
        std::printf("test accuracy %.4f\n", static_cast<double>(correct) / 48);
        std::printf("metric test_accuracy %.6f\n", static_cast<double>(correct) / 48);
        torch::save(model, out_dir + "/model.pt");
    } catch (const std::exception &error) {
        std::fprintf(stderr, "error: %s\n", error.what());
        return 1;
    }
    return 0;
}
