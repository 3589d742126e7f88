# Settings every target of our own gets: C++20, warnings as errors. Kept per target so that
# nothing leaks into third-party code or into projects that consume the installed package.
add_library(gpusort_warnings INTERFACE)
target_compile_options(gpusort_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                            -Wno-missing-field-initializers
                            -Werror>
  # GCC 12 reports -Wrestrict false positives inside std::string at -O3 (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings>)

include(${CMAKE_CURRENT_LIST_DIR}/sanitizers.cmake)

# Logging: spdlog and fmt compiled once, into a static archive of ours
# (core/logging_libraries.cpp says why and what it holds), rather than in every source that logs
# as their header-only forms are; static, so that no shared spdlog or fmt library is shipped to
# the GPU hosts. Every target of ours that includes either header sees the same declarations
# (SPDLOG_COMPILED_LIB, fmt without FMT_HEADER_ONLY) through gpusort_logging or gpusort::core.
# Third-party code: compiled without our warnings (-w), with the sanitizers' flags.
add_library(gpusort_logging_libraries STATIC ${PROJECT_SOURCE_DIR}/core/logging_libraries.cpp)
target_compile_definitions(gpusort_logging_libraries PUBLIC SPDLOG_COMPILED_LIB SPDLOG_FMT_EXTERNAL)
target_include_directories(gpusort_logging_libraries SYSTEM PUBLIC
  $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:fmt::fmt-header-only,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_features(gpusort_logging_libraries PUBLIC cxx_std_20)
set_target_properties(gpusort_logging_libraries PROPERTIES
  CXX_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
target_link_libraries(gpusort_logging_libraries PUBLIC Threads::Threads PRIVATE gpusort_warnings)
target_compile_options(gpusort_logging_libraries PRIVATE -w)
add_library(gpusort_logging INTERFACE)
target_link_libraries(gpusort_logging INTERFACE gpusort_logging_libraries)

function(gpusort_target name)
  target_compile_features(${name} PUBLIC cxx_std_20)
  set_target_properties(${name} PROPERTIES CXX_EXTENSIONS OFF)
  target_link_libraries(${name} PRIVATE gpusort_warnings)
  if(GPUSORT_HAS_CUDA)
    # CMake 3.25 knows no C++20 flag for nvcc (no cuda_std_20): CUDA_STANDARD 20 would fail at
    # generation, so nvcc gets the flag directly there.
    if("cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
      set_target_properties(${name} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
    else()
      target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
    endif()
  endif()
endfunction()
