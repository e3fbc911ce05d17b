# Installs the build into a fresh prefix, then builds and runs the consumer against it alone.
file(REMOVE_RECURSE ${PREFIX} ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
run(${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK})
run(${WORK}/consumer)
# libstdc++ comes first in the consumer's needed list, ahead of LibTorch: a wheel's libtorch.so
# may export its own copy of parts of libstdc++ (cmake/AccelTorch.cmake says why that crashes).
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -d ${WORK}/consumer OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
string(REGEX MATCH "Shared library: \\[([^]]+)\\]" first_needed "${dynamic}")
if(NOT rc EQUAL 0 OR NOT CMAKE_MATCH_1 MATCHES "^libstdc\\+\\+\\.so")
  message(FATAL_ERROR "the consumer's first needed library is '${CMAKE_MATCH_1}', not libstdc++:\n"
                      "${dynamic}")
endif()
