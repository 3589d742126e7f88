# Settings every target of our own gets: C++20, warnings as errors. Kept per target so that
# nothing leaks into third-party code or into projects that consume the installed package.
add_library(gpusort_warnings INTERFACE)
target_compile_options(gpusort_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                            -Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings>)

# Header-only logging: no shared spdlog/fmt libraries to ship to the GPU hosts.
add_library(gpusort_logging INTERFACE)
target_link_libraries(gpusort_logging INTERFACE spdlog::spdlog_header_only fmt::fmt-header-only)

function(gpusort_target name)
  target_compile_features(${name} PUBLIC cxx_std_20)
  set_target_properties(${name} PROPERTIES CXX_EXTENSIONS OFF)
  target_link_libraries(${name} PRIVATE gpusort_warnings)
  if(GPUSORT_HAS_CUDA)
    set_target_properties(${name} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  endif()
endfunction()
