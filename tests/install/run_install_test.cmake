# cmake -P script behind the install.package test; see CMakeLists.txt.
cmake_minimum_required(VERSION 3.25)
foreach(v IN ITEMS BUILD_DIR SOURCE_DIR CONSUMER_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake needs -D${v}=...")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

# 1. Install.
run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
file(GLOB_RECURSE config_files "${prefix}/*/gpusortConfig.cmake")
file(GLOB_RECURSE pc_files "${prefix}/*/gpusort.pc")
foreach(f IN ITEMS bin/gpusort bin/gpusortd include/gpusort/gpusort.hpp include/gpusort/config.hpp
                  include/gpusort/client.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
list(LENGTH config_files n_config)
list(LENGTH pc_files n_pc)
if(NOT n_config EQUAL 1 OR NOT n_pc EQUAL 1)
  message(FATAL_ERROR "expected one gpusortConfig.cmake and one gpusort.pc: ${config_files} "
                      "${pc_files}")
endif()
# The package must stand alone: nothing in it may point back into the source or build tree
# (a consumer would then build here and fail anywhere else).
get_filename_component(cmake_dir "${config_files}" DIRECTORY)
file(GLOB package_files "${cmake_dir}/*.cmake" ${pc_files})
foreach(f IN LISTS package_files)
  file(READ "${f}" text)
  foreach(tree IN ITEMS "${SOURCE_DIR}" "${BUILD_DIR}")
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} refers to ${tree}")
    endif()
  endforeach()
endforeach()
run("${prefix}/bin/gpusort" --version)
message(STATUS "installed: ${run_output}")

# 2. find_package(gpusort CONFIG REQUIRED) from a separate project.
set(build "${WORK_DIR}/consumer-cmake")
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${build}" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DCMAKE_PREFIX_PATH=${prefix}"
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run(${CMAKE_COMMAND} --build "${build}")
run("${build}/gpusort_consumer")
message(STATUS "CMake consumer: ${run_output}")
run("${build}/gpusort_client_consumer" "${prefix}/bin/gpusortd" "${WORK_DIR}")
message(STATUS "CMake client consumer: ${run_output}")

# 3. pkg-config flags alone.
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config not found")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
run(${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${pc_dir}" "${PKG_CONFIG}" --cflags --libs gpusort)
string(STRIP "${run_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
message(STATUS "pkg-config flags: ${flags}")
set(exe "${WORK_DIR}/gpusort_consumer_pc")
run("${CXX_COMPILER}" -std=c++20 "${CONSUMER_DIR}/main.cpp" -o "${exe}" ${flags})
run("${exe}")
message(STATUS "pkg-config consumer: ${run_output}")
run("${CXX_COMPILER}" -std=c++20 "${CONSUMER_DIR}/client_main.cpp" -o "${exe}_client" ${flags})
run("${exe}_client" "${prefix}/bin/gpusortd" "${WORK_DIR}")
message(STATUS "pkg-config client consumer: ${run_output}")
