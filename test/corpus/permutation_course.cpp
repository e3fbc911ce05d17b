// Corpus: a course assignment turned into C++, batching as the Python version did before it
// met DataLoader: every epoch draws a permutation of the training rows, and a counter steps
// through it, cutting each batch's indices with slice and gathering the rows with
// index_select. A softmax classifier of three Gaussian blobs with Adam; the loss is averaged
// per sample by hand (loss times the batch's rows), accuracy counted; a validation split
// evaluated whole. 4-space indent, printf.
//
//   permutation_course BATCH OUT_DIR   prints each epoch's loss and accuracy, the validation
//                                      accuracy, "metric" lines, and writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

// Three blobs in 6 dimensions, `per_class` rows each, shuffled once.
std::pair<torch::Tensor, torch::Tensor> make_blobs(int64_t per_class) {
    auto centers = torch::tensor({{2.0, 0.0, -1.0, 0.5, 0.0, 1.0},
                                  {-2.0, 1.0, 0.0, -0.5, 1.0, 0.0},
                                  {0.0, -2.0, 1.5, 0.0, -1.0, -1.0}});
    std::vector<torch::Tensor> xs, ys;
    for (int64_t c = 0; c < 3; ++c) {
        xs.push_back(centers[c] + 0.9 * torch::randn({per_class, 6}));
        ys.push_back(torch::full({per_class}, c, torch::kLong));
    }
    auto X = torch::cat(xs), y = torch::cat(ys);
    auto order = torch::randperm(X.size(0));
    return {X.index_select(0, order), y.index_select(0, order)};
}

int main(int argc, char **argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: permutation_course BATCH OUT_DIR\n");
        return 2;
    }
    const int64_t batch_size = std::atoi(argv[1]);
    const std::string out_dir = argv[2];
    torch::manual_seed(3);

    auto [X, y] = make_blobs(160);
    // First 384 rows train, the last 96 validate.
    auto X_train = X.slice(0, 0, 384), y_train = y.slice(0, 0, 384);
    auto X_val = X.slice(0, 384), y_val = y.slice(0, 384);
    const int64_t n_train = X_train.size(0);

    torch::nn::Sequential model(torch::nn::Linear(6, 32), torch::nn::Tanh(),
                                torch::nn::Linear(32, 3));
    torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));

    for (int epoch = 0; epoch < 5; ++epoch) {
        auto perm = torch::randperm(n_train);
        double total_loss = 0.0;
        int64_t correct = 0, seen = 0;
        for (int64_t i = 0; i < n_train; i += batch_size) {
            auto idx = perm.slice(0, i, std::min(i + batch_size, n_train));
            auto xb = X_train.index_select(0, idx);
            auto yb = y_train.index_select(0, idx);

            auto scores = model->forward(xb);
            auto loss = torch::nn::functional::cross_entropy(scores, yb);
            optimizer.zero_grad();
            loss.backward();
            optimizer.step();

            total_loss += loss.item<double>() * xb.size(0);
            correct += scores.argmax(1).eq(yb).sum().item<int64_t>();
            seen += yb.size(0);
        }
        std::printf("epoch %d: loss %.5f, train accuracy %.4f\n", epoch + 1, total_loss / seen,
                    static_cast<double>(correct) / seen);
    }

    torch::NoGradGuard no_grad;
    const double val_accuracy =
        model->forward(X_val).argmax(1).eq(y_val).to(torch::kDouble).mean().item<double>();
    std::printf("validation accuracy %.4f\n", val_accuracy);
    std::printf("metric val_accuracy %.6f\n", val_accuracy);
    torch::save(model, out_dir + "/model.pt");
    return 0;
}
