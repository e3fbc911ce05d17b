// What every engine-test snippet sees before its own text: LibTorch's C++ API, precompiled.
#pragma once
#include <torch/torch.h>
