# Install rules and the exported package, so that a user project can
#   find_package(accel CONFIG REQUIRED)   target_link_libraries(app PRIVATE accel::runtime)
# from an install prefix or straight from this build tree.
include(CMakePackageConfigHelpers)

install(TARGETS accel_runtime EXPORT accelTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/accelerate
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(ACCEL_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/accel)
install(EXPORT accelTargets NAMESPACE accel:: DESTINATION ${ACCEL_CMAKE_INSTALL_DIR})

# The Torch_DIR this build used is remembered as a hint for users who do not pass their own.
set(ACCEL_TORCH_DIR_HINT "${Torch_DIR}")
configure_package_config_file(cmake/accelConfig.cmake.in
  ${PROJECT_BINARY_DIR}/package/accelConfig.cmake
  INSTALL_DESTINATION ${ACCEL_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/package/accelConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/package/accelConfig.cmake
  ${PROJECT_BINARY_DIR}/package/accelConfigVersion.cmake
  DESTINATION ${ACCEL_CMAKE_INSTALL_DIR})

# The build tree as a package: accel_DIR=<build>/package.
export(EXPORT accelTargets NAMESPACE accel:: FILE ${PROJECT_BINARY_DIR}/package/accelTargets.cmake)
