#include <torch/torch.h>

#include <lib.h>
#include "notes.h"
#include "trainer.h"
#include "app.h"

#include <iostream>

int main() {
  Trainer trainer(torch::nn::Linear(3, 1));
  auto x = torch::randn({8, 3}), y = torch::randn({8, 1});
  for (int i = 0; i < 3; ++i) {
    std::cout << trainer.fit(x, y) << "\n";
  }
}
