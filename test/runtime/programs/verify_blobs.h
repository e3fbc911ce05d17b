// The data set of verify_classifier.cpp and its data parallel versions: 96 points of 3
// classes around three centres, the same on every run (its own generator), so that both sides
// of an `accel verify` train on the same samples.
#pragma once

#include <torch/torch.h>

class Blobs : public torch::data::datasets::Dataset<Blobs> {
public:
  Blobs() {
    auto generator = at::detail::createCPUGenerator(21);
    labels_ = torch::arange(96) % 3;
    const auto centres =
        torch::tensor({{2.0, 0.0, 0.0, 1.0}, {0.0, 2.0, 1.0, 0.0}, {0.0, 0.0, 2.0, 2.0}});
    points_ = centres.index_select(0, labels_) + torch::randn({96, 4}, generator);
  }
  torch::data::Example<> get(size_t index) override {
    return {points_[static_cast<int64_t>(index)], labels_[static_cast<int64_t>(index)]};
  }
  torch::optional<size_t> size() const override { return 96; }

private:
  torch::Tensor points_, labels_;
};
