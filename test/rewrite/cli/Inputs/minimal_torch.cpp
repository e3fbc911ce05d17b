// A minimal LibTorch program: for tests that need an input that parses and rewrites.
#include <torch/torch.h>

int main() {
  torch::nn::Linear model(2, 1);
  torch::save(model, "model.pt");
}
