// Corpus: a book chapter that compares two models on one data set, indented with 4 spaces:
// first a linear baseline trained with SGD, then a small MLP trained with Adam, one after the
// other in main, each with its own loop. Losses are summed over the batch (mse_loss with
// Reduction::Sum) and reported per sample (the summed loss over the samples seen); each epoch
// also prints the first input of its first batch with its target and prediction, a probe that
// belongs to one sample and must not be averaged.
//
//   two_models_book BATCH OUT_DIR   prints each model's progress and "metric NAME VALUE"
//                                   lines, writes OUT_DIR/model.pt (the MLP)
#include <torch/torch.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>

namespace {

class Points : public torch::data::datasets::Dataset<Points> {
  public:
    explicit Points(int64_t count) {
        inputs = torch::rand({count, 3}) * 2 - 1;
        targets = (inputs.select(1, 0) * inputs.select(1, 1) + torch::cos(inputs.select(1, 2)))
                      .unsqueeze(1);
    }
    torch::data::Example<> get(size_t index) override {
        return {inputs[static_cast<int64_t>(index)], targets[static_cast<int64_t>(index)]};
    }
    torch::optional<size_t> size() const override { return inputs.size(0); }

  private:
    torch::Tensor inputs, targets;
};

} // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR\n";
        return 2;
    }
    const int64_t batch_size = std::atoll(argv[1]);
    const std::string out_dir = argv[2];
    torch::manual_seed(21);

    auto data_loader = torch::data::make_data_loader(
        Points(128).map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(batch_size));
    std::cout << std::setprecision(5) << std::fixed;

    // The baseline.
    torch::nn::Linear linear(3, 1);
    torch::optim::SGD sgd(linear->parameters(), torch::optim::SGDOptions(0.05));
    for (int epoch = 1; epoch <= 3; ++epoch) {
        double sq = 0;
        int64_t n = 0;
        for (auto &b : *data_loader) {
            sgd.zero_grad();
            auto lsum = torch::mse_loss(linear(b.data), b.target, torch::Reduction::Sum);
            lsum.backward();
            sgd.step();
            sq += lsum.item<double>();
            n += b.target.size(0);
        }
        std::cout << "linear epoch " << epoch << " mse " << sq / n << '\n';
    }

    // The MLP, trained the same way afterwards.
    torch::nn::Sequential mlp(torch::nn::Linear(3, 32), torch::nn::ReLU(), torch::nn::Linear(32, 1));
    torch::optim::Adam adam(mlp->parameters(), torch::optim::AdamOptions(0.01));
    double final_mse = 0;
    for (int epoch = 1; epoch <= 4; ++epoch) {
        double sq = 0;
        int64_t n = 0;
        bool probed = false;
        for (auto &b : *data_loader) {
            adam.zero_grad();
            auto prediction = mlp->forward(b.data);
            auto lsum = torch::mse_loss(prediction, b.target, torch::Reduction::Sum);
            lsum.backward();
            adam.step();
            sq += lsum.item<double>();
            n += b.target.size(0);
            if (!probed) {
                std::cout << "probe x0 " << b.data[0][0].item<float>() << " target "
                          << b.target[0][0].item<float>() << " predicted "
                          << prediction[0][0].item<float>() << '\n';
                probed = true;
            }
        }
        std::cout << "mlp epoch " << epoch << " mse " << sq / n << '\n';
        final_mse = sq / n;
    }
    std::cout << "metric mlp_mse " << final_mse << '\n';
    torch::save(mlp, out_dir + "/model.pt");
    return 0;
}
