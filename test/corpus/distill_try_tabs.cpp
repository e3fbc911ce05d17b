// Knowledge distillation as a blog post writes it (tabs, printf, the whole of main inside
// try/catch): a wide teacher is trained with SGD, then a small student with Adam on the
// teacher's softened outputs plus the labels. The student's epoch loss is kept in a tensor.
//
// Corpus: shapes 1 and 5 of issue 31 (two models trained one after the other, each prepared
// before its own loop; main inside try), a loss mixing kl_div and cross-entropy, and a tensor
// statistic (`epoch_loss += loss.detach()`).
//
//   distill_try_tabs BATCH OUT_DIR   prints each epoch of both models and the test accuracies,
//                                    "metric" lines, and writes OUT_DIR/model.pt (the student)
#include <torch/torch.h>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

struct TeacherImpl : torch::nn::Module {
	TeacherImpl(int in, int hidden, int out) {
		fc1 = register_module("fc1", torch::nn::Linear(in, hidden));
		fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
		fc3 = register_module("fc3", torch::nn::Linear(hidden, out));
	}
	torch::Tensor forward(torch::Tensor x) {
		x = torch::relu(fc1->forward(x));
		x = torch::relu(fc2->forward(x));
		return fc3->forward(x);
	}
	torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Teacher);

class BlobDataset : public torch::data::Dataset<BlobDataset> {
	torch::Tensor data_, labels_;
public:
	BlobDataset(torch::Tensor d, torch::Tensor l) : data_(d), labels_(l) {}
	torch::data::Example<> get(size_t i) override { return {data_[i], labels_[i]}; }
	torch::optional<size_t> size() const override { return data_.size(0); }
};

static void make_blobs(const torch::Tensor &centers, int64_t n, torch::Tensor &x, torch::Tensor &y)
{
	// four gaussian blobs in 10 dimensions, labels in random order
	y = torch::randint(0, 4, {n}, torch::kLong);
	x = centers.index_select(0, y) + 1.5 * torch::randn({n, 10});
}

int main(int argc, char **argv)
{
	try {
		torch::manual_seed(42);
		int batch_size = (argc > 1) ? std::atoi(argv[1]) : 32;
		std::string out_dir = (argc > 2) ? argv[2] : ".";

		const int num_epochs = 4;
		const double T = 3.0;   // distillation temperature
		const double alpha = 0.7;

		torch::Tensor train_x, train_y, test_x, test_y;
		torch::Tensor centers = torch::randn({4, 10});
		make_blobs(centers, 512, train_x, train_y);
		make_blobs(centers, 128, test_x, test_y);

		auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
			BlobDataset(train_x, train_y).map(torch::data::transforms::Stack<>()),
			torch::data::DataLoaderOptions().batch_size(batch_size));
		auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
			BlobDataset(test_x, test_y).map(torch::data::transforms::Stack<>()),
			torch::data::DataLoaderOptions().batch_size(batch_size));

		/* ---------------- teacher ---------------- */
		Teacher teacher(10, 64, 4);
		torch::optim::SGD teacher_opt(teacher->parameters(),
			torch::optim::SGDOptions(0.05).momentum(0.9));

		std::vector<float> teacher_losses;
		printf("Training teacher\n");
		for (int epoch = 1; epoch <= num_epochs; ++epoch) {
			teacher->train();
			float running_loss = 0.0f;
			int batches = 0;
			for (auto &batch : *train_loader) {
				teacher_opt.zero_grad();
				auto output = teacher->forward(batch.data);
				auto loss = torch::nn::functional::cross_entropy(output, batch.target);
				loss.backward();
				teacher_opt.step();
				running_loss += loss.item<float>();
				batches++;
			}
			float avg = running_loss / batches;
			teacher_losses.push_back(avg);
			printf("Epoch [%d/%d] loss: %.4f\n", epoch, num_epochs, avg);
		}

		teacher->eval();
		{
			torch::NoGradGuard no_grad;
			long correct = 0, total = 0;
			for (auto &batch : *test_loader) {
				auto pred = teacher->forward(batch.data).argmax(1);
				correct += pred.eq(batch.target).sum().item<long>();
				total += batch.data.size(0);
			}
			printf("Teacher test accuracy: %.2f%% (%ld/%ld)\n", 100.0 * correct / total, correct, total);
		}

		/* ---------------- student ---------------- */
		torch::nn::Sequential student(
			torch::nn::Linear(10, 8),
			torch::nn::Tanh(),
			torch::nn::Linear(8, 4));
		torch::optim::Adam student_opt(student->parameters(), torch::optim::AdamOptions(5e-3));

		printf("Training student\n");
		for (int epoch = 1; epoch <= num_epochs; ++epoch) {
			student->train();
			torch::Tensor epoch_loss = torch::zeros({});
			int n_batches = 0;
			for (auto &batch : *train_loader) {
				torch::Tensor soft_targets;
				{
					torch::NoGradGuard no_grad;
					soft_targets = torch::softmax(teacher->forward(batch.data) / T, 1);
				}
				auto logits = student->forward(batch.data);
				auto distill = torch::kl_div(torch::log_softmax(logits / T, 1), soft_targets,
							     at::Reduction::Mean) * (T * T);
				auto hard = torch::nn::functional::cross_entropy(logits, batch.target);
				auto loss = alpha * distill + (1.0 - alpha) * hard;

				student_opt.zero_grad();
				loss.backward();
				student_opt.step();

				epoch_loss += loss.detach();
				++n_batches;
			}
			printf("Epoch [%d/%d] loss: %.4f\n", epoch, num_epochs,
			       epoch_loss.item<float>() / n_batches);
		}

		student->eval();
		torch::NoGradGuard no_grad;
		long correct = 0;
		for (auto &batch : *test_loader) {
			auto pred = student->forward(batch.data).argmax(1);
			correct += pred.eq(batch.target).sum().item<long>();
		}
		printf("Student test accuracy: %.2f%%\n", 100.0 * correct / 128);
		printf("Teacher final loss %.4f, first loss %.4f\n",
		       teacher_losses.back(), teacher_losses.front());
		printf("metric student_accuracy %.6f\n", correct / 128.0);
		printf("metric teacher_last_loss %.6f\n", teacher_losses.back());
		torch::save(student, out_dir + "/model.pt");
	} catch (const std::exception &e) {
		std::cerr << e.what();
		return 1;
	}
	return 0;
}
