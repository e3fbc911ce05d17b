// A blog post's "preprocess once, cache it on disk" pattern, tab-indented with printf: main
// builds a binary feature cache unless it is there already, loads it, trains a small
// classifier in a fit() helper that sets up its own model and optimizer, and writes the result
// as JSON.
//
// Corpus: shape 10 of issue 31 (files written and read back), the second program: the cache
// is built under an `if (!exists)` that runs whole on the main process, main hosts the
// Accelerator because it writes files and prints, and the JSON written in a block of its own.
//
//   cache_json_tabs BATCH OUT_DIR   prints the cached row count, each epoch's loss and "metric"
//                                   lines; writes OUT_DIR/features.bin, OUT_DIR/results.json
//                                   and OUT_DIR/model.pt
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

// Two features and a label per row, as raw floats.
static void build_cache(const std::string &path, int64_t rows)
{
	std::ofstream out(path, std::ios::binary);
	for (int64_t i = 0; i < rows; ++i) {
		const float x = std::sin(0.1f * i), z = std::cos(0.07f * i);
		const float row[3] = {x, z, x + z > 0.f ? 1.f : 0.f};
		out.write(reinterpret_cast<const char *>(row), sizeof(row));
	}
}

static torch::Tensor load_cache(const std::string &path)
{
	std::ifstream in(path, std::ios::binary);
	std::vector<float> values;
	float value;
	while (in.read(reinterpret_cast<char *>(&value), sizeof(value)))
		values.push_back(value);
	return torch::tensor(values).view({-1, 3});
}

static double fit(torch::Tensor rows, int64_t batch_size, const std::string &out_dir)
{
	torch::manual_seed(1);
	torch::nn::Sequential model(torch::nn::Linear(2, 8), torch::nn::Tanh(),
				    torch::nn::Linear(8, 1));
	torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
	auto dataset = torch::data::datasets::TensorDataset(rows).map(
		torch::data::transforms::Stack<torch::data::TensorExample>());
	auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
		std::move(dataset), batch_size);

	double last = 0.0;
	for (int epoch = 0; epoch < 4; ++epoch) {
		double total = 0.0;
		int64_t count = 0;
		for (auto &batch : *loader) {
			auto x = batch.data.narrow(1, 0, 2);
			auto y = batch.data.narrow(1, 2, 1);
			optimizer.zero_grad();
			auto loss = torch::binary_cross_entropy_with_logits(model->forward(x), y);
			loss.backward();
			optimizer.step();
			total += loss.item<double>() * x.size(0);
			count += x.size(0);
		}
		last = total / count;
		printf("epoch %d\tbce %.5f\n", epoch, last);
	}
	torch::save(model, out_dir + "/model.pt");
	return last;
}

int main(int argc, char **argv)
{
	const int64_t batch_size = argc > 1 ? std::atoll(argv[1]) : 16;
	const std::string out_dir = argc > 2 ? argv[2] : ".";
	const std::string cache = out_dir + "/features.bin";

	if (!std::filesystem::exists(cache))
		build_cache(cache, 256);
	auto rows = load_cache(cache);
	printf("cached rows: %lld\n", static_cast<long long>(rows.size(0)));

	const double bce = fit(rows, batch_size, out_dir);
	{
		std::ofstream json(out_dir + "/results.json");
		json << "{\"bce\": " << bce << "}\n";
	}
	printf("metric bce %.5f\n", bce);
	return 0;
}
