// A benchmark's watchdog for runs that do not finish (issue 41: one MPI rank on two GPUs never
// returned): GPUSORT_BENCH_STACKS=S makes a thread that, S seconds after start, writes every
// thread's call stack to stderr (glibc's backtrace, one thread at a time through a signal), so
// that a run killed by its timeout still says where each thread waited. Addresses in the
// program itself resolve with `addr2line -e <unstripped binary> -f -C <offset>`; a stripped
// binary prints them as program+offset. A diagnosis aid for benchmarks, not for the library:
// backtrace in a signal handler is not async-signal-safe, and the handler runs only when asked.
#pragma once

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace gpusort::bench {

namespace stack_dump_detail {

inline std::atomic<bool> done{false};

inline void on_signal(int)
{
  void* frames[64];
  const int n = backtrace(frames, 64);
  char line[64];
  const int len = std::snprintf(line, sizeof line, "== thread %ld ==\n",
                                static_cast<long>(syscall(SYS_gettid)));
  if (len > 0) (void)!write(STDERR_FILENO, line, static_cast<std::size_t>(len));
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  done.store(true);
}

inline void dump_all()
{
  const pid_t pid = getpid();
  const auto self = static_cast<pid_t>(syscall(SYS_gettid));
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return;
  std::fprintf(stderr, "== stacks of process %d ==\n", static_cast<int>(pid));
  while (const dirent* e = readdir(dir)) {
    const int tid = std::atoi(e->d_name);
    if (tid <= 0 || tid == self) continue;
    done.store(false);
    if (syscall(SYS_tgkill, pid, tid, SIGURG) != 0) continue;
    // A thread blocked with the signal masked never answers: wait a while, then go on.
    for (int i = 0; i < 200 && !done.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  closedir(dir);
}

}  // namespace stack_dump_detail

/// Starts the watchdog when GPUSORT_BENCH_STACKS names a number of seconds; else nothing.
/// SIGURG carries the request: ignored by default and used by nothing in these programs.
inline void stack_dump_after_env()
{
  const char* v = std::getenv("GPUSORT_BENCH_STACKS");
  if (v == nullptr || std::atoi(v) <= 0) return;
  const int seconds = std::atoi(v);
  struct sigaction sa {};
  sa.sa_handler = stack_dump_detail::on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGURG, &sa, nullptr);
  std::thread{[seconds] {
    std::this_thread::sleep_for(std::chrono::seconds{seconds});
    stack_dump_detail::dump_all();
  }}.detach();
}

}  // namespace gpusort::bench
