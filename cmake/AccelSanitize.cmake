# The sanitizer presets' compile flags (docs/testing.md, "Sanitizers"): ACCEL_SANITIZE is a
# -fsanitize list, "address,undefined" or "thread". Included before any target, so it reaches
# every target we compile (runtime, launcher, tests) and nothing else: LibTorch, gloo and
# GoogleTest are prebuilt and stay uninstrumented.
set(_accel_sanitizers ${ACCEL_SANITIZE})
string(REPLACE "," ";" _accel_sanitizers "${_accel_sanitizers}")
foreach(_accel_sanitizer IN LISTS _accel_sanitizers)
  if(NOT _accel_sanitizer MATCHES "^(address|undefined|thread)$")
    message(FATAL_ERROR "ACCEL_SANITIZE: unknown sanitizer '${_accel_sanitizer}' "
                        "(known: address, undefined, thread)")
  endif()
endforeach()
if("thread" IN_LIST _accel_sanitizers AND "address" IN_LIST _accel_sanitizers)
  message(FATAL_ERROR "ACCEL_SANITIZE: thread and address cannot be combined")
endif()

add_compile_options(-fsanitize=${ACCEL_SANITIZE} -fno-omit-frame-pointer)
add_link_options(-fsanitize=${ACCEL_SANITIZE})
if("undefined" IN_LIST _accel_sanitizers)
  # A finding ends the process with an error (the test fails) instead of a line in a log.
  add_compile_options(-fno-sanitize-recover=undefined)
endif()

# The presets' *_OPTIONS send every report here (log_path), children's included; scripts/sanitize
# fails when it is not empty after the tests.
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/sanitizer-reports)
