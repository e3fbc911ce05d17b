// accel's runtime: make a LibTorch training program data-parallel.
// Public headers compile as C++17, like the programs that include them.
#pragma once

#include "accelerate/accelerator.h"
#include "accelerate/data_loader.h"
#include "accelerate/local_sgd.h"
#include "accelerate/notebook_launcher.h"
#include "accelerate/options.h"
#include "accelerate/state.h"
