// Input of front-ends-agree.test: rewrites next to warnings, in 4-space style.
#include <torch/torch.h>

#define BACKWARD(loss) (loss).backward()

// A virtual helper cannot get the accelerator as a parameter: warnings instead.
struct Tuner {
    virtual void tune(torch::nn::Linear &model) {
        model(torch::ones({1, 4})).sum().backward();
    }
    virtual ~Tuner() = default;
};

auto make_dataset() {
    return torch::data::datasets::TensorDataset(torch::randn({6, 4}))
        .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

// A backward inside a macro expansion is not edited, so its loop is left as written.
void macro_step() {
    torch::nn::Linear model(4, 1);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    auto loader = torch::data::make_data_loader(make_dataset(), 2);
    for (auto &batch : *loader) {
        BACKWARD(model(batch.data).sum());
        optimizer.step();
    }
}

int main() {
    torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
    torch::nn::Linear model(4, 1);
    model->to(device);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    auto loader = torch::data::make_data_loader(make_dataset(), 2);
    for (auto &batch : *loader) {
        optimizer.zero_grad();
        auto loss = model(batch.data.to(device)).sum();
        loss.backward();
        optimizer.step();
    }
    macro_step();
    Tuner().tune(model);
    torch::save(model, "model.pt");
}
