// A course exercise that fits a linear model to data read from a CSV file. So that it runs
// anywhere, it first makes the data set from a formula and writes it to disk the way a real
// data set would arrive, then reads it back; when done, it removes the file (it is made again
// on each run) and writes the fitted weights to a second file. 4 spaces, std::cout.
//
// Corpus: shape 10 of issue 31 (files written and read back): the CSV is written by a helper
// on the main process only, between two waits, before any process reads it; the removal and
// the weights file run there too. The data is made with random numbers, and the generator is
// seeded again before anything else draws, so the main process's draws change nothing.
//
//   csv_roundtrip BATCH OUT_DIR   prints the row count, each epoch's mean squared error and
//                                 "metric" lines; writes OUT_DIR/weights.txt and
//                                 OUT_DIR/model.pt, and leaves no OUT_DIR/train.csv
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

// y = 2 x1 - x2 + 0.5 x3 + 1, plus a little noise
void write_csv(const std::string &path, int64_t rows) {
    torch::manual_seed(7);
    auto x = torch::randn({rows, 3});
    auto y = x.matmul(torch::tensor({2.0f, -1.0f, 0.5f})) + 1.0f + 0.05f * torch::randn({rows});
    std::ofstream out(path);
    out << "x1,x2,x3,y\n";
    for (int64_t i = 0; i < rows; ++i) {
        out << x[i][0].item<float>() << "," << x[i][1].item<float>() << ","
            << x[i][2].item<float>() << "," << y[i].item<float>() << "\n";
    }
}

class CsvDataset : public torch::data::datasets::Dataset<CsvDataset> {
public:
    explicit CsvDataset(const std::string &path) {
        std::ifstream in(path);
        std::string line;
        std::getline(in, line);  // header
        std::vector<float> xs, ys;
        while (std::getline(in, line)) {
            std::stringstream row(line);
            std::string cell;
            for (int c = 0; c < 4; ++c) {
                std::getline(row, cell, ',');
                (c < 3 ? xs : ys).push_back(std::stof(cell));
            }
        }
        const auto n = static_cast<int64_t>(ys.size());
        features_ = torch::tensor(xs).view({n, 3});
        targets_ = torch::tensor(ys).view({n, 1});
    }
    torch::data::Example<> get(size_t i) override { return {features_[i], targets_[i]}; }
    torch::optional<size_t> size() const override { return features_.size(0); }

private:
    torch::Tensor features_, targets_;
};

int main(int argc, char *argv[]) {
    const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
    const std::string out_dir = argc > 2 ? argv[2] : ".";
    const std::string csv_path = out_dir + "/train.csv";

    write_csv(csv_path, 512);

    auto dataset = CsvDataset(csv_path).map(torch::data::transforms::Stack<>());
    const auto rows = dataset.size().value();
    std::cout << "read " << rows << " rows from the CSV file" << std::endl;
    auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
        std::move(dataset), batch_size);

    torch::manual_seed(0);
    torch::nn::Linear model(3, 1);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));

    for (int epoch = 1; epoch <= 5; ++epoch) {
        double sum_loss = 0.0;
        int64_t seen = 0;
        for (auto &batch : *loader) {
            optimizer.zero_grad();
            auto prediction = model->forward(batch.data);
            auto loss = torch::mse_loss(prediction, batch.target);
            loss.backward();
            optimizer.step();
            sum_loss += loss.item<double>() * batch.data.size(0);
            seen += batch.data.size(0);
        }
        std::cout << "epoch " << epoch << " mse " << sum_loss / seen << std::endl;
    }

    // the data set is made again on each run: do not leave it behind
    std::remove(csv_path.c_str());

    {
        std::ofstream weights(out_dir + "/weights.txt");
        for (int i = 0; i < 3; ++i) {
            weights << model->weight[0][i].item<float>() << "\n";
        }
        weights << model->bias[0].item<float>() << "\n";
    }

    torch::save(model, out_dir + "/model.pt");
    std::cout << "metric weight_x1 " << model->weight[0][0].item<float>() << std::endl;
    std::cout << "metric bias " << model->bias[0].item<float>() << std::endl;
    return 0;
}
