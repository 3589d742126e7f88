// Compiled into every program of the sanitizer builds (cmake/sanitizers.cmake). The sanitizer
// runtimes read these defaults at start-up, before ASAN_OPTIONS and TSAN_OPTIONS (which add to
// them), so a program run by hand or started by a test gets them as well as ctest's. The ctest
// presets add only where reports go (log_path, CMakePresets.json).
//
// handle_sigbus=0 (both): the engine owns SIGBUS. It writes outputs in tmpfs through a mapping and
// turns the SIGBUS of a file that shrank into an io_error, passing any other SIGBUS on to the
// handler that was there before it (pipeline/file_window.cpp). A sanitizer that installed its own
// SIGBUS handler first would become that handler, and a stray SIGBUS would end as the
// sanitizer's exit code instead of the signal (FileArray.AMappedOutputThatShrinksIsAnIoError...
// checks that it stays a signal). SIGSEGV and the rest stay with the sanitizers.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUSORT_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define GPUSORT_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GPUSORT_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GPUSORT_TSAN 1
#endif

#if defined(GPUSORT_ASAN)
// detect_stack_use_after_return, check_initialization_order and strict_init_order: checks ASan
// can make but does not by default (a pointer to a returned frame, a static initializer that
// reads another translation unit's static before it was made). Leaks are checked by default.
extern "C" const char* __asan_default_options()
{
  return "handle_sigbus=0:detect_stack_use_after_return=1:check_initialization_order=1:"
         "strict_init_order=1";
}
#endif

#if defined(GPUSORT_TSAN)
// ignore_noninstrumented_modules=1: TSan then ignores the memory accesses of interceptors (memcpy,
// pthread_mutex_init, ...) called directly from a library that was not built with TSan, while
// still honouring their synchronization. libomp is such a library: it hands its internal mutexes
// and thread descriptors from thread to thread through its own atomics, which TSan cannot see,
// so without this option TSan reports races between libomp's own pthread calls (for example
// pthread_mutex_init in a worker and pthread_mutex_lock in the master, both called from
// libomp.so, on libomp's heap). Archer asks for the option at start-up for that reason. It does
// not hide our code: every access compiled from our sources is still checked, including the
// memcpy and the like that our code calls. What it leaves out is only what TSan cannot judge
// anyway, the insides of uninstrumented libraries. Narrower tools fail here: a
// `called_from_lib:libomp.so.5` suppression also drops libomp's mutex operations and then reports
// a double lock, and `race:libomp.so.5` would match every race inside an OpenMP region, whose
// stacks all pass through libomp. (The tsan ctest preset repeats the option in TSAN_OPTIONS only
// because Archer looks for it there and prints a warning into every test's output otherwise.)
//
// die_after_fork=0: a test (Daemon.ClientKilledMidJobFreesItsMemory) forks a client that then
// submits a job, whose progress thread TSan would refuse to start in the child of a
// multi-threaded process. Our programs never fork without exec; TSan keeps checking the child.
extern "C" const char* __tsan_default_options()
{
  return "ignore_noninstrumented_modules=1:handle_sigbus=0:die_after_fork=0";
}
#endif
