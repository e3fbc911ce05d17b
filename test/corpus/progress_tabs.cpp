// Corpus: a regression net indented with tabs. The training loop in main prints a progress
// line every 4 batches ("[seen/total]" and the running mean loss so far), std::cout with
// manipulators; SGD with Nesterov momentum and a StepLR schedule stepped once per epoch; MSE
// loss; a separate, unsharded evaluation loop prints the test error.
//
//   progress_tabs BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>

namespace {

// y = sin(x0) + 0.5 x1 x2 - 0.2 x3, plus noise.
class Wave : public torch::data::datasets::Dataset<Wave> {
public:
	Wave(int64_t n, uint64_t seed) {
		auto gen = at::detail::createCPUGenerator(seed);
		x = torch::rand({n, 4}, gen) * 4 - 2;
		y = (torch::sin(x.select(1, 0)) + 0.5 * x.select(1, 1) * x.select(1, 2) -
		     0.2 * x.select(1, 3) + 0.05 * torch::randn({n}, gen))
		        .unsqueeze(1);
	}
	torch::data::Example<> get(size_t i) override {
		return {x[static_cast<int64_t>(i)], y[static_cast<int64_t>(i)]};
	}
	torch::optional<size_t> size() const override { return x.size(0); }

private:
	torch::Tensor x, y;
};

} // namespace

int main(int argc, char **argv) {
	if (argc != 3) {
		std::cerr << "usage: " << argv[0] << " BATCH OUT_DIR" << std::endl;
		return 2;
	}
	int64_t batch_size = std::atoll(argv[1]);
	std::string out_dir = argv[2];

	torch::manual_seed(11);
	torch::nn::Sequential net(
		torch::nn::Linear(4, 32),
		torch::nn::SiLU(),
		torch::nn::Linear(32, 16),
		torch::nn::SiLU(),
		torch::nn::Linear(16, 1));
	torch::optim::SGD sgd(net->parameters(),
	                      torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
	torch::optim::StepLR schedule(sgd, /*step_size=*/2, /*gamma=*/0.5);

	Wave train_data(320, 5);
	const int64_t train_total = static_cast<int64_t>(train_data.size().value());
	auto loader = torch::data::make_data_loader(
		std::move(train_data).map(torch::data::transforms::Stack<>()), batch_size);
	auto test_loader = torch::data::make_data_loader(
		Wave(160, 6).map(torch::data::transforms::Stack<>()), 40);

	std::cout << std::fixed << std::setprecision(5);
	for (int epoch = 0; epoch < 4; epoch++) {
		net->train();
		double running_loss = 0;
		int64_t seen = 0;
		int step = 0;
		for (auto &batch : *loader) {
			torch::Tensor inputs = batch.data, targets = batch.target;
			sgd.zero_grad();
			torch::Tensor loss = torch::mse_loss(net->forward(inputs), targets);
			loss.backward();
			sgd.step();
			running_loss += loss.item<double>() * inputs.size(0);
			seen += inputs.size(0);
			++step;
			if (step % 4 == 0) {
				std::cout << "epoch " << epoch << " [" << seen << "/" << train_total
				          << "] loss " << running_loss / seen << std::endl;
			}
		}
		schedule.step();

		torch::NoGradGuard no_grad;
		net->eval();
		double squared_error = 0;
		int64_t count = 0;
		for (auto &batch : *test_loader) {
			auto diff = net->forward(batch.data) - batch.target;
			squared_error += diff.pow(2).sum().item<double>();
			count += diff.size(0);
		}
		std::cout << "epoch " << epoch << " test mse " << squared_error / count << "\n";
		std::cout << "metric test_mse_" << epoch << " " << squared_error / count << "\n";
	}
	torch::save(net, out_dir + "/model.pt");
	return 0;
}
