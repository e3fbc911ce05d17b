// A tab-indented course file that makes its data, writes it to a CSV file and reads it back:
// the write runs on the main process between two waits, its lines one tab deeper, since the
// generator is seeded again before anything else draws; the per-epoch log written inside the
// training loop is warned about, since guarding it would take the training with it.
// REQUIRES: torch
// RUN: rm -rf %t && mkdir -p %t && %strip-checks %s %t/input.cpp
// RUN: %accel-rewrite %t/input.cpp -o %t/out.cpp -- %torch_flags 2> %t/messages.txt
// RUN: FileCheck %s --check-prefix=CHECK-FIXES --strict-whitespace --input-file=%t/out.cpp
// RUN: FileCheck %s --check-prefix=CHECK-MESSAGES --input-file=%t/messages.txt \
// RUN:   --implicit-check-not=warning:
// RUN: %clangxx -fsyntax-only %torch_flags %torch_pch -I%runtime_include %t/out.cpp
// RUN: %accel-rewrite %t/out.cpp -o %t/again.cpp -- %torch_flags -I%runtime_include 2>/dev/null
// RUN: diff %t/out.cpp %t/again.cpp

#include <torch/torch.h>

#include <fstream>
#include <string>

void make_data(const std::string &path, int rows)
{
	std::ofstream out(path);
	auto x = torch::rand({rows, 2});
	for (int i = 0; i < rows; ++i)
		out << x[i][0].item<float>() << ","
		    << x[i][1].item<float>() << "\n";
}

torch::Tensor read_data(const std::string &path, int rows)
{
	std::ifstream in(path);
	std::vector<float> values(rows * 2);
	char comma;
	for (int i = 0; i < rows; ++i)
		in >> values[2 * i] >> comma >> values[2 * i + 1];
	return torch::tensor(values).view({rows, 2});
}

int main()
{
	const std::string path = "data.csv";
	make_data(path,
		  64);
	// CHECK-FIXES: {{^}}	accelerator.wait_for_everyone();{{$}}
	// CHECK-FIXES-NEXT: {{^}}	if (accelerator.is_main_process()) {{{$}}
	// CHECK-FIXES-NEXT: {{^}}		make_data(path,{{$}}
	// CHECK-FIXES-NEXT: {{^}}			  64);{{$}}
	// CHECK-FIXES-NEXT: {{^}}	}{{$}}
	// CHECK-FIXES-NEXT: {{^}}	accelerator.wait_for_everyone();{{$}}
	torch::manual_seed(0);
	auto x = read_data(path, 64);
	auto y = x.sum(1, true);
	auto loader = torch::data::make_data_loader(
		torch::data::datasets::TensorDataset(torch::cat({x, y}, 1))
			.map(torch::data::transforms::Stack<torch::data::TensorExample>()),
		8);
	torch::nn::Linear model(2, 1);
	torch::optim::SGD optimizer(model->parameters(), 0.1);
	for (int epoch = 0; epoch < 3; ++epoch) {
		for (auto &batch : *loader) {
			optimizer.zero_grad();
			auto rows = batch.data;
			auto loss = torch::mse_loss(model(rows.narrow(1, 0, 2)), rows.narrow(1, 2, 1));
			loss.backward();
			optimizer.step();
		}
		std::ofstream log("epoch.txt");
		// CHECK-MESSAGES: input.cpp:[[@LINE-1]]:17: warning: every process runs this file write {{.*}}: running line [[@LINE-9]] on the main process alone would not do: it trains (backward at line [[@LINE-4]]). {{.*}} [accel-file-write]
		log << epoch << "\n";
	}
}
