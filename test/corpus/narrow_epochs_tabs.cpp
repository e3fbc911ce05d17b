// Corpus: a blog post's regression in a tab-indented, CPU-only file that never names a device.
// The data are two tensors held whole; a batch counter runs up to the number of batches the
// post computes from the batch size, and narrow cuts batch b's rows. The loss is summed over
// the batch (Reduction::Sum) and reported per sample at the end of each epoch; the gradients are
// clipped by norm; SGD with momentum.
//
//   narrow_epochs_tabs BATCH OUT_DIR   prints each epoch's loss per sample, the final error,
//                                      "metric" lines, and writes OUT_DIR/model.pt
#include <torch/torch.h>

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>

struct MLP : torch::nn::Module {
	torch::nn::Linear fc1{nullptr}, fc2{nullptr};

	MLP() {
		fc1 = register_module("fc1", torch::nn::Linear(4, 24));
		fc2 = register_module("fc2", torch::nn::Linear(24, 1));
	}

	torch::Tensor forward(torch::Tensor x) {
		return fc2(torch::relu(fc1(x)));
	}
};

int main(int argc, char* argv[]) {
	if (argc != 3) {
		std::cerr << "usage: narrow_epochs_tabs BATCH OUT_DIR" << std::endl;
		return 2;
	}
	const int64_t batch_size = std::atoi(argv[1]);
	const std::string out_dir = argv[2];
	torch::manual_seed(17);

	const int64_t N = 512;
	torch::Tensor X = torch::rand({N, 4}) * 2 - 1;
	torch::Tensor Y = (X.pow(2).sum(1, true) - X.select(1, 0).unsqueeze(1)).sin();

	auto net = std::make_shared<MLP>();
	torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.002).momentum(0.9));

	const int64_t num_batches = N / batch_size;
	for (int epoch = 1; epoch <= 6; epoch++) {
		double epoch_loss = 0;
		for (int64_t b = 0; b < num_batches; b++) {
			torch::Tensor xb = X.narrow(0, b * batch_size, batch_size);
			torch::Tensor yb = Y.narrow(0, b * batch_size, batch_size);

			opt.zero_grad();
			torch::Tensor loss = torch::mse_loss(net->forward(xb), yb, at::Reduction::Sum);
			loss.backward();
			torch::nn::utils::clip_grad_norm_(net->parameters(), 5.0);
			opt.step();

			epoch_loss += loss.item<double>();
		}
		std::cout << "epoch " << epoch << " | loss/sample " << std::setprecision(6)
		          << epoch_loss / N << std::endl;
	}

	torch::NoGradGuard no_grad;
	double mse = torch::mse_loss(net->forward(X), Y).item<double>();
	std::cout << "final mse " << mse << std::endl;
	std::cout << "metric mse " << mse << std::endl;
	torch::save(net, out_dir + "/model.pt");
	return 0;
}
