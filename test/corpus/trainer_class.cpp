// Course-code style: a Classifier class owns the network and its optimizer, declared in the
// class and defined below it; a method trains one epoch, another measures accuracy, a third
// saves (4-space indent, printf). The device is chosen in main and handed to the class.
//
// Corpus: shape 5 of issue 31 (training in a class, model and optimizer as members): the
// training method gets the accelerator and prepares the members first in its body.
//
//   trainer_class BATCH OUT_DIR   prints each epoch's train loss and test accuracy, "metric"
//                                 lines, and writes OUT_DIR/model.pt
#include <torch/torch.h>
#include <cstdio>
#include <string>

struct Blobs : torch::data::datasets::Dataset<Blobs> {
    torch::Tensor x, y;
    Blobs(int64_t n, uint64_t seed) {
        torch::manual_seed(seed);
        x = torch::randn({n, 6});
        y = (x.narrow(1, 0, 3).sum(1) > x.narrow(1, 3, 3).sum(1)).to(torch::kLong);
    }
    torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
    torch::optional<size_t> size() const override { return x.size(0); }
};

class Classifier {
public:
    Classifier(double lr, torch::Device device);
    template <typename Loader> double train_one_epoch(Loader &loader);
    template <typename Loader> double accuracy(Loader &loader);
    void save(const std::string &dir);

private:
    torch::Device device_;
    torch::nn::Sequential net_;
    torch::optim::SGD optimizer_;
};

Classifier::Classifier(double lr, torch::Device device)
    : device_(device),
      net_(torch::nn::Linear(6, 32), torch::nn::ReLU(), torch::nn::Linear(32, 2)),
      optimizer_(net_->parameters(), torch::optim::SGDOptions(lr).momentum(0.9)) {
    net_->to(device_);
}

template <typename Loader> double Classifier::train_one_epoch(Loader &loader) {
    net_->train();
    double loss_sum = 0;
    int64_t seen = 0;
    for (auto &batch : loader) {
        auto data = batch.data.to(device_);
        auto target = batch.target.to(device_);
        optimizer_.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(net_->forward(data), target);
        loss.backward();
        optimizer_.step();
        loss_sum += loss.item<double>() * data.size(0);
        seen += data.size(0);
    }
    return loss_sum / seen;
}

template <typename Loader> double Classifier::accuracy(Loader &loader) {
    torch::NoGradGuard no_grad;
    net_->eval();
    int64_t correct = 0, total = 0;
    for (auto &batch : loader) {
        auto predicted = net_->forward(batch.data.to(device_)).argmax(1);
        correct += predicted.eq(batch.target.to(device_)).sum().template item<int64_t>();
        total += batch.data.size(0);
    }
    return static_cast<double>(correct) / total;
}

void Classifier::save(const std::string &dir) { torch::save(net_, dir + "/model.pt"); }

int main(int argc, char **argv) {
    const int64_t batch = argc > 1 ? std::stoll(argv[1]) : 32;
    const std::string dir = argc > 2 ? argv[2] : ".";
    torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
    auto train = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Blobs(512, 1).map(torch::data::transforms::Stack<>()), batch);
    auto test = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Blobs(256, 2).map(torch::data::transforms::Stack<>()), batch);
    torch::manual_seed(0);
    Classifier model(0.05, device);
    double loss = 0, accuracy = 0;
    for (int epoch = 1; epoch <= 4; ++epoch) {
        loss = model.train_one_epoch(*train);
        accuracy = model.accuracy(*test);
        std::printf("epoch %d train loss %.5f test accuracy %.4f\n", epoch, loss, accuracy);
    }
    std::printf("metric train_loss %.6f\n", loss);
    std::printf("metric test_accuracy %.6f\n", accuracy);
    model.save(dir);
    return 0;
}
