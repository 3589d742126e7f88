# The installed package (issue 5, item 6): the programs, the public headers, the static
# libraries behind gpusort::engine, a CMake package and a pkg-config file.
#
#   find_package(gpusort CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE gpusort::engine)   # the engine and load_config
#
# Included at the end of the top-level CMakeLists.txt, once every target exists.
#
# Adding a library to the package is one line, gpusort_package_library(TARGET NAME [DEPENDS
# pkg...]), which exports it as gpusort::NAME and makes gpusortConfig.cmake find_dependency()
# each external package it links; a dependency left out is an error at configure time naming it.
#
#   target_link_libraries(app PRIVATE gpusort::client)   # talk to gpusortd (no CUDA needed)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GPUSORT_PACKAGE_TARGETS "")
set(GPUSORT_PACKAGE_DEPENDENCIES "")

function(gpusort_package_library target name)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "DEPENDS")
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  set(targets ${GPUSORT_PACKAGE_TARGETS} ${target})
  set(GPUSORT_PACKAGE_TARGETS "${targets}" PARENT_SCOPE)
  set(deps ${GPUSORT_PACKAGE_DEPENDENCIES} ${arg_DEPENDS})
  list(REMOVE_DUPLICATES deps)
  set(GPUSORT_PACKAGE_DEPENDENCIES "${deps}" PARENT_SCOPE)
endfunction()

# Interface targets that the static libraries name in their link interface. Static libraries
# pass even PRIVATE dependencies on ($<LINK_ONLY:...>), so these must travel with them; only
# what they contribute to linking is used by consumers (compile options stay ours).
gpusort_package_library(gpusort_internal internal)  # include paths of the source tree only
gpusort_package_library(gpusort_warnings warnings)  # -fsanitize link options in asan builds
gpusort_package_library(gpusort_logging logging)    # header-only spdlog and fmt

gpusort_package_library(gpusort_core core)
gpusort_package_library(gpusort_config config)
gpusort_package_library(gpusort_pipeline pipeline)
if(GPUSORT_HAS_CUDA)
  foreach(t IN ITEMS gpusort_cuda_runtime gpusort_cuda_core)
    if(TARGET ${t})
      string(REPLACE "gpusort_" "" name ${t})
      gpusort_package_library(${t} ${name} DEPENDS CUDAToolkit)
    endif()
  endforeach()
endif()

# gpusort::engine as the README uses it: the engine and the YAML configuration loader.
add_library(gpusort_engine_package INTERFACE)
target_link_libraries(gpusort_engine_package INTERFACE gpusort_pipeline gpusort_config)
gpusort_package_library(gpusort_engine_package engine)

# The daemon's client library and the protocol code under it. Its public header needs neither
# CUDA nor protobuf; the protobuf archive travels with the package like yaml-cpp's.
if(TARGET gpusort_client)
  gpusort_package_library(gpusort_proto proto)
  gpusort_package_library(gpusort_client client)
endif()

set(GPUSORT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpusort")
# yaml-cpp is linked from its static archive, which the machines that use gpusort need not have:
# the package carries a copy (MIT licence) in its own folder, where it cannot shadow a system one.
set(GPUSORT_YAML_ARCHIVE_DIR "${CMAKE_INSTALL_LIBDIR}/gpusort")

install(TARGETS ${GPUSORT_PACKAGE_TARGETS}
  EXPORT gpusortTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT gpusortTargets NAMESPACE gpusort:: DESTINATION ${GPUSORT_CMAKE_DIR})
install(FILES "${GPUSORT_YAML_CPP_ARCHIVE}" DESTINATION ${GPUSORT_YAML_ARCHIVE_DIR}
        RENAME libyaml-cpp.a)
if(TARGET gpusort_client)
  install(FILES "${GPUSORT_PROTOBUF_ARCHIVE}" DESTINATION ${GPUSORT_YAML_ARCHIVE_DIR}
          RENAME libprotobuf.a)
endif()

install(TARGETS gpusort_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET gpusortd)
  install(TARGETS gpusortd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/gpusort" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")

# gpusortConfig.cmake: find_dependency() for each external package, then the targets.
set(GPUSORT_FIND_DEPENDENCIES "")
foreach(dep IN LISTS GPUSORT_PACKAGE_DEPENDENCIES)
  string(APPEND GPUSORT_FIND_DEPENDENCIES "find_dependency(${dep})\n")
endforeach()
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/gpusortConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/gpusortConfig.cmake"
  INSTALL_DESTINATION ${GPUSORT_CMAKE_DIR}
  PATH_VARS GPUSORT_YAML_ARCHIVE_DIR)
# 0.x: minor versions may break the API.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/gpusortConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/gpusortConfig.cmake"
              "${PROJECT_BINARY_DIR}/gpusortConfigVersion.cmake"
        DESTINATION ${GPUSORT_CMAKE_DIR})

# gpusort.pc: relative to its own folder, so that `cmake --install --prefix` anywhere works.
# Static archives, so every library goes in Libs, dependents first.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "gpusort: CMAKE_INSTALL_LIBDIR must be relative for gpusort.pc")
endif()
file(RELATIVE_PATH GPUSORT_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" GPUSORT_PC_TO_PREFIX "${GPUSORT_PC_TO_PREFIX}")
set(GPUSORT_PC_LIBS "")
if(TARGET gpusort_client)
  set(GPUSORT_PC_LIBS "-lgpusort_client -lgpusort_proto ")
endif()
string(APPEND GPUSORT_PC_LIBS "-lgpusort_pipeline")
if(GPUSORT_HAS_CUDA)
  foreach(t IN ITEMS gpusort_cuda_runtime gpusort_cuda_core)
    if(TARGET ${t})
      string(APPEND GPUSORT_PC_LIBS " -l${t}")
    endif()
  endforeach()
endif()
string(APPEND GPUSORT_PC_LIBS " -lgpusort_config -lgpusort_core "
       "\${libdir}/gpusort/libyaml-cpp.a")
if(TARGET gpusort_client)
  string(APPEND GPUSORT_PC_LIBS " \${libdir}/gpusort/libprotobuf.a")
endif()
if(GPUSORT_HAS_CUDA)
  string(APPEND GPUSORT_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
endif()
string(APPEND GPUSORT_PC_LIBS " ${OpenMP_CXX_FLAGS} -pthread")
# Archives built with sanitizers need their runtimes at link time (asan and tsan presets).
foreach(san IN LISTS GPUSORT_SANITIZE)
  string(APPEND GPUSORT_PC_LIBS " -fsanitize=${san}")
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/cmake/gpusort.pc.in" "${PROJECT_BINARY_DIR}/gpusort.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/gpusort.pc"
        DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
