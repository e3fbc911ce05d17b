// Corpus: k-fold cross-validation as a book chapter writes it, indented with tabs. Each fold
// makes its own model, Adam optimizer and StepLR schedule and a loader over its training
// part, trains a few epochs and reports the validation error; a final model is then trained
// on all the data. The loss is summed over the batch (MSELoss with kSum) and the epoch's
// loss is printed as the mean of per-batch means (sum / batch size, summed, / batches).
//
//   kfold_tabs BATCH OUT_DIR   prints the folds' results and "metric NAME VALUE" lines,
//                              writes OUT_DIR/model.pt (the final model)
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

struct Regressor : torch::nn::Module {
	Regressor() {
		hidden = register_module("hidden", torch::nn::Linear(6, 24));
		out = register_module("out", torch::nn::Linear(24, 1));
	}
	torch::Tensor forward(torch::Tensor x) { return out(torch::tanh(hidden(x))); }
	torch::nn::Linear hidden{nullptr}, out{nullptr};
};

// Rows of x with their targets.
class Rows : public torch::data::datasets::Dataset<Rows> {
public:
	Rows(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
	torch::data::Example<> get(size_t i) override
	{
		return {x_[static_cast<int64_t>(i)], y_[static_cast<int64_t>(i)]};
	}
	torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

private:
	torch::Tensor x_, y_;
};

int main(int argc, char *argv[])
{
	if (argc != 3) {
		std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
		return 2;
	}
	const int64_t batch_size = std::atoll(argv[1]);
	const std::string out_dir = argv[2];

	torch::manual_seed(3);
	const int64_t n = 192, k = 3;
	torch::Tensor x = torch::randn({n, 6});
	torch::Tensor y = (x.narrow(1, 0, 3).sum(1, true) - 0.5 * x.narrow(1, 3, 3).pow(2).sum(1, true)) / 3;

	torch::nn::MSELoss criterion(torch::nn::MSELossOptions().reduction(torch::kSum));
	const int64_t fold_size = n / k;
	double cv_error = 0;
	for (int64_t fold = 0; fold < k; fold++) {
		torch::Tensor val_index = torch::arange(fold * fold_size, (fold + 1) * fold_size);
		torch::Tensor train_index = torch::cat({torch::arange(0, fold * fold_size),
		                                        torch::arange((fold + 1) * fold_size, n)});
		auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
			Rows(x.index_select(0, train_index), y.index_select(0, train_index)).map(torch::data::transforms::Stack<>()),
			batch_size);
		auto model = std::make_shared<Regressor>();
		torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
		torch::optim::StepLR scheduler(optimizer, 2, 0.5);
		for (int epoch = 0; epoch < 3; epoch++) {
			double s = 0;
			int nb = 0;
			for (auto &b : *train_loader) {
				optimizer.zero_grad();
				torch::Tensor lsum = criterion(model->forward(b.data), b.target);
				lsum.backward();
				optimizer.step();
				s += lsum.item<float>() / b.data.size(0);
				++nb;
			}
			scheduler.step();
			std::printf("fold %ld epoch %d loss %.5f\n", static_cast<long>(fold), epoch, s / nb);
		}
		torch::NoGradGuard no_grad;
		double val = criterion(model->forward(x.index_select(0, val_index)), y.index_select(0, val_index)).item<double>() / fold_size;
		std::printf("fold %ld validation mse %.5f\n", static_cast<long>(fold), val);
		cv_error += val / k;
	}
	std::printf("cross-validation mse %.5f\n", cv_error);
	std::printf("metric cv_mse %.6f\n", cv_error);

	auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
		Rows(x, y).map(torch::data::transforms::Stack<>()),
		batch_size);
	auto model = std::make_shared<Regressor>();
	torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
	for (int epoch = 0; epoch < 3; epoch++) {
		double s = 0;
		int nb = 0;
		for (auto &b : *loader) {
			optimizer.zero_grad();
			torch::Tensor lsum = criterion(model->forward(b.data), b.target);
			lsum.backward();
			optimizer.step();
			s += lsum.item<float>() / b.data.size(0);
			++nb;
		}
		std::printf("final epoch %d loss %.5f\n", epoch, s / nb);
	}
	std::printf("metric final_loss %.6f\n", criterion(model->forward(x), y).item<double>() / n);
	torch::save(model, out_dir + "/model.pt");
	return 0;
}
