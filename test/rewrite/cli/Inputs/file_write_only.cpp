// A LibTorch program that writes a file and does not train: accel-file-write says nothing.
#include <torch/torch.h>

#include <fstream>

int main() {
  std::ofstream out("data.csv");
  out << torch::ones({2}).sum().item<float>() << "\n";
}
