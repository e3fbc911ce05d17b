// Corpus: a blog post's program that logs the C way (issue 31): the model is a global set in
// main, a log helper prints each step's loss with printf, each step's hardest sample is
// formatted with snprintf and written with puts, the epoch summary goes to
// fprintf(stdout, ...), and the gradients are cleared by hand in a loop over the parameters
// before each step. Per-sample losses (reduction None) give both the step's mean and its
// largest value.
//
//   c_logging_blog BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

struct Net : torch::nn::Module {
    Net() {
        hidden = register_module("hidden", torch::nn::Linear(6, 24));
        out = register_module("out", torch::nn::Linear(24, 3));
    }
    torch::Tensor forward(torch::Tensor x) { return out->forward(torch::tanh(hidden->forward(x))); }
    torch::nn::Linear hidden{nullptr}, out{nullptr};
};

// Three blobs around fixed centres.
struct Blobs : torch::data::datasets::Dataset<Blobs> {
    Blobs() {
        auto gen = at::detail::createCPUGenerator(11);
        labels = torch::randint(3, {192}, gen);
        auto centres = torch::randn({3, 6}, gen) * 2;
        points = centres.index_select(0, labels) + torch::randn({192, 6}, gen);
    }
    torch::data::Example<> get(size_t i) override {
        return {points[static_cast<int64_t>(i)], labels[static_cast<int64_t>(i)]};
    }
    torch::optional<size_t> size() const override { return 192; }
    torch::Tensor points, labels;
};

std::shared_ptr<Net> net;

void log_step(int epoch, int step, double loss) {
    printf("epoch %d step %3d  loss %.5f\n", epoch, step, loss);
}

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
        return 2;
    }
    const int batch = std::atoi(argv[1]);
    const std::string out_dir = argv[2];
    torch::manual_seed(5);
    net = std::make_shared<Net>();

    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Blobs().map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(batch));
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.2).momentum(0.5));

    double last_epoch_loss = 0;
    for (int epoch = 1; epoch <= 3; ++epoch) {
        double loss_sum = 0;
        long seen = 0;
        int step = 0;
        for (auto& batch_ : *loader) {
            for (auto& p : net->parameters()) {
                if (p.grad().defined())
                    p.grad().zero_();
            }
            auto per_sample = torch::nn::functional::cross_entropy(
                net->forward(batch_.data), batch_.target,
                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
            auto loss = per_sample.mean();
            loss.backward();
            optimizer.step();

            loss_sum += per_sample.sum().item<double>();
            seen += batch_.data.size(0);
            if (step % 3 == 0) {
                log_step(epoch, step, loss.item<double>());
                char line[80];
                snprintf(line, sizeof line, "  hardest sample loss %.5f", per_sample.max().item<double>());
                puts(line);
            }
            ++step;
        }
        last_epoch_loss = loss_sum / seen;
        fprintf(stdout, "epoch %d: %ld samples, mean loss %.5f\n", epoch, seen, last_epoch_loss);
    }
    printf("metric final_loss %.6f\n", last_epoch_loss);
    torch::save(net, out_dir + "/model.pt");
    return 0;
}
