// Corpus: applied-ML code ported to C++ (issue 31, a fifth round of outside programs), in
// 4-space indentation. Features normalised with statistics of the training tensors, a
// train/validation split by torch::randperm, minibatches cut by hand from the tensors, a
// learning rate decayed each step with a cosine over a number of steps tied to the data set's
// size, a confusion matrix counted in place (index_put_ with accumulate) and handed to a
// helper that prints accuracy and macro F1 from it, a histogram of the predictions
// (torch::bincount), and the epoch line printed by a lambda that captures nothing.
//
//   applied_counts BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

namespace {

constexpr int64_t kClasses = 3;

struct Hyper {
    int64_t batch = 32;
    int epochs = 3;
    double lr = 0.05;
};

// Prints accuracy and macro F1 from a confusion matrix (rows: targets, columns: predictions).
void report(const std::string &tag, const torch::Tensor &confusion) {
    auto counts = confusion.to(torch::kDouble);
    auto hits = counts.diag();
    auto precision = hits / counts.sum(0).clamp_min(1);
    auto recall = hits / counts.sum(1).clamp_min(1);
    auto f1 = 2 * precision * recall / (precision + recall).clamp_min(1e-9);
    double accuracy = (hits.sum() / counts.sum()).item<double>();
    std::printf("  %s accuracy %.4f macro-F1 %.4f\n", tag.c_str(), accuracy,
                f1.mean().item<double>());
    std::printf("metric %s_accuracy %.6f\n", tag.c_str(), accuracy);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR" << std::endl;
        return 2;
    }
    Hyper h;
    h.batch = std::stoll(argv[1]);
    const std::string out_dir = argv[2];

    torch::manual_seed(11);
    auto centers = torch::randn({kClasses, 5}) * 2.0;
    auto labels = torch::randint(0, kClasses, {320}, torch::kLong);
    auto features = centers.index_select(0, labels) + torch::randn({320, 5});
    auto order = torch::randperm(320);
    auto xtr = features.index_select(0, order.slice(0, 0, 256));
    auto ytr = labels.index_select(0, order.slice(0, 0, 256));
    auto xva = features.index_select(0, order.slice(0, 256));
    auto yva = labels.index_select(0, order.slice(0, 256));
    auto mean = xtr.mean(0), stdev = xtr.std(0);
    xtr = (xtr - mean) / stdev;
    xva = (xva - mean) / stdev;

    torch::nn::Sequential net(torch::nn::Linear(5, 24), torch::nn::Tanh(),
                              torch::nn::Linear(24, kClasses));
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(h.lr).momentum(0.9));

    auto line = [](int epoch, double loss, double lr) {
        std::printf("epoch %d loss %.5f lr %.5f\n", epoch, loss, lr);
    };
    const int64_t n = xtr.size(0);
    int64_t step = 0;
    double lr = h.lr;
    for (int epoch = 0; epoch < h.epochs; ++epoch) {
        net->train();
        auto confusion = torch::zeros({kClasses, kClasses}, torch::kLong);
        auto predicted = torch::zeros({kClasses}, torch::kLong);
        double loss_sum = 0;
        int64_t seen = 0;
        for (int64_t i = 0; i < n; i += h.batch) {
            auto xb = xtr.slice(0, i, i + h.batch);
            auto yb = ytr.slice(0, i, i + h.batch);
            // A cosine decay over as many steps as a quarter of the data set's size.
            lr = 0.5 * h.lr * (1 + std::cos(M_PI * std::min(1.0, step / (n / 4.0))));
            for (auto &group : opt.param_groups()) {
                static_cast<torch::optim::SGDOptions &>(group.options()).lr(lr);
            }
            opt.zero_grad();
            auto logits = net->forward(xb);
            auto loss = torch::nn::functional::cross_entropy(logits, yb);
            loss.backward();
            opt.step();
            ++step;
            loss_sum += loss.item<double>() * xb.size(0);
            seen += xb.size(0);
            auto pred = logits.argmax(1).detach();
            confusion.index_put_({yb, pred}, torch::ones_like(yb), true);
            predicted += torch::bincount(pred, {}, kClasses);
        }
        line(epoch, loss_sum / seen, lr);
        std::printf("metric loss_%d %.6f\n", epoch, loss_sum / seen);
        report("train", confusion);
        std::cout << "  predicted per class " << predicted[0].item<int64_t>() << " "
                  << predicted[1].item<int64_t>() << " " << predicted[2].item<int64_t>()
                  << std::endl;
        std::cout << "metric predicted_0_" << epoch << " " << predicted[0].item<int64_t>()
                  << std::endl;
    }

    torch::NoGradGuard no_grad;
    net->eval();
    auto pred = net->forward(xva).argmax(1);
    auto valid = torch::zeros({kClasses, kClasses}, torch::kLong);
    valid.index_put_({yva, pred}, torch::ones_like(yva), true);
    report("valid", valid);
    torch::save(net, out_dir + "/model.pt");
}
