// Input of front-ends-agree.test: rewrites next to warnings, in 4-space style.
#include <torch/torch.h>

#define BACKWARD(loss) (loss).backward()

void evaluate_and_tune(torch::nn::Linear &model) {
    auto loss = model(torch::ones({1, 4})).sum();
    loss.backward();
    torch::save(model, "tuned.pt");
}

// A virtual helper cannot get the accelerator as a parameter: warnings instead.
struct Tuner {
    virtual void tune(torch::nn::Linear &model) {
        model(torch::ones({1, 4})).sum().backward();
    }
    virtual ~Tuner() = default;
};

int main() {
    torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
    torch::nn::Linear model(4, 1);
    model->to(device);
    torch::optim::SGD optimizer(model->parameters(), 0.1);
    for (int step = 0; step < 3; ++step) {
        optimizer.zero_grad();
        auto loss = model(torch::randn({2, 4}).to(device)).sum();
        if (step == 0) {
            BACKWARD(loss);
        } else {
            loss.backward();
        }
        optimizer.step();
    }
    evaluate_and_tune(model);
    Tuner().tune(model);
    torch::save(model, "model.pt");
}
