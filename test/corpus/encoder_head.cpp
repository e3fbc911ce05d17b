// Representation-learning exercise: an encoder (torch::nn::Sequential) and a classifier head
// (a TORCH_MODULE) are trained together but by two optimizers (SGD for the encoder, Adam for
// the head), then the head alone is fine-tuned on frozen features with a third optimizer.
// Accuracy is reported after training on a held-out set. 4-space indent, std::cout + fixed.
//
// Corpus: several models and optimizers (issue 31), a program that names no device (kept on
// the CPU by Options::on_cpu()), and a statistic normalised in place after the loop.
//
//   encoder_head BATCH OUT_DIR   prints the epochs' losses and accuracies, "metric" lines,
//                                and writes OUT_DIR/model.pt
#include <torch/torch.h>
#include <iomanip>
#include <iostream>
#include <string>

struct HeadImpl : torch::nn::Module {
    torch::nn::Linear proj{nullptr};
    explicit HeadImpl(int64_t dim) { proj = register_module("proj", torch::nn::Linear(dim, 3)); }
    torch::Tensor forward(const torch::Tensor& z) { return proj(z); }
};
TORCH_MODULE(Head);

class Moons : public torch::data::datasets::Dataset<Moons> {
public:
    Moons(int64_t n, uint64_t seed) {
        auto gen = at::detail::createCPUGenerator(seed);
        y_ = torch::randint(0, 3, {n}, gen);
        auto t = torch::rand({n}, gen) * 3.14159;
        x_ = torch::stack({torch::cos(t) + y_.to(torch::kFloat), torch::sin(t) - 0.5 * y_.to(torch::kFloat)}, 1)
             + 0.1 * torch::randn({n, 2}, gen);
    }
    torch::data::Example<> get(size_t i) override { return {x_[i], y_[i]}; }
    torch::optional<size_t> size() const override { return y_.size(0); }
private:
    torch::Tensor x_, y_;
};

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: encoder_head BATCH OUT_DIR" << std::endl;
        return 1;
    }
    int64_t batch_size = std::stoll(argv[1]);
    std::string out = argv[2];
    torch::manual_seed(8);
    std::cout << std::fixed << std::setprecision(4);

    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        Moons(512, 1).map(torch::data::transforms::Stack<>()), batch_size);

    torch::nn::Sequential encoder(torch::nn::Linear(2, 32), torch::nn::ReLU(), torch::nn::Linear(32, 16),
                                  torch::nn::ReLU());
    Head head(16);
    torch::optim::SGD enc_opt(encoder->parameters(), torch::optim::SGDOptions(0.05));
    torch::optim::Adam head_opt(head->parameters(), torch::optim::AdamOptions(1e-2));

    for (int epoch = 0; epoch < 3; ++epoch) {
        double running = 0.0;
        int64_t seen = 0, hits = 0;
        for (auto& batch : *loader) {
            enc_opt.zero_grad();
            head_opt.zero_grad();
            auto logits = head(encoder->forward(batch.data));
            auto loss = torch::nn::functional::cross_entropy(logits, batch.target);
            loss.backward();
            enc_opt.step();
            head_opt.step();
            running += loss.item<double>() * batch.data.size(0);
            seen += batch.data.size(0);
            hits += (logits.argmax(1) == batch.target).sum().item<int64_t>();
        }
        std::cout << "joint epoch " << epoch << " loss " << running / seen << " acc "
                  << static_cast<double>(hits) / seen << std::endl;
    }

    // Fine-tune the head alone on frozen features.
    for (auto& p : encoder->parameters()) p.set_requires_grad(false);
    torch::optim::RMSprop ft_opt(head->parameters(), torch::optim::RMSpropOptions(1e-3));
    double ft_loss = 0;
    for (int epoch = 0; epoch < 2; ++epoch) {
        ft_loss = 0;
        int batches = 0;
        for (auto& batch : *loader) {
            ft_opt.zero_grad();
            auto loss = torch::nn::functional::cross_entropy(head(encoder->forward(batch.data)), batch.target);
            loss.backward();
            ft_opt.step();
            ft_loss += loss.item<double>();
            batches += 1;
        }
        ft_loss /= batches;
        std::cout << "finetune epoch " << epoch << " loss " << ft_loss << std::endl;
    }

    Moons test(256, 2);
    int64_t correct = 0, total = 0;
    {
        torch::NoGradGuard ng;
        for (int64_t i = 0; i < 256; i += 64) {
            std::vector<torch::data::Example<>> rows;
            for (int64_t j = i; j < i + 64; ++j) rows.push_back(test.get(j));
            auto stacked = torch::data::transforms::Stack<>().apply_batch(rows);
            correct += head(encoder->forward(stacked.data)).argmax(1).eq(stacked.target).sum().item<int64_t>();
            total += stacked.target.size(0);
        }
    }
    std::cout << "held-out accuracy " << 100.0 * correct / total << "%" << std::endl;
    std::cout << "metric finetune_loss " << ft_loss << std::endl;
    std::cout << "metric accuracy " << static_cast<double>(correct) / total << std::endl;
    torch::save(encoder, out + "/model.pt");
    torch::save(head, out + "/head.pt");
    return 0;
}
