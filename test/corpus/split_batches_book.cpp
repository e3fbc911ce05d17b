// Corpus: batches made by the program itself, as a book chapter makes them before it introduces
// data loaders: the training tensors are cut with Tensor::split into a std::vector of (input,
// target) pairs, which each epoch iterates (accelerator.prepare_batches shares them). The loss
// is summed over the batch (Reduction::Sum) and divided by the rows seen; a Huber-loss
// regression with a momentum SGD and a step decay; 4-space indent, std::cout.
//
//   split_batches_book BATCH OUT_DIR   prints each epoch's loss, the final error, "metric"
//                                      lines, and writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

struct Regressor : torch::nn::Module
{
    Regressor()
    {
        layer1 = register_module("layer1", torch::nn::Linear(5, 16));
        layer2 = register_module("layer2", torch::nn::Linear(16, 1));
    }

    torch::Tensor forward(torch::Tensor x)
    {
        return layer2->forward(torch::sigmoid(layer1->forward(x)));
    }

    torch::nn::Linear layer1{nullptr}, layer2{nullptr};
};

int main(int argc, char **argv)
{
    if (argc != 3)
    {
        std::cerr << "usage: split_batches_book BATCH OUT_DIR\n";
        return 2;
    }
    const int64_t batch_size = std::atoi(argv[1]);
    const std::string out_dir = argv[2];
    torch::manual_seed(11);

    // 256 samples of y = w . x + noise
    auto X = torch::randn({256, 5});
    auto w = torch::tensor({0.5, -1.0, 2.0, 0.0, 1.5}).unsqueeze(1);
    auto Y = X.matmul(w) + 0.1 * torch::randn({256, 1});

    // Listing 4.2: make the mini-batches by hand.
    std::vector<std::pair<torch::Tensor, torch::Tensor>> train_batches;
    auto xs = X.split(batch_size);
    auto ys = Y.split(batch_size);
    for (size_t i = 0; i < xs.size(); ++i)
    {
        train_batches.emplace_back(xs[i], ys[i]);
    }

    auto model = std::make_shared<Regressor>();
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.002).momentum(0.9));
    torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);

    for (int epoch = 1; epoch <= 4; ++epoch)
    {
        double epoch_loss = 0.0;
        int64_t rows = 0;
        for (auto &[inputs, targets] : train_batches)
        {
            optimizer.zero_grad();
            auto loss = torch::huber_loss(model->forward(inputs), targets, at::Reduction::Sum);
            loss.backward();
            optimizer.step();
            epoch_loss += loss.item<double>();
            rows += inputs.size(0);
        }
        scheduler.step();
        std::cout << "Epoch " << epoch << ": loss per sample = " << epoch_loss / rows << std::endl;
    }

    torch::NoGradGuard no_grad;
    const double mse = torch::mse_loss(model->forward(X), Y).item<double>();
    std::cout << "Final mean squared error: " << mse << std::endl;
    std::cout << "metric mse " << mse << std::endl;
    torch::save(model, out_dir + "/model.pt");
    return 0;
}
