#include "pipeline/file_window.hpp"

#include "core/checks.hpp"
#include "core/log.hpp"
#include "core/stream_copy.hpp"
#include "core/switches.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <omp.h>

#include <csetjmp>
#include <csignal>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

namespace gpusort {

namespace detail {

namespace {

struct window {
  std::uint64_t bytes{};
  int fd{-1};
  std::uint64_t offset{};
  std::string name;
  std::shared_ptr<mapped_output> mapped;
};

/// Every live window by its first address. Looked up once per staged piece (tens of MiB), so a
/// shared lock and a map are far below the cost of the bytes moved.
class window_registry {
 public:
  void add(std::uintptr_t base, window w)
  {
    const std::unique_lock lock{mutex_};
    windows_.emplace(base, std::move(w));
  }
  void remove(std::uintptr_t base)
  {
    const std::unique_lock lock{mutex_};
    windows_.erase(base);
  }
  /// Attaches (or with nullptr detaches) the mapping host_write uses for the window at `base`.
  void set_mapping(std::uintptr_t base, std::shared_ptr<mapped_output> m)
  {
    const std::unique_lock lock{mutex_};
    if (auto it = windows_.find(base); it != windows_.end()) it->second.mapped = std::move(m);
  }
  std::optional<file_place> find(std::uintptr_t p) const
  {
    const std::shared_lock lock{mutex_};
    auto it = windows_.upper_bound(p);
    if (it == windows_.begin()) return std::nullopt;
    --it;
    const std::uint64_t into = p - it->first;
    // A window of zero bytes still owns its first address (one reserved page).
    if (into > it->second.bytes || (into == it->second.bytes && it->second.bytes > 0))
      return std::nullopt;
    return file_place{.fd = it->second.fd,
                      .offset = it->second.offset + into,
                      .remaining = it->second.bytes - into,
                      .name = it->second.name,
                      .into = into,
                      .mapped = it->second.mapped};
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::uintptr_t, window> windows_;
};

window_registry& registry()
{
  static window_registry r;
  return r;
}

/// Blocks of 1 MiB: a 32 MiB staging piece keeps 16 threads busy, and a syscall per MiB costs
/// well under 1% of its copy.
constexpr std::uint64_t io_block = std::uint64_t{1} << 20;

enum class direction : std::uint8_t { read, write };

/// Moves `bytes` between memory and the file at `place` in blocks, several threads at once.
/// Buffered reads of one file scale with threads (the page cache is read under no lock);
/// buffered writes of one file take the inode's lock, so their threads mostly queue, but cost
/// nothing over one thread and let O_DIRECT-capable or networked files go in parallel.
void move_blocks(direction dir, const file_place& place, char* memory, std::uint64_t bytes)
{
  if (bytes > place.remaining)
    throw logic_error{"file window overrun: " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(place.offset) + " of " + place.name + " with " +
                      std::to_string(place.remaining) + " left"};
  const auto blocks = static_cast<std::int64_t>((bytes + io_block - 1) / io_block);
  std::atomic<int> failure{0};
  std::atomic<std::uint64_t> short_at{UINT64_MAX};
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    if (failure.load(std::memory_order_relaxed) != 0) continue;
    std::uint64_t done = static_cast<std::uint64_t>(b) * io_block;
    const std::uint64_t end = std::min(bytes, done + io_block);
    while (done < end) {
      const auto at = static_cast<off_t>(place.offset + done);
      const std::size_t len = end - done;
      const ssize_t got = dir == direction::read ? sys::pread(place.fd, memory + done, len, at)
                                                 : sys::pwrite(place.fd, memory + done, len, at);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        int expected = 0;
        failure.compare_exchange_strong(expected, errno);
        break;
      }
      if (got == 0) {  // a read at the end of the file: it is shorter than the window
        const std::uint64_t end_at = place.offset + done;
        std::uint64_t seen = short_at.load();
        while (end_at < seen && !short_at.compare_exchange_weak(seen, end_at)) {
        }
        int expected = 0;
        failure.compare_exchange_strong(expected, -1);
        break;
      }
      done += static_cast<std::uint64_t>(got);
    }
  }
  const int err = failure.load();
  if (err == 0) return;
  if (err == -1)
    throw io_error{place.name + " ends at byte " + std::to_string(short_at.load()) +
                   ", before the " + std::to_string(place.offset + bytes) +
                   " bytes it had when the job began: it shrank while it was read"};
  throw io_error{std::string{"cannot "} + (dir == direction::read ? "read " : "write ") +
                 place.name + " at byte " + std::to_string(place.offset) + ": " +
                 std::strerror(err)};
}

/// Where the SIGBUS handler goes back to: set only around a guarded copy, on its own thread.
/// Volatile: the stores around the memcpy would otherwise be dead to the compiler, which knows
/// that memcpy does not read them.
thread_local sigjmp_buf* volatile bus_recovery = nullptr;
struct sigaction previous_bus_action {};

/// A SIGBUS inside a guarded copy (the mapped file shrank under it) returns to that copy; any
/// other goes where it went before this handler was installed.
void on_bus_error(int sig, siginfo_t* info, void* context)
{
  if (bus_recovery != nullptr) siglongjmp(*bus_recovery, 1);
  if ((previous_bus_action.sa_flags & SA_SIGINFO) != 0) {
    previous_bus_action.sa_sigaction(sig, info, context);
  } else if (previous_bus_action.sa_handler != SIG_DFL &&
             previous_bus_action.sa_handler != SIG_IGN) {
    previous_bus_action.sa_handler(sig);
  } else if (previous_bus_action.sa_handler == SIG_DFL) {
    // The default, as if this handler had not been there: blocked until it returns, then fatal
    // (a faulting access would also fault again).
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);
  }
}

void install_bus_handler()
{
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_bus_error;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previous_bus_action);
  });
}

/// memcpy that returns false instead of dying when `dst` is a mapping whose file shrank.
bool copy_guarded(void* dst, const void* src, std::size_t bytes)
{
  sigjmp_buf recovery;
  if (sigsetjmp(recovery, 1) != 0) {
    bus_recovery = nullptr;
    return false;
  }
  bus_recovery = &recovery;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  stream_copy(dst, src, bytes);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  bus_recovery = nullptr;
  return true;
}

}  // namespace

