# ctest labels for the tests gtest_discover_tests finds. Its PROPERTIES cannot carry a list
# (CMake 3.25 splits "name;kind" into two arguments), so the labels are set by a script that
# ctest runs after the discovered tests are defined: it reads the discovery's test list
# (<target>_TESTS) and gives each test every label named here.
#
#   accel_label_discovered_tests(state_test state_test unit)
function(accel_label_discovered_tests target)
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${script}
       "foreach(_test IN LISTS ${target}_TESTS)\n"
       "  set_tests_properties(\"\${_test}\" PROPERTIES LABELS \"${ARGN}\")\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
endfunction()
