# Finds LibTorch and the gloo headers the c10d Gloo backend needs.
#
# LibTorch comes from, in order: a user-supplied Torch_DIR (the LibTorch zip), or the torch
# wheel in the project's venv (ACCEL_PYTHON, default .venv/bin/python): the venv's Python is
# asked where the torch package lies, without importing it (the CUDA wheel installed with
# --no-deps, as scripts/setup-cuda makes it, cannot be imported), and its share/cmake is used.
#
# With ACCEL_WITH_CUDA the LibTorch must be a CUDA build. Its Caffe2Config needs a CUDA
# toolkit (nvcc, cuda_runtime.h, libcudart): ACCEL_CUDA_ROOT, default $CUDA_HOME, $CUDA_PATH or
# /usr/local/cuda. nccl.h comes from the venv's nvidia-nccl wheel (site-packages/nvidia/nccl),
# else from the toolkit or the system; cuBLAS/cuSPARSE/cuSOLVER headers from the toolkit or
# the venv (see docs/design.md, "The CUDA build").

set(ACCEL_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python whose torch wheel provides LibTorch (ignored when Torch_DIR is set)")

set(_accel_nccl_hint "")
set(_accel_python_prefix "")
set(_accel_torch_package "")
if(EXISTS "${ACCEL_PYTHON}")
  # Prints the torch package directory, nvidia/nccl's (empty when that wheel is absent) and the
  # venv's prefix.
  execute_process(
    COMMAND "${ACCEL_PYTHON}" -c [=[
import importlib.util
torch = importlib.util.find_spec("torch")
print(list(torch.submodule_search_locations)[0] if torch else "")
try:
    nccl = importlib.util.find_spec("nvidia.nccl")
except ImportError:
    nccl = None
print(list(nccl.submodule_search_locations)[0] if nccl else "")
import sys
print(sys.prefix)
]=]
    OUTPUT_VARIABLE _accel_python_out OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _accel_python_rc ERROR_QUIET)
  if(_accel_python_rc EQUAL 0)
    string(REPLACE "\n" ";" _accel_python_out "${_accel_python_out}")
    list(LENGTH _accel_python_out _accel_python_lines)
    list(GET _accel_python_out 0 _accel_torch_package)
    if(_accel_python_lines GREATER 2)
      list(GET _accel_python_out 1 _accel_nccl_hint)
      list(GET _accel_python_out 2 _accel_python_prefix)
    endif()
    if(NOT Torch_DIR AND _accel_torch_package)
      list(APPEND CMAKE_PREFIX_PATH "${_accel_torch_package}/share/cmake")
    endif()
  endif()
endif()

if(ACCEL_WITH_CUDA)
  set(_accel_cuda_default /usr/local/cuda)
  foreach(_accel_variable CUDA_HOME CUDA_PATH)
    if(DEFINED ENV{${_accel_variable}} AND NOT "$ENV{${_accel_variable}}" STREQUAL "")
      set(_accel_cuda_default "$ENV{${_accel_variable}}")
      break()
    endif()
  endforeach()
  set(ACCEL_CUDA_ROOT "${_accel_cuda_default}" CACHE PATH
      "CUDA toolkit the CUDA LibTorch's CMake files are pointed at (nvcc, headers, libcudart)")
  if(NOT EXISTS "${ACCEL_CUDA_ROOT}/include/cuda_runtime_api.h" OR
     NOT EXISTS "${ACCEL_CUDA_ROOT}/bin/nvcc")
    message(FATAL_ERROR
      "ACCEL_WITH_CUDA=ON needs a CUDA toolkit (bin/nvcc, include/cuda_runtime_api.h) at "
      "ACCEL_CUDA_ROOT='${ACCEL_CUDA_ROOT}': install one matching the CUDA LibTorch, or pass "
      "-DACCEL_CUDA_ROOT=/path/to/cuda (or set CUDA_HOME).")
  endif()
  # What Caffe2Config's FindCUDA and enable_language(CUDA) look at; a user's own values win.
  if(NOT CUDA_TOOLKIT_ROOT_DIR)
    set(CUDA_TOOLKIT_ROOT_DIR "${ACCEL_CUDA_ROOT}" CACHE PATH "CUDA toolkit (set by accel)")
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${ACCEL_CUDA_ROOT}/bin/nvcc" CACHE FILEPATH "nvcc (set by accel)")
  endif()
  if(NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT "${ACCEL_CUDA_ROOT}")
  endif()
  # Caffe2Config enables the CUDA language with our C++ standard (20) when none is set; CMake
  # 3.25 knows no CUDA20 flags for nvcc and fails its try_run. We compile no CUDA sources.
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
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

# A torch wheel's libtorch.so may carry and export its own copy of parts of libstdc++
# (torch 2.11.0+cu130 does: std::filesystem). The loader binds a program's calls to the first
# library of its needed list that defines a symbol; ahead of libstdc++ that is libtorch.so, and
# our calls into its copy crashed (std::filesystem::remove_all jumped to address 0 on a GPU
# machine). Naming libstdc++ first binds them to the real one. The runtime passes this on to
# the programs that link it (runtime/CMakeLists.txt).
set(ACCEL_LIBSTDCXX_FIRST "SHELL:-Wl,--push-state,--no-as-needed -lstdc++ -Wl,--pop-state")
set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "${ACCEL_LIBSTDCXX_FIRST}")

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