/// GPUSORT_TMPFS_WRITE=behind: writes into a mapped tmpfs output wait only until their own
/// pages exist, instead of all of them (the A/B of file_window.hpp's measurements).
namespace {
bool wait_for_all_pages()
{
  static const bool all = switch_word("GPUSORT_TMPFS_WRITE", {"all", "behind"}) != "behind";
  return all;
}

#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older kernels say EINVAL
#endif
#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1; older kernels say EINVAL
#endif

constexpr std::uint64_t huge_page = std::uint64_t{2} << 20;

std::atomic<std::uint64_t> tmpfs_huge_bytes_total{0};  ///< tmpfs_huge_bytes_made()
std::atomic<std::uint64_t> tmpfs_locked_total{0};      ///< tmpfs_locked_bytes()

/// One thread that runs what output mappings leave behind (unlocking, unmapping) in order, off
/// the jobs' paths. Made on first use, after a GPU engine started CUDA, so that it drains before
/// CUDA's own exit handlers run.
class releaser {
 public:
  releaser() = default;
  releaser(const releaser&) = delete;
  releaser& operator=(const releaser&) = delete;
  releaser(releaser&&) = delete;
  releaser& operator=(releaser&&) = delete;
  ~releaser()
  {
    {
      const std::lock_guard lock{mutex_};
      closing_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void post(std::function<void()> work) noexcept
  {
    try {
      std::unique_lock lock{mutex_};
      if (!thread_.joinable()) thread_ = std::thread{[this] { run(); }};
      queue_.push_back(std::move(work));
      lock.unlock();
      changed_.notify_all();
    } catch (...) {  // no thread or no memory to spare: here, then
      if (work) work();
    }
  }

  void wait_idle()
  {
    std::unique_lock lock{mutex_};
    changed_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void run()
  {
    std::unique_lock lock{mutex_};
    for (;;) {
      changed_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing, with nothing left
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      work();
      lock.lock();
      busy_ = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  bool busy_{};
  bool closing_{};
  std::thread thread_;
};

releaser& background()
{
  static releaser r;
  return r;
}

void release_later(std::function<void()> work) noexcept { background().post(std::move(work)); }

/// How new tmpfs outputs get their pages: from the environment (GPUSORT_TMPFS_HUGE=0: 4 KiB
/// pages by fallocate alone, the A/B of huge_pages_made below; GPUSORT_TMPFS_MAKERS=N threads)
/// until set_tmpfs_page_making replaces it.
tmpfs_page_making environment_page_making()
{
  // Half the cores, up to 8: on the H100 host (16 cores) 8 makers against 4 took the daemon's
  // fitting 8 GiB job from 0.77-0.85 to 0.67-0.70 s, as its copy-out waited less for pages
  // (bench/results/h100-20261128-e448fb7-e2e-8Gi-ab.txt); io_bench --pages made 8 GiB in 0.40 s
  // from 4 threads, 0.29 s from 8, 0.23 s from 16 (h100-20261128-e2d51f0-io-pages-8Gi.txt).
  // On the H200 host (16 cores, 70af7a2, two interleaved rounds,
  // h200-20261128-70af7a2-e2e-8Gi-makers-ab/) 4 makers were slower again (the daemon's fitting
  // job 0.68-0.77 s against 0.58-0.62 s with 8, out of core 0.99-1.01 against 0.86-0.88 s), 4
  // makers with 12 movers too, and 16 were even with 8 (0.57-0.59 and 0.87-0.90 s). Up to 16
  // since a 56 GiB output on the two-H200 host (32 cores): 16 makers sorted it into a new file
  // in 3.73 and 4.01 s against 4.62 s with 8, the copy-out 1.21-1.29 s against 2.35 s
  // (h200x2-20261130-s11/call5, call6: 3.10 s; a fresh host's first such run took 19.8-22.3 s
  // with either, design.md "The data path").
  tmpfs_page_making m{.huge = true,
                      .makers = std::clamp(std::thread::hardware_concurrency() / 2, 1U, 16U)};
  m.huge = switch_flag("GPUSORT_TMPFS_HUGE", m.huge);
  if (const auto n = switch_count("GPUSORT_TMPFS_MAKERS", 1, 256))
    m.makers = static_cast<unsigned>(*n);
  return m;
}
std::mutex page_making_mutex;
tmpfs_page_making& page_making()  // under page_making_mutex
{
  static tmpfs_page_making m = environment_page_making();
  return m;
}
}  // namespace

tmpfs_page_making set_tmpfs_page_making(tmpfs_page_making making)
{
  const std::lock_guard lock{page_making_mutex};
  making.makers = std::max(making.makers, 1U);
  return std::exchange(page_making(), making);
}

tmpfs_page_making current_tmpfs_page_making()
{
  const std::lock_guard lock{page_making_mutex};
  return page_making();
}

/// One output window mapped for the length of a job, and the thread that makes its pages.
struct mapped_output {
  char* map{};
  std::size_t map_bytes{};
  char* data{};  ///< the window's first byte inside `map`
  std::uint64_t bytes{};
  std::string name;
  std::mutex mutex;
  std::condition_variable made_more;
  std::uint64_t ready{};  ///< bytes from the window's start whose pages exist (under mutex)
  int error{};            ///< fallocate's errno, once it failed (under mutex)
  std::vector<bool> done_steps;  ///< make_pages' steps made (under mutex)
  std::size_t made_steps{};      ///< the steps made from the first on (under mutex)
  std::atomic<bool> collapse_works{true};
  double give_up_below_gbps{};  ///< tmpfs_page_making's (set before the makers start)
  std::atomic<std::uint64_t> huge_bytes{0};        ///< bytes made as 2 MiB folios
  std::atomic<std::uint64_t> huge_nanoseconds{0};  ///< the makers' time making them
  std::atomic<bool> stop{false};
  std::thread maker;

  // The steps the makers take, set before they start (plan_steps): [begin, end) in the window.
  // Whole huge pages of the file lie in [head, head + body).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> steps;
  std::uint64_t head{}, body{};
  bool huge{};
  std::vector<bool> huge_steps;  ///< steps made as 2 MiB folios (under mutex)
  bool making_over{};            ///< the makers are done, or gave up (under mutex)

  // Locking for the copy engines (lock_pages): 64 MiB units of [head, head + body).
  std::shared_ptr<page_locker> locker;  ///< set once, before the pinner starts
  std::vector<bool> unit_locked;        ///< under mutex
  std::atomic<std::uint64_t> locked_bytes{0};
  std::thread pinner;

  static constexpr std::uint64_t lock_unit = std::uint64_t{64} << 20;
  /// GPUSORT_OUTPUT_LOCK_PACE=0: units locked back to back (the A/B of lock_pages' pause).
  static bool pace_locks()
  {
    static const bool pace = switch_flag("GPUSORT_OUTPUT_LOCK_PACE", true);
    return pace;
  }

  ~mapped_output()
  {
    stop = true;
    { const std::lock_guard lock{mutex}; }  // a thread between its check and its wait sees stop
    made_more.notify_all();
    if (maker.joinable()) maker.join();
    if (pinner.joinable()) pinner.join();
    if (map == nullptr) return;
    std::vector<std::pair<char*, std::uint64_t>> locked;
    for (std::size_t u = 0; u < unit_locked.size(); ++u)
      if (unit_locked[u]) locked.push_back(unit(u));
    // Unlocking and unmapping 8 GiB take 0.16 and 0.13 s (H100 host): off the job's path, so
    // that a daemon answers as soon as the bytes are in the file. The pages are the file's
    // either way.
    release_later([l = std::move(locker), locked = std::move(locked), p = map, n = map_bytes] {
      for (const auto& [at, len] : locked) l->unlock(at, len);
      ::munmap(p, n);
    });
  }

  /// Unit u of the locked range: its first byte in the mapping and its length.
  [[nodiscard]] std::pair<char*, std::uint64_t> unit(std::size_t u) const
  {
    const std::uint64_t from = head + u * lock_unit;
    return {data + from, std::min(lock_unit, head + body - from)};
  }

  /// The makers' steps: the part before the file's first huge page boundary, whole huge pages
  /// in steps of 16 MiB (a slow step costs little before the makers give up on huge pages, see
  /// huge_pages_made), and the part after the last whole one. Without huge pages, steps of
  /// 256 MiB: fallocate takes the file's lock, so more threads would only queue.
  void plan_steps(std::uint64_t file_offset, bool want_huge)
  {
    huge = want_huge && bytes >= huge_page;
    head = huge ? std::min(bytes, (huge_page - file_offset % huge_page) % huge_page) : 0;
    body = huge ? (bytes - head) / huge_page * huge_page : 0;
    const std::uint64_t step = huge ? std::uint64_t{16} << 20 : std::uint64_t{256} << 20;
    const auto add = [&](std::uint64_t from, std::uint64_t to) {
      for (std::uint64_t at = from; at < to; at += step)
        steps.emplace_back(at, std::min(to, at + step));
    };
    add(0, head);
    add(head, head + body);
    add(head + body, bytes);
    done_steps.assign(steps.size(), false);
    huge_steps.assign(steps.size(), false);
    unit_locked.assign((body + lock_unit - 1) / lock_unit, false);
  }

  /// The pinner's thread: locks each unit of whole huge pages once the makers made all of it as
  /// 2 MiB folios, front to back; a unit with a 4 KiB step is left to host_write, and the first
  /// lock that fails ends the locking.
  void lock_pages()
  {
    // Steps of the body are 16 MiB from head on, so every unit is whole steps.
    std::size_t first = 0;
    while (first < steps.size() && steps[first].first < head) ++first;
    for (std::size_t u = 0; u < unit_locked.size(); ++u) {
      const auto [at, len] = unit(u);
      const std::uint64_t from = static_cast<std::uint64_t>(at - data), to = from + len;
      std::size_t last = first;
      while (last < steps.size() && steps[last].second <= to) ++last;
      bool all_huge = true;
      bool over = false;
      {
        std::unique_lock lock{mutex};
        made_more.wait(lock, [&] {
          if (stop || making_over) return true;
          for (std::size_t i = first; i < last; ++i)
            if (!done_steps[i]) return false;
          return true;
        });
        for (std::size_t i = first; i < last; ++i) all_huge = all_huge && huge_steps[i];
        over = making_over;
      }
      first = last;
      if (stop) return;
      if (!all_huge) {
        if (over) return;  // nothing more will be made huge
        continue;
      }
      const auto start = std::chrono::steady_clock::now();
      if (!locker->lock(at, len)) {
        log(log_level::debug, "{}: its pages could not be locked for the copy engines from "
                              "byte {} on", name, from);
        return;
      }
      const auto took = std::chrono::steady_clock::now() - start;
      {
        const std::lock_guard lock{mutex};
        unit_locked[u] = true;
      }
      locked_bytes.fetch_add(len, std::memory_order_relaxed);
      tmpfs_locked_total.fetch_add(len, std::memory_order_relaxed);
      // A registration holds the driver while it pins: back to back they held the job's own
      // copies back (H100 host, a prepared 8 GiB output locked at the job's start: the first
      // copy-in 0.13 s late, bench/results/h100-20261128-3c73f77-e2e-8Gi.json). As long again
      // between two leaves the copies their turn.
      if (pace_locks()) {
        std::unique_lock lock{mutex};
        made_more.wait_for(lock, took, [&] { return stop.load(); });
      }
    }
  }

  /// The part of [into, into + n) of the window that the copy engines may write from its
  /// start: within one locked unit, or up to the next one.
  locked_run run_at(std::uint64_t into, std::uint64_t n)
  {
    if (locked_bytes.load(std::memory_order_relaxed) == 0 || into + n <= head ||
        into >= head + body)
      return {nullptr, n};
    if (into < head) return {nullptr, head - into};
    const std::lock_guard lock{mutex};
    const auto u = static_cast<std::size_t>((into - head) / lock_unit);
    const std::uint64_t unit_end = std::min(head + body, head + (u + 1) * lock_unit);
    if (unit_locked[u]) return {data + into, std::min(n, unit_end - into)};
    std::size_t next = u + 1;
    while (next < unit_locked.size() && !unit_locked[next]) ++next;
    const std::uint64_t until = next < unit_locked.size() ? head + next * lock_unit : into + n;
    return {nullptr, std::min(n, until - into)};
  }

  /// Waits until the pages of [0, end) of the window exist; an io_error when they cannot.
  void wait_for(std::uint64_t end)
  {
    std::unique_lock lock{mutex};
    made_more.wait(lock, [&] { return ready >= end || error != 0; });
    if (ready < end)
      throw io_error{"cannot write " + name + ": " + std::strerror(error) + " (making its " +
                     std::to_string(bytes) + " bytes in tmpfs)"};
  }

  /// Makes the pages of the window front to back in steps, from making.makers threads, so that
  /// writers wait for their part only (or for all: wait_for_all_pages). A step of whole huge
  /// pages of the file is made as 2 MiB folios where the kernel can (huge_pages_made); the rest,
  /// and every step where it cannot, by fallocate in 4 KiB pages.
  void make_pages(int fd, std::uint64_t file_offset, tmpfs_page_making making)
  {
    // The steps (plan_steps) were planned before this thread started.
    give_up_below_gbps = making.give_up_below_gbps;
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
      for (std::size_t i = next.fetch_add(1); i < steps.size() && !stop; i = next.fetch_add(1)) {
        const auto [from, to] = steps[i];
        const bool whole = huge && from >= head && to <= head + body;
        int err = 0;
        const bool made_huge = whole && huge_pages_made(from, to);
        if (!made_huge) err = fallocate_range(fd, file_offset, from, to);
        const std::lock_guard lock{mutex};
        huge_steps[i] = made_huge;
        if (err == EOPNOTSUPP) {
          ready = bytes;  // nothing made ahead: the copies make the pages, guarded
        } else if (err != 0) {
          if (error == 0) error = err;
        } else {
          done_steps[i] = true;
          while (made_steps < steps.size() && done_steps[made_steps]) ++made_steps;
          if (ready < bytes)
            ready = made_steps == steps.size() ? bytes : steps[made_steps].first;
        }
        made_more.notify_all();
        if (err != 0) {
          stop = true;
          return;
        }
      }
    };
    std::vector<std::thread> helpers;
    try {
      const std::size_t makers = huge ? std::min<std::size_t>(making.makers, steps.size()) : 1;
      for (std::size_t t = 1; t < makers; ++t) helpers.emplace_back(work);
    } catch (const std::system_error&) {  // fewer threads: this one makes what is left
    }
    work();
    for (std::thread& t : helpers) t.join();
    {
      const std::lock_guard lock{mutex};
      making_over = true;
    }
    made_more.notify_all();
    tmpfs_huge_bytes_total.fetch_add(huge_bytes.load(), std::memory_order_relaxed);
    log(log_level::debug, "{}: {} of its {} bytes made as 2 MiB pages by {} thread{}", name,
        huge_bytes.load(), bytes, helpers.size() + 1, helpers.empty() ? "" : "s");
  }

  /// fallocate of [from, to) of the window; 0 or the errno.
  static int fallocate_range(int fd, std::uint64_t file_offset, std::uint64_t from,
                             std::uint64_t to)
  {
    for (;;) {
      if (sys::fallocate(fd, 0, static_cast<off_t>(file_offset + from),
                         static_cast<off_t>(to - from)) == 0)
        return 0;
      if (errno != EINTR) return errno;
    }
  }

  /// Makes [from, to) of the window, whole huge pages of the file, as 2 MiB folios: one 4 KiB
  /// page in each (MADV_POPULATE_WRITE; a page that exists is left as it is), then
  /// MADV_COLLAPSE, which turns each 2 MiB into one folio, the holes zeroed. False where that
  /// failed (the caller then fallocates the step, which keeps what was made).
  ///
  /// Why: a new tmpfs file's 4 KiB pages are made one at a time under the file's locks, 0.8-1.8 s
  /// for 8 GiB on the H100 host whatever the threads (file_window.hpp), while a 2 MiB folio takes
  /// those locks once for 512 pages, and copies into it, its unmapping and its unlink fault and
  /// free 512 times less. The mount's huge= option (never, the default of /dev/shm) governs
  /// faults and writes, not MADV_COLLAPSE. Where the kernel lacks it, or its shmem THP is
  /// "deny", the call says EINVAL and no maker tries again. Where huge pages come slowly (a
  /// compaction stall), the makers give up on them once the whole time their steps took, past
  /// the first 64 MiB, says less than give_up_below_gbps: one slow step alone does not, since
  /// the 4 KiB pages cost their faults later in the copies (on the 2-core VM a single slow step
  /// made the makers give up after 576 MiB of 2 GiB, and the copies into the rest took 7.1 s
  /// against 0.08 s; bench/results/dev2core-20261127-99df79f-io-pages-2Gi.txt; with this rule
  /// 0.28 s in all, -d55ea25- beside it).
  bool huge_pages_made(std::uint64_t from, std::uint64_t to)
  {
    if (!collapse_works.load(std::memory_order_relaxed)) return false;
    const auto start = std::chrono::steady_clock::now();
    // A full tmpfs fails the populate (EFAULT); the caller's fallocate then says ENOSPC.
    for (std::uint64_t at = from; at < to; at += huge_page)
      if (::madvise(data + at, 4096, MADV_POPULATE_WRITE) != 0) return false;
    if (::madvise(data + from, to - from, MADV_COLLAPSE) != 0) {
      if (errno == EINVAL) collapse_works = false;
      return false;
    }
    const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start);
    const std::uint64_t made = huge_bytes.fetch_add(to - from) + (to - from);
    const std::uint64_t spent =
        huge_nanoseconds.fetch_add(static_cast<std::uint64_t>(took.count())) +
        static_cast<std::uint64_t>(took.count());
    constexpr std::uint64_t judged_after = std::uint64_t{64} << 20;
    if (made >= judged_after &&
        static_cast<double>(made) < give_up_below_gbps * static_cast<double>(spent))
      collapse_works = false;  // bytes per nanosecond are GB/s
    return true;
  }

  /// The thread for a window whose pages all exist (an in-place sort's file): maps them into
  /// the page tables ahead of the writes, front to back from 4 threads, so that the copies
  /// take no page fault per 4 KiB. The daemon's in-place sort of an 8 GiB tmpfs file took 0.79
  /// s fitting and 1.01 s out of core with the copies faulting (H100 host,
  /// bench/results/h100-20261126-82d5f7f-e2e-8Gi.json). Writes never wait for it; a failure
  /// here (the file cut meanwhile) is left to the writes' own guard.
  void map_pages()
  {
    constexpr std::uint64_t piece = huge_page;
    std::atomic<std::uint64_t> next{0};
    const auto work = [&] {
      for (std::uint64_t at = next.fetch_add(piece); at < map_bytes && !stop;
           at = next.fetch_add(piece))
        if (::madvise(map + at, std::min(piece, map_bytes - at), MADV_POPULATE_WRITE) != 0)
          return;
    };
    std::vector<std::thread> helpers;
    try {
      for (int i = 0; i < 3; ++i) helpers.emplace_back(work);
    } catch (const std::system_error&) {  // fewer threads: the writes fault what is left
    }
    work();
    for (std::thread& t : helpers) t.join();
  }

  /// Copies into the window at `into`, once its pages exist, with every core.
  void write(std::uint64_t into, const char* src, std::uint64_t n)
  {
    wait_for(wait_for_all_pages() ? bytes : into + n);
    constexpr std::uint64_t piece = io_block;
    const auto pieces = static_cast<std::int64_t>((n + piece - 1) / piece);
    std::atomic<bool> shrank{false};
#pragma omp parallel for schedule(static) if (pieces > 1)
    for (std::int64_t p = 0; p < pieces; ++p) {
      const std::uint64_t off = static_cast<std::uint64_t>(p) * piece;
      if (!shrank.load(std::memory_order_relaxed) &&
          !copy_guarded(data + into + off, src + off, std::min(piece, n - off)))
        shrank = true;
    }
    if (shrank)
      throw io_error{"cannot write " + name + ": the file shrank while it was written"};
  }
};

std::uint64_t tmpfs_huge_bytes_made() noexcept { return tmpfs_huge_bytes_total.load(); }

std::optional<file_place> find_file_window(const void* p)
{
  return registry().find(reinterpret_cast<std::uintptr_t>(p));
}

void host_read(void* dst, const void* src, std::uint64_t bytes)
{
  if (bytes == 0) return;
  if (const std::optional<file_place> place = find_file_window(src))
    move_blocks(direction::read, *place, static_cast<char*>(dst), bytes);
  else
    parallel_stream_copy(dst, src, bytes);
}

void host_write(void* dst, const void* src, std::uint64_t bytes)
{
  if (bytes == 0) return;
  if (const std::optional<file_place> place = find_file_window(dst)) {
    if (place->mapped)
      place->mapped->write(place->into, static_cast<const char*>(src), bytes);
    else
      move_blocks(direction::write, *place, const_cast<char*>(static_cast<const char*>(src)),
                  bytes);
  } else
    parallel_stream_copy(dst, src, bytes);
}

/// One read or write of a piece_mover: its blocks, and how far the calling thread and the
/// mover's threads have come. The counters are under the mover's mutex (a lock per MiB moved
/// is far below the cost of the bytes).
struct piece_mover::job {
  direction dir{};
  char* file{};  ///< the window (or memory) read from or written to
  ring r;
  std::size_t ring_size{};
  std::uint64_t bytes{};
  std::uint64_t pieces{};
  std::uint64_t block{};      ///< bytes a thread moves at a time (block_for)
  std::uint64_t per_piece{};  ///< blocks of a whole piece
  std::uint64_t blocks{};     ///< blocks in all
  buffer_fn gate;             ///< reusable (reading) or filled (writing)
  std::uint64_t ticket{};     ///< what finish names it by (write_behind)
  /// Gathering: the runs read instead of `file`, and where each ends in the range they make.
  const std::vector<source_run>* runs{};
  std::vector<std::uint64_t> run_ends;

  std::uint64_t next_block{};
  std::uint64_t handed{};          ///< pieces handed on (reading) or being filled (writing)
  std::vector<std::uint64_t> done;   ///< per buffer: blocks of its piece moved
  std::vector<std::uint64_t> gated;  ///< per buffer: 1 + the piece its gate was passed for
  std::vector<std::uint64_t> gating;  ///< per buffer: 1 + the piece whose gate a thread calls
  std::exception_ptr failure;
  bool stop{};
  unsigned busy{};  ///< threads inside work_on

  [[nodiscard]] std::size_t buffer_of(std::uint64_t p) const
  {
    return static_cast<std::size_t>((r.first + p) % ring_size);
  }
  [[nodiscard]] std::uint64_t piece_length(std::uint64_t p) const
  {
    return std::min(r.piece_bytes, bytes - p * r.piece_bytes);
  }
  [[nodiscard]] std::uint64_t blocks_in(std::uint64_t p) const
  {
    return p + 1 < pieces ? per_piece : blocks - (pieces - 1) * per_piece;
  }
  /// Writing: every piece handed to fill has its blocks written (the last piece of each
  /// buffer; done[i] counts the blocks of the buffer's latest piece).
  [[nodiscard]] bool written() const
  {
    for (std::uint64_t p = pieces > ring_size ? pieces - ring_size : 0; p < handed; ++p)
      if (done[buffer_of(p)] != blocks_in(p)) return false;
    return true;
  }
  /// Writing: whether the buffer's latest piece (if any was handed) is written out.
  [[nodiscard]] bool wrote_buffer(std::size_t i) const
  {
    const std::uint64_t first = (i + ring_size - r.first % ring_size) % ring_size;
    if (first >= handed) return true;  // none of its pieces came to this buffer
    return done[i] == blocks_in(first + (handed - 1 - first) / ring_size * ring_size);
  }
  void fail(std::exception_ptr e)
  {
    if (!failure) failure = std::move(e);
    stop = true;
  }
  /// Reads `len` bytes from `at` in the range (the file, or the runs one after another).
  void read_at(char* buffer, std::uint64_t at, std::uint64_t len) const
  {
    if (runs == nullptr) {
      host_read(buffer, file + at, len);
      return;
    }
    // The first run that ends past `at`; a block spans as many runs as lie within it.
    auto k = static_cast<std::size_t>(
        std::upper_bound(run_ends.begin(), run_ends.end(), at) - run_ends.begin());
    while (len > 0) {
      const std::uint64_t begins = run_ends[k] - (*runs)[k].bytes;
      const std::uint64_t part = std::min(len, run_ends[k] - at);
      host_read(buffer, (*runs)[k].data + (at - begins), part);
      buffer += part;
      at += part;
      len -= part;
      ++k;
    }
  }
};

namespace {
/// The movers' threads when the caller leaves it open: GPUSORT_MOVERS (for A/B measurements),
/// else as many as OpenMP would use.
unsigned default_movers()
{
  if (const auto n = switch_count("GPUSORT_MOVERS", 1, 1024)) return static_cast<unsigned>(*n);
  return static_cast<unsigned>(std::max(1, omp_get_max_threads()));
}
}  // namespace

piece_mover::piece_mover(unsigned threads) : threads_{threads != 0 ? threads : default_movers()} {}

std::uint64_t piece_mover::block_for(const job& j) const
{
  // A read of a few MiB in 1 MiB blocks kept a few of the threads busy and left the rest idle:
  // a GPU's chunk of 2 MiB at the smallest budget waited for two threads' reads in turn. In
  // blocks of a thread's share, 512 KiB at least, round 1 of 8 GiB from a file in 4096 chunks
  // took 1.13-1.24 s against 1.26-1.44 s, and in 1594 chunks of 5 MiB no longer (blocks of
  // 64 KiB: 1.38-1.56 s and slower). Writes keep 1 MiB blocks: behind the caller
  // (write_behind) several chunks' pieces are in flight anyway, and smaller blocks only slowed
  // them, round 2 in 4096 chunks 0.76-0.80 s at 1 MiB against 0.81-0.85 at 512 KiB and
  // 0.97-1.01 at 64 KiB (h200-20261201-s20/call3, issue 44). GPUSORT_MOVER_MIN_BLOCK (KiB) is
  // the reads' A/B; 1024: 1 MiB blocks.
  static const std::uint64_t least =
      switch_count("GPUSORT_MOVER_MIN_BLOCK", 4, 1024).value_or(512) << 10;
  if (j.dir == direction::write || j.bytes >= io_block * threads_) return io_block;
  constexpr std::uint64_t page = 4096;
  const std::uint64_t share = (j.bytes + threads_ - 1) / threads_;
  return std::clamp((share + page - 1) / page * page, least, io_block);
}

piece_mover::~piece_mover()
{
  {
    const std::lock_guard lock{mutex_};
    closing_ = true;
    for (const std::shared_ptr<job>& j : jobs_) j->stop = true;  // writes no one waits for
  }
  changed_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void piece_mover::read(const void* src, std::uint64_t bytes, const ring& r,
                       const piece_fn& hand_on, const buffer_fn& reusable)
{
  const auto j = std::make_shared<job>();
  j->dir = direction::read;
  j->file = const_cast<char*>(static_cast<const char*>(src));  // only read
  j->r = r;
  j->bytes = bytes;
  j->gate = reusable;
  run(j, hand_on, false);
}

void piece_mover::gather(const std::vector<source_run>& runs, const ring& r,
                         const piece_fn& hand_on, const buffer_fn& reusable)
{
  const auto j = std::make_shared<job>();
  j->dir = direction::read;
  j->runs = &runs;
  j->run_ends.reserve(runs.size());
  for (const source_run& run : runs) j->run_ends.push_back(j->bytes += run.bytes);
  j->r = r;
  j->gate = reusable;
  run(j, hand_on, false);
}

void piece_mover::write(void* dst, std::uint64_t bytes, const ring& r, const piece_fn& fill,
                        const buffer_fn& filled)
{
  finish(write_behind(dst, bytes, r, fill, filled));
}

std::uint64_t piece_mover::write_behind(void* dst, std::uint64_t bytes, const ring& r,
                                        const piece_fn& fill, const buffer_fn& filled)
{
  const auto j = std::make_shared<job>();
  j->dir = direction::write;
  j->file = static_cast<char*>(dst);
  j->r = r;
  j->bytes = bytes;
  j->gate = filled;
  return run(j, fill, true);
}

void piece_mover::finish(std::uint64_t ticket)
{
  std::unique_lock lock{mutex_};
  const auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const std::shared_ptr<job>& j) {
    return j->ticket == ticket;
  });
  if (it == jobs_.end()) return;
  const std::shared_ptr<job> j = *it;
  changed_.wait(lock, [&] { return j->stop || j->written(); });
  end(j, lock);
}

std::uint64_t piece_mover::run(const std::shared_ptr<job>& jp, const piece_fn& step,
                               bool behind)
{
  job& j = *jp;
  if (j.bytes == 0) return 0;
  GPUSORT_EXPECTS(j.r.buffers != nullptr && !j.r.buffers->empty() && j.r.piece_bytes > 0,
                  "piece_mover needs a ring of buffers");
  j.ring_size = j.r.buffers->size();
  j.pieces = (j.bytes + j.r.piece_bytes - 1) / j.r.piece_bytes;
  j.block = block_for(j);
  j.per_piece = (j.r.piece_bytes + j.block - 1) / j.block;
  j.blocks = (j.pieces - 1) * j.per_piece +
             (j.piece_length(j.pieces - 1) + j.block - 1) / j.block;
  j.done.assign(j.ring_size, 0);
  j.gated.assign(j.ring_size, 0);
  j.gating.assign(j.ring_size, 0);
  const bool reading = j.dir == direction::read;
  std::unique_lock lock{mutex_};
  for (const std::shared_ptr<job>& e : jobs_)
    GPUSORT_EXPECTS(e->dir == direction::write && e->handed == e->pieces,
                    "one piece_mover hands one range on at a time");
  // A read's threads fill buffers of their own accord: the writes behind must be out first.
  if (reading) settle(lock);
  while (workers_.size() < threads_) workers_.emplace_back([this] { work(); });
  j.ticket = ++tickets_;
  jobs_.push_back(jp);
  changed_.notify_all();
  for (std::uint64_t p = 0; p < j.pieces; ++p) {
    const std::size_t i = j.buffer_of(p);
    // Reading: piece p is in its buffer. Writing: the piece before it there is out, this
    // call's or (its first round of the ring) a write behind's.
    if (reading)
      changed_.wait(lock, [&] { return j.stop || j.done[i] == j.blocks_in(p); });
    else if (p >= j.ring_size)
      changed_.wait(lock, [&] { return j.stop || j.done[i] == j.blocks_in(p - j.ring_size); });
    else
      changed_.wait(lock, [&] { return j.stop || buffer_free(j, i); });
    if (j.stop) break;
    j.done[i] = 0;  // counts the blocks of the buffer's next piece (reading: piece p + ring)
    lock.unlock();
    try {
      step(i, p * j.r.piece_bytes, j.piece_length(p));
    } catch (...) {
      lock.lock();
      j.fail(std::current_exception());
      break;
    }
    lock.lock();
    j.handed = p + 1;
    changed_.notify_all();
  }
  // Every piece handed on: its writes' errors are for finish, even one that has failed by now.
  if (behind && j.handed == j.pieces) return j.ticket;
  end(jp, lock);
  return 0;
}

void piece_mover::end(const std::shared_ptr<job>& jp, std::unique_lock<std::mutex>& lock)
{
  job& j = *jp;
  // No thread may touch the buffers (or `j`) once this returns.
  j.stop = true;
  changed_.notify_all();
  changed_.wait(lock, [&] { return j.busy == 0; });
  jobs_.erase(std::find(jobs_.begin(), jobs_.end(), jp));
  changed_.notify_all();  // a read may wait for the writes behind to go
  if (j.failure) std::rethrow_exception(j.failure);
}

void piece_mover::settle()
{
  std::unique_lock lock{mutex_};
  settle(lock);
}

void piece_mover::abandon()
{
  std::unique_lock lock{mutex_};
  for (const std::shared_ptr<job>& j : jobs_) j->stop = true;
  changed_.notify_all();
  settle(lock);
  jobs_.clear();
}

void piece_mover::settle(std::unique_lock<std::mutex>& lock)
{
  // They finish, errors and all, where their caller asks.
  changed_.wait(lock, [&] {
    return std::all_of(jobs_.begin(), jobs_.end(), [](const std::shared_ptr<job>& e) {
      return (e->stop || e->written()) && e->busy == 0;
    });
  });
}

std::shared_ptr<piece_mover::job> piece_mover::next_job() const
{
  // The earliest with blocks left: a later job's pieces wait for the earlier writes' buffers.
  for (const std::shared_ptr<job>& j : jobs_)
    if (!j->stop && j->next_block < j->blocks) return j;
  return nullptr;
}

bool piece_mover::buffer_free(const job& j, std::size_t buffer) const
{
  for (const std::shared_ptr<job>& e : jobs_) {
    if (e.get() == &j) return true;
    // A stopped job's threads may still be writing out of its buffers.
    if (e->stop ? e->busy > 0 : !e->wrote_buffer(buffer)) return false;
  }
  return true;
}

void piece_mover::work()
{
  std::unique_lock lock{mutex_};
  for (;;) {
    std::shared_ptr<job> j;
    changed_.wait(lock, [&] {
      if (closing_) return true;
      j = next_job();
      return j != nullptr;
    });
    if (closing_) return;
    ++j->busy;
    work_on(*j, lock);
    --j->busy;
    changed_.notify_all();
  }
}

void piece_mover::work_on(job& j, std::unique_lock<std::mutex>& lock)
{
  const bool reading = j.dir == direction::read;
  while (!j.stop && j.next_block < j.blocks) {
    const std::uint64_t b = j.next_block++;
    const std::uint64_t p = b / j.per_piece;
    const std::size_t i = j.buffer_of(p);
    // Reading: the buffer is free once the piece a ring before was handed on. Writing: the
    // piece's bytes are coming once the calling thread started filling it.
    changed_.wait(lock, [&] { return j.stop || (reading ? j.handed + j.ring_size > p
                                                        : j.handed > p); });
    // One thread waits at a piece's gate (an event's synchronize, which spins); the others
    // taking blocks of the piece meanwhile sleep here instead of spinning beside it on the cores
    // the copies need.
    changed_.wait(lock, [&] { return j.stop || j.gated[i] == p + 1 || j.gating[i] != p + 1; });
    if (j.stop) return;
    const bool gate = j.gated[i] != p + 1;
    if (gate) j.gating[i] = p + 1;
    lock.unlock();
    try {
      if (gate) {
        j.gate(i);
        {
          const std::lock_guard passed{mutex_};
          j.gated[i] = p + 1;
        }
        changed_.notify_all();
      }
      const std::uint64_t within = (b - p * j.per_piece) * j.block;
      const std::uint64_t at = p * j.r.piece_bytes + within;
      const std::uint64_t len = std::min(j.block, j.piece_length(p) - within);
      char* const buffer = (*j.r.buffers)[i] + within;
      if (reading)
        j.read_at(buffer, at, len);
      else
        host_write(j.file + at, buffer, len);
    } catch (...) {
      lock.lock();
      j.fail(std::current_exception());
      changed_.notify_all();
      return;
    }
    lock.lock();
    if (++j.done[i] == j.blocks_in(p)) changed_.notify_all();
  }
}

namespace {
/// A shared mapping of `bytes` of fd from `offset` (page-aligned) at an address that is
/// offset's equal modulo 2 MiB, so that each huge page of the file can be one huge page of the
/// mapping (MADV_COLLAPSE needs that); nullptr when it cannot be mapped.
char* map_huge_aligned(int fd, std::uint64_t offset, std::uint64_t bytes)
{
  // Reserve room for any alignment, then map the file over the right part of it and give the
  // rest back.
  const std::uint64_t room = bytes + huge_page;
  void* r = ::mmap(nullptr, room, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return nullptr;
  char* const reserved = static_cast<char*>(r);
  const auto at_reserved = reinterpret_cast<std::uintptr_t>(reserved);
  const std::uint64_t shift =
      (offset % huge_page + huge_page - at_reserved % huge_page) % huge_page;
  char* const want = reserved + shift;
  void* p = sys::mmap(want, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                      static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    ::munmap(reserved, room);
    return nullptr;
  }
  if (shift > 0) ::munmap(reserved, shift);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t used = shift + (bytes + page - 1) / page * page;
  if (used < room) ::munmap(reserved + used, room - used);
  return want;
}
}  // namespace

/// Maps the window at `address` (its first `bytes`) and starts making its pages, where it is
/// a tmpfs file open for reading and writing not mapped already; false where it is left to
/// pwrite (not a window, not tmpfs, read-only, mapped already, no address space).
bool start_output_mapping(const void* address, std::uint64_t bytes)
{
  if (address == nullptr || bytes == 0) return false;
  // A window mapped already (the same output given twice, or prepared) keeps its one mapping.
  const std::optional<file_place> place = find_file_window(address);
  if (!place || place->into != 0 || place->mapped || bytes > place->remaining) return false;
  struct statfs fs {};
  if (::fstatfs(place->fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return false;
  // A shared mapping writes the file itself; it needs a descriptor open for reading and
  // writing, and starts at a page boundary.
  const int flags = ::fcntl(place->fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != O_RDWR) return false;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t lead = place->offset % page;
  auto m = std::make_shared<mapped_output>();
  m->map_bytes = lead + bytes;
  char* const p = map_huge_aligned(place->fd, place->offset - lead, m->map_bytes);
  if (p == nullptr) return false;  // pwrite still works
  m->map = p;
  m->data = m->map + lead;
  m->bytes = bytes;
  m->name = place->name;
  install_bus_handler();
  // A file without holes (an in-place sort's, an output written before) has every page: its
  // writes need not wait, and a fallocate walk of 8 GiB of pages would only delay them.
  struct stat st {};
  const auto page_round = [&](std::uint64_t b) { return (b + page - 1) / page * page; };
  if (::fstat(place->fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) > 0 &&
      static_cast<std::uint64_t>(st.st_blocks) * 512 >=
          page_round(static_cast<std::uint64_t>(st.st_size)) &&
      place->offset + bytes <= static_cast<std::uint64_t>(st.st_size)) {
    m->ready = bytes;
    m->maker = std::thread{[raw = m.get()] { raw->map_pages(); }};
  } else {
    const tmpfs_page_making making = current_tmpfs_page_making();
    m->plan_steps(place->offset, making.huge);
    m->maker = std::thread{[raw = m.get(), fd = place->fd, offset = place->offset, making] {
      raw->make_pages(fd, offset, making);
    }};
  }
  registry().set_mapping(reinterpret_cast<std::uintptr_t>(address), std::move(m));
  return true;
}

namespace {
/// Starts locking the pages of the output mapped at `address` with `locker`, unless they are
/// being locked already or it has no whole huge page; false where nothing will be locked.
bool start_locking(const void* address, const std::shared_ptr<page_locker>& locker)
{
  const std::optional<file_place> place = find_file_window(address);
  if (!place || place->into != 0 || !place->mapped) return false;
  mapped_output& m = *place->mapped;
  const std::lock_guard lock{m.mutex};
  if (m.locker || m.unit_locked.empty()) return false;
  m.locker = locker;
  try {
    m.pinner = std::thread{[raw = &m] { raw->lock_pages(); }};
  } catch (const std::system_error&) {  // no thread to spare: the copies stage, as before
    m.locker = nullptr;
    return false;
  }
  return true;
}
}  // namespace

output_mappings::output_mappings(
    std::initializer_list<std::pair<const void*, std::uint64_t>> outputs,
    std::shared_ptr<page_locker> locker)
{
  for (const auto& [address, bytes] : outputs) {
    if (start_output_mapping(address, bytes)) bases_.push_back(address);
    if (locker && address != nullptr && bytes > 0 && start_locking(address, locker))
      locked_.push_back(address);
  }
}

void output_mappings::check_sizes() const
{
  for (const void* base : locked_) {
    const std::optional<file_place> place = find_file_window(base);
    if (!place || !place->mapped || place->mapped->locked_bytes.load() == 0) continue;
    struct stat st {};
    if (sys::fstat(place->fd, &st) != 0) {
      const int err = errno;
      throw io_error{"cannot check " + place->name + ": " + std::strerror(err)};
    }
    const std::uint64_t end = place->offset + place->mapped->bytes;
    if (static_cast<std::uint64_t>(st.st_size) < end)
      throw io_error{"cannot write " + place->name + ": the file shrank to " +
                     std::to_string(st.st_size) + " bytes while it was written (its window "
                     "ends at byte " + std::to_string(end) + ")"};
  }
}

locked_run locked_output_run(const void* dst, std::uint64_t bytes)
{
  const std::optional<file_place> place = find_file_window(dst);
  if (!place || !place->mapped) return {nullptr, bytes};
  return place->mapped->run_at(place->into, std::min(bytes, place->remaining));
}

std::uint64_t tmpfs_locked_bytes() noexcept { return tmpfs_locked_total.load(); }

void wait_for_output_releases() { background().wait_idle(); }

output_mappings::~output_mappings()
{
  // The registry's reference goes; a copy still running keeps the mapping until it returns.
  for (const void* base : bases_) registry().set_mapping(reinterpret_cast<std::uintptr_t>(base),
                                                         nullptr);
}

}  // namespace detail

file_array::file_array(int fd, std::uint64_t offset, std::uint64_t bytes, std::string name)
    : bytes_{bytes}
{
  if (fd < 0) throw invalid_argument{"file_array: " + name + ": no open descriptor"};
  if (offset > static_cast<std::uint64_t>(INT64_MAX) ||
      bytes > static_cast<std::uint64_t>(INT64_MAX) - offset)
    throw invalid_argument{"file_array: " + name + ": offset " + std::to_string(offset) + " + " +
                           std::to_string(bytes) + " bytes is past any file's end"};
  // Address space only: PROT_NONE and MAP_NORESERVE commit no memory, whatever the size.
  const std::size_t reserve = std::max<std::uint64_t>(bytes, 1);
  void* p = detail::sys::mmap(nullptr, reserve, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw out_of_memory{"file_array: cannot reserve " + std::to_string(bytes) +
                        " bytes of address space for " + name + ": " + std::strerror(err)};
  }
  base_ = p;
  detail::registry().add(reinterpret_cast<std::uintptr_t>(p),
                         detail::window{.bytes = bytes, .fd = fd, .offset = offset,
                                        .name = std::move(name)});
}

bool file_array::prepare_output()
{
  return detail::start_output_mapping(base_, bytes_);
}

void file_array::release() noexcept
{
  if (base_ == nullptr) return;
  detail::registry().remove(reinterpret_cast<std::uintptr_t>(base_));
  ::munmap(base_, std::max<std::uint64_t>(bytes_, 1));
  base_ = nullptr;
  bytes_ = 0;
}

file_array::~file_array() { release(); }

file_array::file_array(file_array&& other) noexcept
    : base_{std::exchange(other.base_, nullptr)}, bytes_{std::exchange(other.bytes_, 0)}
{
}

file_array& file_array::operator=(file_array&& other) noexcept
{
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace gpusort
