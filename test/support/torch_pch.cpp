// Compiles nothing of its own: the target accel_test_torch_pch (test/CMakeLists.txt) exists to
// precompile <torch/torch.h> with the tests' flags, for every test to reuse.
