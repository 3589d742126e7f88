# The installed package (cmake --install): the programs, the public headers, and two libraries
# (three where an MPI was found), each a component of the CMake package and a pkg-config file of
# its own:
#
#   find_package(gpusort CONFIG REQUIRED COMPONENTS client)  # gpusort::client, gpusort-client.pc
#   find_package(gpusort CONFIG REQUIRED COMPONENTS engine)  # gpusort::engine, gpusort-engine.pc
#   find_package(gpusort CONFIG REQUIRED COMPONENTS mpi)     # gpusort::mpi, gpusort-mpi.pc
#
# Issue 20, item 1. The installed libraries are shared and carry what they need, so a consumer
# finds no other package and sees nothing of ours but <gpusort/...> and the two targets:
#   libgpusort_client.so  client/lib, the protocol code (proto/) and what it uses of core/; links
#                         the system's shared protobuf. No CUDA, no OpenMP.
#   libgpusort_engine.so  pipeline/, config/, core/, and where CUDA builds the CUDA libraries
#                         with cudart linked statically (as in the programs: a consumer needs the
#                         driver only, no toolkit); links the system's shared yaml-cpp and OpenMP.
#   libgpusort_mpi.so     mpi/ (issue 41): the distributed sort over libgpusort_engine.so and the
#                         system's MPI, both of which its consumers link too (<gpusort/mpi.hpp>
#                         includes <mpi.h>): the package looks for MPI when asked for it.
# spdlog and fmt are compiled into both (gpusort_logging_libraries, static), and both export only
# the gpusort namespace (exports.map), so that a consumer's own spdlog, fmt or protobuf never
# meets ours.
#
# The programs and the tests keep linking the static archives of the build tree, and through them
# the static protobuf and yaml-cpp archives: scripts/bundle.sh ships those programs to GPU hosts
# that have neither library. The package's libraries are made of the same object files (nothing
# is compiled twice); only the link differs.
#
# Included at the end of the top-level CMakeLists.txt, once every target exists.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# gpusort_package_library(NAME OBJECTS_OF target... LINK item... [PUBLIC_LINK item...]):
# libgpusort_NAME.so from the object files of the given build-tree libraries, linked with the
# given items (archives of the build tree whose needed members go in, and the shared system
# libraries; PUBLIC_LINK: those its consumers link too), exported as gpusort::NAME. A dependency
# left out is a link error here (--no-undefined), not a consumer's.
set(GPUSORT_PACKAGE_COMPONENTS "")
function(gpusort_package_library name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "OBJECTS_OF;LINK;PUBLIC_LINK")
  set(target gpusort_${name}_package)
  add_library(${target} SHARED)
  foreach(t IN LISTS arg_OBJECTS_OF)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${t}>)
  endforeach()
  target_link_libraries(${target} PRIVATE ${arg_LINK} PUBLIC ${arg_PUBLIC_LINK})
  # Not with clang's sanitizers: clang links their runtimes into programs only, so a sanitized
  # library leaves the runtime's symbols to the program that loads it.
  if(NOT (GPUSORT_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang"))
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  target_link_options(${target} PRIVATE
    -Wl,--as-needed
    "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/exports.map")
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME gpusort_${name}
    EXPORT_NAME ${name}
    LINKER_LANGUAGE CXX
    # 0.x: minor versions may break the ABI.
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    LIBRARY_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/package"
    LINK_DEPENDS "${PROJECT_SOURCE_DIR}/cmake/exports.map")
  # What a consumer gets: the headers and C++20, nothing of our warnings or definitions.
  target_include_directories(${target} INTERFACE
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} INTERFACE cxx_std_20)
  # Libraries built with sanitizers need their runtimes in the program (asan and tsan presets).
  foreach(san IN LISTS GPUSORT_SANITIZE)
    target_link_options(${target} INTERFACE -fsanitize=${san})
  endforeach()
  install(TARGETS ${target} EXPORT gpusort-${name}-targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(EXPORT gpusort-${name}-targets NAMESPACE gpusort:: DESTINATION ${GPUSORT_CMAKE_DIR})
  set(components ${GPUSORT_PACKAGE_COMPONENTS} ${name})
  set(GPUSORT_PACKAGE_COMPONENTS "${components}" PARENT_SCOPE)
endfunction()

set(GPUSORT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/gpusort")

gpusort_package_library(client
  OBJECTS_OF gpusort_client gpusort_proto
  LINK gpusort_core protobuf::libprotobuf Threads::Threads)

set(gpusort_engine_archives gpusort_core)
if(GPUSORT_HAS_CUDA)
  list(PREPEND gpusort_engine_archives gpusort_cuda_runtime gpusort_cuda_core)
endif()
# yaml-cpp by its file, not its target: a shared library's private shared dependencies that are
# targets are exported by name (IMPORTED_LINK_DEPENDENT_LIBRARIES), and the package would then
# name a target its consumers never define.
gpusort_package_library(engine
  OBJECTS_OF gpusort_pipeline gpusort_config
  LINK ${gpusort_engine_archives} $<TARGET_FILE:yaml-cpp> OpenMP::OpenMP_CXX Threads::Threads)

if(TARGET gpusort_mpi)
  gpusort_package_library(mpi
    OBJECTS_OF gpusort_mpi
    LINK gpusort_core Threads::Threads
    PUBLIC_LINK gpusort_engine_package MPI::MPI_CXX)
endif()

install(TARGETS gpusort_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET gpusortd)
  install(TARGETS gpusortd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/gpusort" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")

# gpusortConfig.cmake: loads the targets of the components asked for (all without COMPONENTS).
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/gpusortConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/gpusortConfig.cmake"
  INSTALL_DESTINATION ${GPUSORT_CMAKE_DIR})
# 0.x: minor versions may break the API.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/gpusortConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/gpusortConfig.cmake"
              "${PROJECT_BINARY_DIR}/gpusortConfigVersion.cmake"
        DESTINATION ${GPUSORT_CMAKE_DIR})

# gpusort-client.pc, gpusort-engine.pc (and gpusort-mpi.pc), relative to their own folder, so that
# `cmake --install --prefix` anywhere works. The libraries are shared, so a program links them
# alone; what they link themselves is Requires.private/Libs.private (for pkg-config --static and
# for the Cflags of those packages).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "gpusort: CMAKE_INSTALL_LIBDIR must be relative for the .pc files")
endif()
file(RELATIVE_PATH GPUSORT_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" GPUSORT_PC_TO_PREFIX "${GPUSORT_PC_TO_PREFIX}")
set(GPUSORT_PC_SANITIZE "")
foreach(san IN LISTS GPUSORT_SANITIZE)
  string(APPEND GPUSORT_PC_SANITIZE " -fsanitize=${san}")
endforeach()
set(GPUSORT_PC_OPENMP "${OpenMP_CXX_FLAGS}")
foreach(name IN LISTS GPUSORT_PACKAGE_COMPONENTS)
  configure_file("${PROJECT_SOURCE_DIR}/cmake/gpusort-${name}.pc.in"
                 "${PROJECT_BINARY_DIR}/gpusort-${name}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/gpusort-${name}.pc"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endforeach()
