#include <torch/torch.h>

#include <lib.h>
#include "notes.h"

int main() { std::cout << hint() << "\n"; }
