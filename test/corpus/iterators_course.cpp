// Corpus: course code written the old way (issue 31): a Trainer constructed from the model it
// trains (its optimizer built from the constructor's parameter), a loader walked with its
// iterators, and a d2l-style data_iter whose shuffled list of batches is iterated straight
// from the call for a second, fine-tuning phase.
//
//   iterators_course BATCH OUT_DIR   prints "metric NAME VALUE" lines, writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

struct WaveNetImpl : torch::nn::Module
{
	WaveNetImpl()
	{
		layer1 = register_module("layer1", torch::nn::Linear(3, 12));
		layer2 = register_module("layer2", torch::nn::Linear(12, 1));
	}
	torch::Tensor forward(torch::Tensor x) { return layer2(torch::tanh(layer1(x))); }
	torch::nn::Linear layer1{nullptr}, layer2{nullptr};
};
TORCH_MODULE(WaveNet);

class Waves : public torch::data::datasets::Dataset<Waves>
{
public:
	Waves()
	{
		auto gen = at::detail::createCPUGenerator(21);
		x_ = torch::rand({160, 3}, gen) * 4 - 2;
		y_ = torch::sin(x_.sum(1, true));
	}
	torch::data::Example<> get(size_t i) override { return {x_[(int64_t)i], y_[(int64_t)i]}; }
	torch::optional<size_t> size() const override { return 160; }
	torch::Tensor x_, y_;
};

class Trainer
{
public:
	Trainer(WaveNet net, double lr) : net_(net), opt_(net->parameters(), torch::optim::SGDOptions(lr).momentum(0.8)) {}

	template <typename Loader>
	double epoch(Loader &loader)
	{
		double total = 0;
		int64_t count = 0;
		for (auto it = loader.begin(); it != loader.end(); ++it)
		{
			auto &batch = *it;
			opt_.zero_grad();
			auto loss = torch::mse_loss(net_->forward(batch.data), batch.target);
			loss.backward();
			opt_.step();
			total += loss.template item<double>() * batch.data.size(0);
			count += batch.data.size(0);
		}
		return total / count;
	}

private:
	WaveNet net_;
	torch::optim::SGD opt_;
};

// d2l's data_iter: the examples in a new random order, cut into batches.
std::vector<std::pair<torch::Tensor, torch::Tensor>> data_iter(int64_t batch_size, const torch::Tensor &features, const torch::Tensor &labels)
{
	auto order = torch::randperm(features.size(0));
	std::vector<std::pair<torch::Tensor, torch::Tensor>> batches;
	for (int64_t i = 0; i < features.size(0); i += batch_size)
	{
		auto idx = order.slice(0, i, std::min(i + batch_size, features.size(0)));
		batches.emplace_back(features.index_select(0, idx), labels.index_select(0, idx));
	}
	return batches;
}

int main(int argc, char **argv)
{
	if (argc != 3)
	{
		std::fprintf(stderr, "usage: %s BATCH OUT_DIR\n", argv[0]);
		return 2;
	}
	const int64_t batch_size = std::atoll(argv[1]);
	const std::string out_dir = argv[2];
	torch::manual_seed(8);
	WaveNet net;
	Trainer trainer(net, 0.05);
	auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
		Waves().map(torch::data::transforms::Stack<>()), batch_size);
	for (int e = 1; e <= 3; ++e)
		std::printf("metric train_mse_%d %.6f\n", e, trainer.epoch(*loader));

	// Fine-tuning the last layer on its own with plain SGD.
	Waves waves;
	torch::optim::SGD tune(net->layer2->parameters(), 0.02);
	for (int e = 1; e <= 2; ++e)
	{
		double sum = 0;
		int64_t n = 0;
		for (auto &[X, y] : data_iter(batch_size, waves.x_, waves.y_))
		{
			tune.zero_grad();
			auto l = torch::mse_loss(net->forward(X), y, torch::Reduction::Sum);
			(l / X.size(0)).backward();
			tune.step();
			sum += l.item<double>();
			n += X.size(0);
		}
		std::printf("metric tune_mse_%d %.6f\n", e, sum / n);
	}
	torch::save(net, out_dir + "/model.pt");
}
