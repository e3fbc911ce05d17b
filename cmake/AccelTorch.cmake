# Finds LibTorch and the gloo headers the c10d Gloo backend needs.
#
# LibTorch comes from, in order: a user-supplied Torch_DIR (the LibTorch zip), or the torch
# wheel in the project's venv (ACCEL_PYTHON, default .venv/bin/python), asked for
# torch.utils.cmake_prefix_path.

set(ACCEL_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python whose torch wheel provides LibTorch (ignored when Torch_DIR is set)")

if(NOT Torch_DIR AND EXISTS "${ACCEL_PYTHON}")
  execute_process(
    COMMAND "${ACCEL_PYTHON}" -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _accel_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _accel_torch_rc ERROR_QUIET)
  if(_accel_torch_rc EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH "${_accel_torch_prefix}")
  endif()
endif()

find_package(Torch CONFIG QUIET)
if(NOT Torch_FOUND AND NOT ACCEL_BUILD_RUNTIME)
  # accel-rewrite only: LibTorch is optional (it gives the tool default include paths).
  return()
endif()
if(NOT Torch_FOUND)
  message(FATAL_ERROR
    "LibTorch not found. Run scripts/setup (it makes .venv with the torch wheel), pass "
    "-DTorch_DIR=/path/to/libtorch/share/cmake/Torch, or configure with "
    "-DACCEL_BUILD_RUNTIME=OFF to build only accel-rewrite.")
endif()

set(ACCEL_TORCH_VERSION ${Torch_VERSION})

# The wheel and the LibTorch zip contain gloo compiled into libtorch_cpu but no gloo headers;
# ProcessGroupGloo.hpp needs them. We use Debian's libgloo-dev headers only for the types the
# c10d header names (see docs/design.md, "Gloo headers").
if(ACCEL_BUILD_RUNTIME)
  find_path(ACCEL_GLOO_INCLUDE_DIR gloo/config.h)
  if(NOT ACCEL_GLOO_INCLUDE_DIR)
    message(FATAL_ERROR "gloo headers not found: install Debian's libgloo-dev (scripts/setup does).")
  endif()
  set(ACCEL_GLOO_SOURCE "gloo headers from ${ACCEL_GLOO_INCLUDE_DIR}; gloo code from libtorch_cpu")
endif()

if(ACCEL_WITH_CUDA AND NOT TORCH_CUDA_LIBRARIES AND NOT CAFFE2_USE_CUDA)
  message(FATAL_ERROR "ACCEL_WITH_CUDA=ON but the LibTorch found is a CPU build: ${Torch_DIR}")
endif()
message(STATUS "accel: LibTorch ${ACCEL_TORCH_VERSION} from ${Torch_DIR}")
