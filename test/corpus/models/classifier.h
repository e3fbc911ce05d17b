// A small classifier held as a plain Module behind std::shared_ptr (no TORCH_MODULE), in its
// own header, as larger programs keep their models. (No BatchNorm: without synchronised batch
// statistics, 2 processes at batch B normalise differently from 1 at 2B.)
#pragma once

#include <torch/torch.h>

struct Classifier : torch::nn::Module {
  Classifier()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3)))),
        fc(register_module("fc", torch::nn::Linear(4 * 6 * 6, 3))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(conv(x));
    return torch::log_softmax(fc(x.flatten(1)), 1);
  }
  torch::nn::Conv2d conv;
  torch::nn::Linear fc;
};