# A CUDA LibTorch's Caffe2Targets defines the imported targets c10_cuda and torch_cuda and its
# Caffe2Config sets CAFFE2_USE_CUDA; a CPU build has neither.
if(ACCEL_WITH_CUDA)
  if(NOT TARGET c10_cuda OR NOT TARGET torch_cuda OR NOT CAFFE2_USE_CUDA)
    message(FATAL_ERROR "ACCEL_WITH_CUDA=ON but the LibTorch found is a CPU build: ${Torch_DIR} "
                        "(scripts/setup-cuda makes .venv-cuda with the CUDA wheel)")
  endif()
  # Programs link libtorch_cuda, whose own dependencies (cuBLAS, cuDNN, ... of the full wheel
  # set) scripts/setup-cuda does not install: the linker leaves their symbols to the loader, so
  # the tests compile and link on a machine without them, and run where they are installed.
  string(APPEND CMAKE_EXE_LINKER_FLAGS " -Wl,--allow-shlib-undefined")
  # For the same reason a test program may not start here: gtest_discover_tests lists its tests
  # when ctest runs, not right after linking.
  set(CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE PRE_TEST)
  find_path(ACCEL_NCCL_INCLUDE_DIR nccl.h
    HINTS "${_accel_nccl_hint}/include" "${ACCEL_CUDA_ROOT}/include"
    DOC "Directory holding nccl.h (ProcessGroupNCCL.hpp includes it)")
  # Only the header: we call no NCCL function ourselves (nm shows none), and libtorch_cuda.so
  # already loads the libnccl.so.2 it was built with, from the same wheel.
  if(NOT ACCEL_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR
      "ACCEL_WITH_CUDA=ON: nccl.h not found. Install the nvidia-nccl wheel the torch wheel "
      "requires into the venv (scripts/setup-cuda does), or pass -DACCEL_NCCL_INCLUDE_DIR.")
  endif()
  # ATen's CUDA headers (which ProcessGroupNCCL.hpp includes) include cuBLAS, cuSPARSE and
  # cuSOLVER headers: a full toolkit has them; with a minimal one they come from the venv
  # (scripts/setup-cuda extracts them from the nvidia wheels into .venv-cuda/cuda-headers),
  # or from the nvidia wheels installed in full.
  get_filename_component(_accel_site_packages "${_accel_torch_package}" DIRECTORY)
  find_path(ACCEL_CUDA_LIBS_INCLUDE_DIR cublas_v2.h
    HINTS "${ACCEL_CUDA_ROOT}/include" "${_accel_python_prefix}/cuda-headers/include"
          "${_accel_site_packages}/nvidia/cu13/include" "${_accel_site_packages}/nvidia/cublas/include"
    DOC "Directory holding cublas_v2.h, cusparse.h and cusolverDn.h")
  foreach(_accel_header cusparse.h cusolverDn.h)
    if(ACCEL_CUDA_LIBS_INCLUDE_DIR AND NOT EXISTS "${ACCEL_CUDA_LIBS_INCLUDE_DIR}/${_accel_header}")
      set(ACCEL_CUDA_LIBS_INCLUDE_DIR "ACCEL_CUDA_LIBS_INCLUDE_DIR-NOTFOUND")
    endif()
  endforeach()
  if(NOT ACCEL_CUDA_LIBS_INCLUDE_DIR)
    message(FATAL_ERROR
      "ACCEL_WITH_CUDA=ON: cublas_v2.h, cusparse.h and cusolverDn.h not found (not in "
      "${ACCEL_CUDA_ROOT}/include nor in the venv). Run scripts/setup-cuda, install the full "
      "CUDA toolkit, or pass -DACCEL_CUDA_LIBS_INCLUDE_DIR.")
  endif()
  message(STATUS "accel: CUDA toolkit ${ACCEL_CUDA_ROOT}; NCCL ${ACCEL_NCCL_INCLUDE_DIR}; "
                 "cuBLAS headers ${ACCEL_CUDA_LIBS_INCLUDE_DIR}")
