# Finds LLVM/Clang for accel-rewrite: 22 first, then older releases that still build.
set(_accel_llvm_hints)
foreach(_v 22 21 20 19)
  list(APPEND _accel_llvm_hints /usr/lib/llvm-${_v}/lib/cmake/clang)
endforeach()
find_package(Clang CONFIG HINTS ${_accel_llvm_hints})
if(NOT Clang_FOUND)
  message(FATAL_ERROR
    "Clang (19-22) not found. Install libclang-22-dev (scripts/setup does), pass "
    "-DClang_DIR=..., or configure with -DACCEL_BUILD_TOOL=OFF to build only the runtime.")
endif()
if(LLVM_PACKAGE_VERSION VERSION_LESS 19)
  message(FATAL_ERROR "accel-rewrite needs LLVM 19 or newer; found ${LLVM_PACKAGE_VERSION}")
endif()
set(ACCEL_LLVM_VERSION ${LLVM_PACKAGE_VERSION})
message(STATUS "accel: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
