# Sanitizers for the asan and tsan presets (GPUSORT_SANITIZE), on our own targets only: the flags
# ride on gpusort_warnings, which every target of ours links privately, so third-party code and
# consumers of the installed package never see them (cmake/install.cmake adds the runtimes to
# the shared libraries' link interface, which a sanitized library needs).
set(GPUSORT_SANITIZE "" CACHE STRING "Sanitizers for gpusort's own targets, e.g. address;undefined")
foreach(san IN LISTS GPUSORT_SANITIZE)
  target_compile_options(gpusort_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${san} -fno-omit-frame-pointer>)
  target_link_options(gpusort_warnings INTERFACE -fsanitize=${san})
endforeach()

# Built to find bugs, not for speed: -O1, which ASan's and TSan's manuals suggest for reasonable
# speed, and line tables only (reports keep their file:line, no variables), after
# RelWithDebInfo's -O2 -g (the last -O and -g win). That halves the gcc asan build, the largest
# part of the README's test command (issue 43; dev2core: pipeline/executor.cpp 34.6 -> 16.2 s,
# tests/core/cpu_sort_test.cpp 46.8 -> 22.8 s; clang tsan executor.cpp 11.7 -> 7.8 s).
if(GPUSORT_SANITIZE)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    set(gpusort_line_tables -g1)
  else()
    set(gpusort_line_tables -gline-tables-only)
  endif()
  target_compile_options(gpusort_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-O1 ${gpusort_line_tables}>)
endif()

# GCC's flow warnings are unreliable on sanitizer-instrumented code (its manual says so for
# -Wmaybe-uninitialized): GCC 12 with ASan flagged std::regex's std::function members in
# cli_daemon_test.cpp. The release build keeps the warning as an error.
if(GPUSORT_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(gpusort_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()

# UBSan only prints a finding and carries on by default, so a test with undefined behaviour would
# still pass: make every check fatal, as ASan's and TSan's findings are.
if("undefined" IN_LIST GPUSORT_SANITIZE)
  target_compile_options(gpusort_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  target_link_options(gpusort_warnings INTERFACE -fno-sanitize-recover=undefined)
endif()

# ThreadSanitizer and OpenMP. TSan sees only the synchronization of code it instrumented or
# whose calls it intercepts (pthreads, atomics in our headers). An OpenMP runtime synchronizes
# its barriers, the end of a parallel region and its task queues with its own atomics and futexes,
# so in a runtime that was not built with TSan every write before a barrier and read after it in
# another thread is reported as a race. GCC's libgomp is such a runtime and has no remedy; LLVM's
# libomp has one: Archer (libarcher, shipped in Debian's libomp-14-dev), an OMPT tool that
# libomp calls at every barrier, region, task, lock and reduction, and that tells TSan about each
# of them through its annotation interface (happens-before arcs). With it TSan knows OpenMP's
# synchronization exactly and still reports a real race inside a region, between two regions'
# threads that no barrier orders, or between OpenMP and our std::threads. Hence the tsan preset
# builds with clang (whose -fopenmp means libomp) and links libarcher into every program of ours:
# a loaded Archer provides ompt_start_tool, which libomp calls at start-up, so no environment
# variable is needed and child processes (gpusortd started by a test) get it too. Archer
# switches itself off unless TSan is in the process, and says it is on with
# ARCHER_OPTIONS=verbose=1. tests/sanitizer/ checks that it is on, that OpenMP's synchronization
# is then not reported, that it would be without Archer, and that a race between OpenMP threads
# still is. TSan also needs ignore_noninstrumented_modules=1 beside Archer, for libomp's own
# calls into the pthread interceptors (sanitizers/default_options.cpp says why that is sound).
if("thread" IN_LIST GPUSORT_SANITIZE)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang" OR NOT "omp" IN_LIST OpenMP_CXX_LIB_NAMES)
    message(FATAL_ERROR "gpusort: GPUSORT_SANITIZE=thread needs clang and LLVM's libomp "
      "(found ${CMAKE_CXX_COMPILER_ID} with OpenMP library '${OpenMP_CXX_LIB_NAMES}'): TSan cannot "
      "see libgomp's synchronization. Use the tsan preset (CXX=clang++, libomp-dev installed).")
  endif()
  get_filename_component(gpusort_libomp_dir "${OpenMP_omp_LIBRARY}" DIRECTORY)
  find_library(GPUSORT_ARCHER_LIBRARY archer HINTS "${gpusort_libomp_dir}" NO_DEFAULT_PATH)
  if(NOT GPUSORT_ARCHER_LIBRARY)
    message(FATAL_ERROR "gpusort: no libarcher.so beside ${OpenMP_omp_LIBRARY}: TSan would "
      "report OpenMP's own synchronization as races (Debian: libomp-dev)")
  endif()
  message(STATUS "gpusort: TSan with OpenMP through ${OpenMP_omp_LIBRARY} and Archer "
                 "(${GPUSORT_ARCHER_LIBRARY})")
  # --no-as-needed: nothing of ours calls into Archer, yet it must be loaded.
  target_link_libraries(gpusort_warnings INTERFACE
    "-Wl,--push-state,--no-as-needed" "${GPUSORT_ARCHER_LIBRARY}" "-Wl,--pop-state")
endif()

# The sanitizers' default options, compiled into every program of ours (the file says which and
# why); into programs only, since a library that also defined them would clash with the program.
if(GPUSORT_SANITIZE)
  target_sources(gpusort_warnings INTERFACE
    "$<$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>:${CMAKE_CURRENT_LIST_DIR}/sanitizers/default_options.cpp>")
endif()

# The sanitizer test presets write reports here (log_path in CMakePresets.json); a runtime that
# cannot open its log file stops the program, so the folder exists from configure on.
if(GPUSORT_SANITIZE)
  file(MAKE_DIRECTORY "${PROJECT_BINARY_DIR}/sanitizer-logs")
endif()
