# The fuzz targets' compile flags, in the asan preset's tree (docs/testing.md, "Fuzzing").
# Every object is built with libFuzzer's coverage hooks, ASan and UBSan, so that the parsers'
# inputs steer the fuzzer; the sanitized tests share those objects (the hooks cost them little:
# the sanitizer runtimes define them, and building the runtime once instead of twice saves
# minutes).
# Executables link the sanitizers' runtimes, the fuzz executables libFuzzer too
# (test/fuzz/CMakeLists.txt); a shared library takes them from the executable that loads it.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ACCEL_BUILD_FUZZERS needs clang (libFuzzer); use the asan preset")
endif()
# A UBSan finding stops the run like an ASan one, so that a fuzzer reports it as a crash.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options($<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:-fsanitize=address,undefined>)
