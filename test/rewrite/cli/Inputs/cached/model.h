// The model of train.cpp, in a header its preamble includes (preamble-cache.test edits it).
#pragma once

#include <torch/torch.h>

#ifndef TRAIN_ON_GPU
#define TRAIN_ON_GPU 1
#endif

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);
