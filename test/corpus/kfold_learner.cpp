// Course-exercise style k-fold cross-validation: each fold builds a Learner (a Sequential
// network and Adam as members), trains it with a templated fit_epoch over the other folds'
// DataLoader, measures the training accuracy on that loader and the validation accuracy on the
// held-out fold (4-space indent, std::cout with setprecision).
//
// Corpus: shapes 1 and 5 of issue 31 (a model and optimizer made per fold, in a class whose
// method trains) and an evaluation helper given the sharded training loader, which gets the
// accelerator and combines its counts.
//
//   kfold_learner BATCH OUT_DIR   prints each fold's losses and accuracies, "metric" lines, and
//                                 writes OUT_DIR/model.pt (the last fold's network)
#include <torch/torch.h>

#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

class Rows : public torch::data::datasets::Dataset<Rows> {
public:
    Rows(torch::Tensor x, torch::Tensor y, std::vector<int64_t> which)
        : x_(std::move(x)), y_(std::move(y)), which_(std::move(which)) {}
    torch::data::Example<> get(size_t i) override { return {x_[which_[i]], y_[which_[i]]}; }
    torch::optional<size_t> size() const override { return which_.size(); }

private:
    torch::Tensor x_, y_;
    std::vector<int64_t> which_;
};

class Learner {
public:
    Learner(int64_t inputs, int64_t classes, double lr)
        : net(torch::nn::Linear(inputs, 16), torch::nn::ReLU(), torch::nn::Linear(16, classes)),
          optimizer(net->parameters(), torch::optim::AdamOptions(lr)) {}

    template <typename DataLoader> double fit_epoch(DataLoader &loader) {
        double running = 0.0;
        int batches = 0;
        for (auto &batch : loader) {
            optimizer.zero_grad();
            torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(batch.data), batch.target);
            loss.backward();
            optimizer.step();
            running += loss.item<double>();
            batches++;
        }
        return running / batches;
    }

    template <typename DataLoader> double train_accuracy(DataLoader &loader) {
        torch::NoGradGuard no_grad;
        int64_t correct = 0, seen = 0;
        for (auto &batch : loader) {
            torch::Tensor hits = net->forward(batch.data).argmax(1).eq(batch.target);
            correct += hits.sum().item<int64_t>();
            seen += hits.size(0);
        }
        return static_cast<double>(correct) / seen;
    }

    double validate(const torch::Tensor &x, const torch::Tensor &y) {
        torch::NoGradGuard no_grad;
        return net->forward(x).argmax(1).eq(y).to(torch::kDouble).mean().item<double>();
    }

    torch::nn::Sequential net;
    torch::optim::Adam optimizer;
};

int main(int argc, char *argv[]) {
    const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
    const std::string out_dir = argc > 2 ? argv[2] : ".";
    torch::manual_seed(1234);
    const int64_t n = 320, features = 6, classes = 3;
    const int k = 5;
    torch::Tensor X = torch::randn({n, features});
    torch::Tensor Y = X.matmul(torch::randn({features, classes})).argmax(1);
    const int64_t fold_size = n / k;

    double sum_val = 0.0, last_loss = 0.0;
    for (int fold = 0; fold < k; ++fold) {
        std::vector<int64_t> train_rows;
        for (int64_t i = 0; i < n; ++i) {
            if (i / fold_size != fold) {
                train_rows.push_back(i);
            }
        }
        auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
            Rows(X, Y, train_rows).map(torch::data::transforms::Stack<>()),
            torch::data::DataLoaderOptions().batch_size(batch_size));
        Learner learner(features, classes, 0.01);
        std::cout << "fold " << fold + 1 << "/" << k << std::endl;
        for (int epoch = 0; epoch < 4; ++epoch) {
            last_loss = learner.fit_epoch(*train_loader);
            std::cout << "  epoch " << epoch + 1 << "  loss " << std::fixed << std::setprecision(4)
                      << last_loss << std::endl;
        }
        const double train_acc = learner.train_accuracy(*train_loader);
        const double val_acc =
            learner.validate(X.narrow(0, fold * fold_size, fold_size), Y.narrow(0, fold * fold_size, fold_size));
        std::cout << "  train acc " << std::setprecision(4) << train_acc << "  val acc " << val_acc
                  << std::endl;
        sum_val += val_acc;
        if (fold == k - 1) {
            torch::save(learner.net, out_dir + "/model.pt");
        }
    }
    std::cout << "metric mean_val_acc " << std::setprecision(6) << sum_val / k << std::endl;
    std::cout << "metric last_loss " << last_loss << std::endl;
}