endif()
message(STATUS "accel: LibTorch ${ACCEL_TORCH_VERSION} from ${Torch_DIR}")

# Parsing <torch/torch.h> is most of the compile time of every file that includes it (a corpus
# program: 65 s to compile without it, 29 s with it). With ACCEL_PRECOMPILE_HEADERS it is parsed
# once per build for the runtime library, built position-independent, and the executables
# outside test/ (accel-selftest, the examples) reuse it, compiled -fPIC themselves (GCC refuses
# a header precompiled with -fPIC in a -fPIE compile; a header of their own cost 99 s of a
# contended cold build); test/ has one of its own, for the tests' flags. CMake adds -Winvalid-pch, so a header that does not fit is never skipped silently. Loading the
# 0.9 GB header costs seconds too, so files that do not include LibTorch are left without it
# (SKIP_PRECOMPILE_HEADERS). The rule library precompiles the clang headers it uses instead
# (rewrites/CMakeLists.txt).
# accel_precompile_torch(TARGET [OWNER]): TARGET compiles with the precompiled <torch/torch.h>,
# an executable without debug information unless ACCEL_TEST_DEBUG_INFO (CMakeLists.txt says why).
# OWNER builds it (accel_runtime; accel_test_torch_pch for everything under test/, which
# compiles with the tests' flags); the others reuse accel_runtime's, or accel_test_torch_pch's
# under test/.
function(accel_precompile_torch target)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_compile_options(${target} PRIVATE ${ACCEL_TEST_DEBUG_FLAGS})
  endif()
  if(NOT ACCEL_PRECOMPILE_HEADERS)
    return()
  endif()
  get_target_property(source_dir ${target} SOURCE_DIR)
  string(FIND "${source_dir}/" "${PROJECT_SOURCE_DIR}/test/" under_test)
  set(owner accel_runtime)
  if(under_test EQUAL 0)
    set(owner accel_test_torch_pch)
  elseif(type STREQUAL "EXECUTABLE")
    # The runtime's header is position-independent; -fPIC code links into a PIE executable.
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  if(ARGV1 STREQUAL "OWNER")
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  else()
    target_precompile_headers(${target} REUSE_FROM ${owner})
  endif()
endfunction()
