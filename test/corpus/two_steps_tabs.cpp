// A course exercise, tab-indented: "gradient descent by hand, then with an optimizer". Two
// steps of plain SGD are written out one after the other on a fixed batch (copy and paste), the
// parameters printed after each, and then the same model is fitted over a DataLoader.
//
// Corpus: shape 11 of issue 31 (straight-line steps, twice, before a loop that trains the same
// model and optimizer), a CPU-only program (no device named), tabs.
//
//   two_steps_tabs BATCH OUT_DIR   prints both steps and each epoch, "metric" lines, and writes
//                                  OUT_DIR/model.pt
#include <torch/torch.h>
#include <iomanip>
#include <iostream>
#include <string>

int main(int argc, char *argv[])
{
	int64_t batch = 32;
	std::string out = ".";
	if (argc > 1)
		batch = std::atoll(argv[1]);
	if (argc > 2)
		out = argv[2];

	torch::manual_seed(11);
	torch::Tensor inputs = torch::rand({512, 2}) * 4 - 2;
	torch::Tensor targets = 3 * inputs.select(1, 0).unsqueeze(1) - 2 * inputs.select(1, 1).unsqueeze(1) + 1;

	torch::nn::Linear line(2, 1);
	torch::optim::SGD sgd(line->parameters(), torch::optim::SGDOptions(0.05));

	std::cout << std::fixed << std::setprecision(5);
	torch::Tensor fixed_x = inputs.narrow(0, 0, 128);
	torch::Tensor fixed_y = targets.narrow(0, 0, 128);

	// step 1
	sgd.zero_grad();
	torch::Tensor loss = torch::mse_loss(line(fixed_x), fixed_y);
	loss.backward();
	sgd.step();
	std::cout << "step 1: loss " << loss.item<double>() << "  bias " << line->bias.item<double>() << std::endl;

	// step 2 (same thing again)
	sgd.zero_grad();
	loss = torch::mse_loss(line(fixed_x), fixed_y);
	loss.backward();
	sgd.step();
	std::cout << "step 2: loss " << loss.item<double>() << "  bias " << line->bias.item<double>() << std::endl;

	auto ds = torch::data::datasets::TensorDataset(torch::cat({inputs, targets}, 1))
		.map(torch::data::transforms::Stack<torch::data::TensorExample>());
	auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(ds), batch);

	double total = 0;
	int64_t count = 0;
	for (int epoch = 0; epoch < 3; epoch++) {
		total = 0;
		count = 0;
		for (auto &b : *loader) {
			torch::Tensor x = b.data.narrow(1, 0, 2);
			torch::Tensor y = b.data.narrow(1, 2, 1);
			sgd.zero_grad();
			torch::Tensor l = torch::mse_loss(line(x), y);
			l.backward();
			sgd.step();
			total += l.item<double>() * x.size(0);
			count += x.size(0);
		}
		std::cout << "epoch " << epoch << ": mse " << total / count << std::endl;
	}
	std::cout << "metric final_mse " << total / count << std::endl;
	torch::save(line, out + "/model.pt");
	return 0;
}
