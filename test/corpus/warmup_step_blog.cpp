// Blog-post style: before the real training, one optimizer step is written out by hand on the
// first rows ("watch the loss go down"), then epochs over a DataLoader keep the epoch's loss in
// a tensor (4-space indent, printf, torch::Tensor accumulators).
//
// Corpus: shape 11 of issue 31 (a straight-line step: rewritten whole, zero_grad, backward and
// step through the accelerator, on the batch as written) and a tensor statistic
// (`epoch_loss += loss.detach()`, combined where it is read).
//
//   warmup_step_blog BATCH OUT_DIR   prints the warm-up step and each epoch's mean loss,
//                                    "metric" lines, and writes OUT_DIR/model.pt
#include <torch/torch.h>
#include <cstdio>
#include <string>

struct Regressor : torch::nn::Module {
    torch::nn::Linear hidden{nullptr}, out{nullptr};
    Regressor() {
        hidden = register_module("hidden", torch::nn::Linear(3, 16));
        out = register_module("out", torch::nn::Linear(16, 1));
    }
    torch::Tensor forward(torch::Tensor x) { return out(torch::relu(hidden(x))); }
};

int main(int argc, char **argv) {
    const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
    const std::string out_dir = argc > 2 ? argv[2] : ".";
    torch::manual_seed(3);
    auto X = torch::linspace(-2, 2, 256 * 3).reshape({256, 3});
    auto Y = X.sum(1, true) * 0.5 + torch::sin(X.select(1, 0)).unsqueeze(1);

    auto net = std::make_shared<Regressor>();
    torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-2));

    // One step by hand on the first 64 rows.
    auto xb = X.slice(0, 0, 64), yb = Y.slice(0, 0, 64);
    auto warm = torch::mse_loss(net->forward(xb), yb);
    opt.zero_grad();
    warm.backward();
    opt.step();
    std::printf("warm-up step: loss %.5f -> %.5f\n", warm.item<float>(),
                torch::mse_loss(net->forward(xb), yb).item<float>());

    auto data = torch::data::datasets::TensorDataset(torch::cat({X, Y}, 1))
                    .map(torch::data::transforms::Stack<torch::data::TensorExample>());
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        std::move(data), batch_size);
    float last = 0;
    for (int epoch = 1; epoch <= 4; ++epoch) {
        torch::Tensor epoch_loss = torch::zeros({});
        int steps = 0;
        for (auto &batch : *loader) {
            auto x = batch.data.slice(1, 0, 3), y = batch.data.slice(1, 3, 4);
            opt.zero_grad();
            auto loss = torch::mse_loss(net->forward(x), y);
            loss.backward();
            opt.step();
            epoch_loss += loss.detach();
            steps++;
        }
        last = (epoch_loss / steps).item<float>();
        std::printf("epoch %d  mean loss %.5f\n", epoch, last);
    }
    std::printf("metric train_loss %.6f\n", last);
    torch::save(net, out_dir + "/model.pt");
}
