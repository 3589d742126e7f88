// Host memory benchmark (issue 18): what it costs a fresh process to get host memory ready. The
// CLI is a fresh process that must create its round-1 buffer and its output pages before any
// data moves, so we need the costs of page creation (first touch, small or huge pages, one
// thread or many, memset or MADV_POPULATE_WRITE), of giving pages back (munmap, unlink), of
// pinning (cudaHostAlloc, cudaHostRegister of touched and untouched memory), of a memcpy on one
// thread and on all (the host's bandwidth, bench/report.py's physics) and of creating the
// pages of a tmpfs file (fallocate, populate, faulting memcpy, pwrite), each against the
// rewrite of pages that already exist, to decide how the CLI should allocate its big buffers;
// and the chase rows: how copies into a new tmpfs output best follow the thread that makes its
// pages (fill behind it, after it, or behind a second thread that maps them; `--only chase`);
// and the register rows: a file's pages mapped and registered with the driver so that the copy
// engines move them with no host copy, for an input and for a new output (`--only register`).
// Rows are printed as they complete (a time limit may kill the run); a failed call gives its row
// a FAILED note and the run goes on. Without a GPU, the CUDA rows are skipped.
//
//   mem_bench [--bytes 4Gi] [--threads T] [--dir /dev/shm] [--json FILE] [--machine NAME]
//             [--commit C] [--only chase|register]
//
// Exit status: 0 when every row ran, 1 when some row failed or the CUDA or file rows were
// skipped, 64 on a bad argument. "_T" in a row name means --threads threads.
#include "bench/results_format.hpp"

#include <cuda_runtime_api.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// Linux >= 5.14; older C libraries lack the name (the kernel then answers EINVAL: a FAILED row).
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using gpusort::bench::json_string;

using u64 = std::uint64_t;
using clock_type = std::chrono::steady_clock;
constexpr u64 mib = u64{1} << 20;
constexpr u64 huge_page = 2 * mib;
constexpr u64 io_block = mib;  // pread/pwrite block, interleaved by thread

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
std::string errno_text(const char* call, int err)
{
  return std::string{call} + ": " + std::strerror(err);
}
std::string cuda_text(const char* call, cudaError_t e)
{
  return std::string{call} + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}
// Cleanup calls are checked too, but their failure has no row of its own: one line says so.
void check_cleanup(bool ok, const std::string& what)
{
  if (!ok) std::printf("# cleanup failed: %s\n", what.c_str());
}

// The file a signal (a time limit's SIGTERM, ^C) must not leave behind; a handler can reach only
// globals. At most one test file exists at a time.
char file_path[4096];
volatile std::sig_atomic_t file_path_set = 0;
void remove_file_and_die(int sig)
{
  if (file_path_set != 0) ::unlink(file_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct options {
  u64 bytes{4096 * mib};
  unsigned threads{std::max(1u, std::thread::hardware_concurrency())};
  std::string dir{"/dev/shm"}, json, machine, commit;
  bool chase_only{false};     ///< --only chase: the cuda_init row and the chase rows alone
  bool register_only{false};  ///< --only register: the cuda_init row and the register rows
};

const char* const usage_text =
    "usage: mem_bench [--bytes N] [--threads T] [--dir DIR] [--json FILE] [--machine NAME]\n"
    "                 [--commit C] [--only chase|register]\n"
    "  N: bytes, default 4Gi; Ki/Mi/Gi/Ti are powers of 1024, K/M/G/T of 1000; rounded down\n"
    "     to whole 2 MiB huge pages. T: default the hardware threads. DIR: for the file rows,\n"
    "     default /dev/shm. Exit 0 when every row ran, 1 when some failed or were skipped.\n";
[[noreturn]] void usage(const std::string& why)
{
  std::fprintf(stderr, "mem_bench: %s\n%s", why.c_str(), usage_text);
  std::exit(64);
}

/// digits [K|M|G|T [i]] [B]; 0 when malformed or too big.
u64 parse_bytes(std::string_view s)
{
  u64 v = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + static_cast<u64>(s[i] - '0');
  }
  if (i == 0) return 0;
  s.remove_prefix(i);
  const std::string_view units = "KMGT";
  const std::size_t power =
      s.empty() ? std::string_view::npos : units.find(s[0] == 'k' ? 'K' : s[0]);
  if (power != std::string_view::npos) {
    s.remove_prefix(1);
    const u64 base = !s.empty() && s[0] == 'i' ? 1024 : 1000;
    if (base == 1024) s.remove_prefix(1);
    for (std::size_t p = 0; p <= power; ++p) {
      if (v > UINT64_MAX / base) return 0;
      v *= base;
    }
  }
  return s.empty() || s == "B" ? v : 0;
}

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) usage("unknown argument or missing value: " + std::string{a});
    const std::string v = argv[++i];
    if (a == "--bytes") {
      o.bytes = parse_bytes(v) / huge_page * huge_page;
      if (o.bytes == 0) usage("bad --bytes " + v + " (at least 2Mi)");
    } else if (a == "--threads") {
      const u64 t = parse_bytes(v);
      if (t == 0 || t > 4096) usage("bad --threads " + v + " (1 to 4096)");
      o.threads = static_cast<unsigned>(t);
    } else if (a == "--dir") {
      o.dir = v;
    } else if (a == "--json") {
      o.json = v;
    } else if (a == "--machine") {
      o.machine = v;
    } else if (a == "--commit") {
      o.commit = v;
    } else if (a == "--only") {
      if (v != "chase" && v != "register") usage("bad --only " + v + " (chase or register)");
      (v == "chase" ? o.chase_only : o.register_only) = true;
    } else {
      usage("unknown argument " + std::string{a});
    }
  }
  return o;
}

std::string json_number(double v)
{
  if (!std::isfinite(v)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

struct row {
  std::string name;
  double seconds, gbps;  // NaN when failed or meaningless
  std::string note;
};

// The rows so far: printed as each completes, and the JSON file rewritten after each, so that a
// run killed by a time limit still leaves what it measured.
class results {
 public:
  explicit results(const options& o) : opt_{o} {}
  std::string device;
  bool failed{false};
  void add(const std::string& name, double seconds, u64 bytes, const std::string& note = "")
  {
    const double gbps = bytes > 0 ? static_cast<double>(bytes) / seconds / 1e9 : NAN;
    push({name, seconds, gbps, note});
  }
  void fail(const std::string& name, const std::string& why)
  {
    failed = true;
    push({name, NAN, NAN, "FAILED: " + why});
  }
  void note(const std::string& text)
  {
    std::printf("# %s\n", text.c_str());
    std::fflush(stdout);
    notes_.push_back(text);
  }

 private:
  void push(row r)
  {
    std::printf("%-30s %10s %9s  %s\n", r.name.c_str(), fmt(r.seconds, "%.4f").c_str(),
                fmt(r.gbps, "%.2f").c_str(), r.note.c_str());
    std::fflush(stdout);
    rows_.push_back(std::move(r));
    write_json();
  }
  static std::string fmt(double v, const char* f)
  {
    if (!std::isfinite(v)) return "-";
    char t[32];
    std::snprintf(t, sizeof t, f, v);
    return t;
  }
  void write_json()
  {
    if (opt_.json.empty() || json_broken_) return;
    std::string out = "{\"tool\":\"mem_bench\",\"machine\":" + json_string(opt_.machine) +
                      ",\"commit\":" + json_string(opt_.commit) +
                      ",\"device\":" + json_string(device) +
                      ",\"bytes\":" + std::to_string(opt_.bytes) +
                      ",\"threads\":" + std::to_string(opt_.threads) + ",\"notes\":[";
    for (std::size_t i = 0; i < notes_.size(); ++i)
      out += (i > 0 ? "," : "") + json_string(notes_[i]);
    out += "],\"rows\":[\n";
    for (std::size_t i = 0; i < rows_.size(); ++i)
      out += "  {\"name\":" + json_string(rows_[i].name) +
             ",\"seconds\":" + json_number(rows_[i].seconds) +
             ",\"gbps\":" + json_number(rows_[i].gbps) + ",\"note\":" + json_string(rows_[i].note) +
             "}" + (i + 1 < rows_.size() ? ",\n" : "\n");
    out += "]}\n";
    std::FILE* f = std::fopen(opt_.json.c_str(), "w");
    const bool ok = f != nullptr && std::fwrite(out.data(), 1, out.size(), f) == out.size();
    if ((f != nullptr && std::fclose(f) != 0) || !ok) {
      json_broken_ = true;  // said once, not after every row
      std::printf("# cannot write --json %s: %s\n", opt_.json.c_str(), std::strerror(errno));
    }
  }
  const options& opt_;
  std::vector<row> rows_;
  std::vector<std::string> notes_;
  bool json_broken_{false};
};

// The first failure among a row's threads; the row's note gives it.
class first_error {
 public:
  void set(std::string text)
  {
    const std::lock_guard lock{mutex_};
    if (text_.empty()) text_ = std::move(text);
  }
  std::string text()
  {
    const std::lock_guard lock{mutex_};
    return text_;
  }

 private:
  std::mutex mutex_;
  std::string text_;
};

/// Runs body(t) on `threads` threads and returns the seconds from releasing them to the last
/// join: the threads are created first, untimed, since creating a few hundred costs ms.
template <class F>
double timed_threads(unsigned threads, F&& body)
{
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  try {
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        body(t);
      });
  } catch (...) {
    go.store(true);
    for (std::thread& th : pool) th.join();
    throw;
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto t0 = clock_type::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  return seconds_since(t0);
}

/// Thread t's contiguous share [first, last) of n bytes: whole huge pages, so that no huge page
/// is faulted by two threads and MADV_POPULATE_WRITE gets page-aligned ranges.
std::pair<u64, u64> share(u64 n, unsigned t, unsigned threads)
{
  const u64 chunk = ((n + threads - 1) / threads + huge_page - 1) / huge_page * huge_page;
  const u64 first = std::min(n, t * chunk);
  return {first, std::min(n, first + chunk)};
}

/// A "Field:  123 kB" value of a /proc file, -1 when absent.
long kib_field(const char* path, const char* field)
{
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char line[512];
  long v = -1;
  const std::size_t len = std::strlen(field);
  while (v < 0 && std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, field, len) == 0 && line[len] == ':')
      v = std::strtol(line + len + 1, nullptr, 10);
  std::fclose(f);
  return v;
}
// Whether huge pages were obtained, not just asked for: the growth of a /proc counter.
std::string huge_delta(const char* path, const char* field, long before)
{
  const long after = kib_field(path, field);
  if (before < 0 || after < 0) return std::string{field} + " n/a";
  return std::string{field} + " " + (after >= before ? "+" : "") +
         std::to_string((after - before) / 1024) + " MiB";
}
std::string anon_huge(long before)
{
  return huge_delta("/proc/self/smaps_rollup", "AnonHugePages", before);
}
long anon_huge_now()
{
  return kib_field("/proc/self/smaps_rollup", "AnonHugePages");
}
std::string shmem_huge(long before)
{
  return huge_delta("/proc/meminfo", "ShmemHugePages", before);
}
long shmem_huge_now()
{
  return kib_field("/proc/meminfo", "ShmemHugePages");
}

class unique_map {
 public:
  unique_map(void* p, u64 len) : p_{p}, len_{len} {}
  unique_map(const unique_map&) = delete;
  unique_map& operator=(const unique_map&) = delete;
  ~unique_map() { check_cleanup(unmap() == 0, "munmap"); }
  char* get() const { return static_cast<char*>(p_); }
  int unmap() { return p_ == MAP_FAILED ? 0 : ::munmap(std::exchange(p_, MAP_FAILED), len_); }
  /// Forgets the mapping: its caller unmapped it.
  void release() noexcept { p_ = MAP_FAILED; }

 private:
  void* p_;
  u64 len_;
};

/// An anonymous private mapping of n bytes starting on a 2 MiB boundary (so that huge pages can
/// back all of it), advised MADV_HUGEPAGE or MADV_NOHUGEPAGE.
struct anon_map {
  anon_map(u64 n, bool huge)
      : map{::mmap(nullptr, n + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0),
            n + huge_page}
  {
    if (map.get() == MAP_FAILED) {
      error = errno_text("mmap", errno);
      return;
    }
    const auto addr = reinterpret_cast<std::uintptr_t>(map.get());
    data = map.get() + (huge_page - addr % huge_page) % huge_page;
    if (::madvise(data, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
      error = errno_text(huge ? "madvise(MADV_HUGEPAGE)" : "madvise(MADV_NOHUGEPAGE)", errno);
  }
  unique_map map;
  char* data{nullptr};
  std::string error;
};

void parallel_memset(char* p, u64 n, unsigned threads, int value)
{
  timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    std::memset(p + first, value, last - first);
  });
}

/// Row (2): first touch of a new anonymous mapping, by memset or MADV_POPULATE_WRITE, then its
/// munmap as a row of its own (the exit or free of a big buffer).
void anon_first_touch(results& out, const std::string& name, u64 n, unsigned threads, bool huge,
                      bool populate)
{
  const long before = anon_huge_now();
  anon_map m{n, huge};
  if (!m.error.empty()) return out.fail(name, m.error);
  first_error err;
  const double s = timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    if (!populate)
      std::memset(m.data + first, 1, last - first);
    else if (last > first && ::madvise(m.data + first, last - first, MADV_POPULATE_WRITE) != 0)
      err.set(errno_text("madvise(MADV_POPULATE_WRITE)", errno));
  });
  if (!err.text().empty())
    out.fail(name, err.text());
  else
    out.add(name, s, n, anon_huge(before));
  const auto t0 = clock_type::now();
  if (m.map.unmap() != 0) return out.fail(name + "_munmap", errno_text("munmap", errno));
  out.add(name + "_munmap", seconds_since(t0), n);
}

/// Rows (4): pinning, and the H2D copy rates that pinning buys, on device 0.
void cuda_rows(results& out, u64 n, char* touched)
{
  cudaError_t e{};
  void* pinned = nullptr;
  auto t0 = clock_type::now();
  if ((e = cudaHostAlloc(&pinned, n, cudaHostAllocPortable)) != cudaSuccess) {
    out.fail("cuda_host_alloc", cuda_text("cudaHostAlloc", e));
  } else {
    out.add("cuda_host_alloc", seconds_since(t0), n, "cudaHostAllocPortable");
    // (e) copy rates: best of 3 after a warm-up, timed by events on a stream.
    const u64 copy = std::min(n, u64{1024} * mib);
    void* dev = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t ev[2] = {nullptr, nullptr};
    if ((e = cudaMalloc(&dev, copy)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&ev[0])) != cudaSuccess ||
        (e = cudaEventCreate(&ev[1])) != cudaSuccess) {
      out.fail("h2d_copies", cuda_text("cudaMalloc/StreamCreate/EventCreate", e));
    } else {
      const std::pair<const char*, const void*> sources[] = {{"h2d_pinned", pinned},
                                                             {"h2d_pageable", touched}};
      for (const auto& [name, src] : sources) {
        float best = 1e30f;
        for (int rep = 0; rep < 4 && e == cudaSuccess; ++rep) {
          float ms = 0;
          if ((e = cudaEventRecord(ev[0], stream)) == cudaSuccess &&
              (e = cudaMemcpyAsync(dev, src, copy, cudaMemcpyHostToDevice, stream)) ==
                  cudaSuccess &&
              (e = cudaEventRecord(ev[1], stream)) == cudaSuccess &&
              (e = cudaEventSynchronize(ev[1])) == cudaSuccess &&
              (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) == cudaSuccess && rep > 0)
            best = std::min(best, ms);
        }
        if (e != cudaSuccess)
          out.fail(name, cuda_text("cudaMemcpyAsync and events", e));
        else
          out.add(name, best / 1e3, copy,
                  std::to_string(copy / mib) + " MiB, best of 3 after a warm-up");
        e = cudaSuccess;
      }
    }
    for (cudaEvent_t x : ev)
      if (x != nullptr) check_cleanup(cudaEventDestroy(x) == cudaSuccess, "cudaEventDestroy");
    if (stream != nullptr)
      check_cleanup(cudaStreamDestroy(stream) == cudaSuccess, "cudaStreamDestroy");
    if (dev != nullptr) check_cleanup(cudaFree(dev) == cudaSuccess, "cudaFree");
    t0 = clock_type::now();
    if ((e = cudaFreeHost(pinned)) != cudaSuccess)
      out.fail("cuda_free_host", cuda_text("cudaFreeHost", e));
    else
      out.add("cuda_free_host", seconds_since(t0), n);
  }
  // (b) register the touched huge-page buffer; (c) an untouched one: does register populate?
  anon_map fresh{n, true};
  for (const bool was_touched : {true, false}) {
    const std::string suffix = was_touched ? "_touched" : "_untouched";
    char* p = was_touched ? touched : fresh.data;
    if (!was_touched && !fresh.error.empty()) return out.fail("register" + suffix, fresh.error);
    t0 = clock_type::now();
    if ((e = cudaHostRegister(p, n, cudaHostRegisterPortable)) != cudaSuccess) {
      out.fail("register" + suffix, cuda_text("cudaHostRegister", e));
      continue;
    }
    const double s = seconds_since(t0);
    std::string note = "cudaHostRegisterPortable";
    if (!was_touched) {
      // Resident pages after the register: 100% means it faulted the pages in itself.
      const auto page = static_cast<u64>(::sysconf(_SC_PAGESIZE));
      std::vector<unsigned char> vec((n + page - 1) / page);
      if (::mincore(p, n, vec.data()) != 0) {
        note += ", " + errno_text("mincore", errno);
      } else {
        const auto resident =
            std::count_if(vec.begin(), vec.end(), [](unsigned char c) { return (c & 1) != 0; });
        note +=
            ", resident after: " + std::to_string(100 * resident / static_cast<long>(vec.size())) +
            "%";
      }
    }
    out.add("register" + suffix, s, n, note);
    t0 = clock_type::now();
    if ((e = cudaHostUnregister(p)) != cudaSuccess)
      out.fail("unregister" + suffix, cuda_text("cudaHostUnregister", e));
    else
      out.add("unregister" + suffix, seconds_since(t0), n);
  }
}

/// A new file in --dir (O_EXCL, a name of this process), removed by remove() with its unlink
/// timed, or else by the destructor or a signal (which can remove only the newest: the make rows'
/// several files at once are removed by their destructors).
class test_file {
 public:
  explicit test_file(const options& o)
  {
    static int counter = 0;
    path_ = o.dir + "/mem_bench." + std::to_string(::getpid()) + "." + std::to_string(++counter);
    file_path_set = 0;
    std::snprintf(file_path, sizeof file_path, "%s", path_.c_str());
    file_path_set = 1;
    fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      error = errno_text("open(O_CREAT|O_EXCL)", errno) + " " + path_;
      path_.clear();
      file_path_set = 0;
    }
  }
  test_file(const test_file&) = delete;
  test_file& operator=(const test_file&) = delete;
  ~test_file()
  {
    if (fd >= 0) check_cleanup(::close(fd) == 0, "close");
    if (!path_.empty()) check_cleanup(::unlink(path_.c_str()) == 0, "unlink " + path_);
    file_path_set = 0;
  }
  /// Closes, then times the unlink: with no descriptor or mapping left, it frees the pages.
  void remove(results& out, const std::string& name, u64 n)
  {
    if (::close(std::exchange(fd, -1)) != 0) out.fail(name, errno_text("close", errno));
    const auto t0 = clock_type::now();
    const int r = ::unlink(std::exchange(path_, std::string{}).c_str());
    const double s = seconds_since(t0);
    file_path_set = 0;
    if (r != 0)
      out.fail(name, errno_text("unlink", errno));
    else
      out.add(name, s, n);
  }
  int fd{-1};
  std::string error;

 private:
  std::string path_;
};

/// Writes (or reads, to EOF as an error) all len bytes at off, through EINTR and short counts.
std::string io_full(bool write, int fd, char* p, u64 len, u64 off)
{
  while (len > 0) {
    const ssize_t r = write ? ::pwrite(fd, p, len, static_cast<off_t>(off))
                            : ::pread(fd, p, len, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno_text(write ? "pwrite" : "pread", errno);
    if (r == 0) return "pread: end of file at " + std::to_string(off);
    p += r;
    off += static_cast<u64>(r);
    len -= static_cast<u64>(r);
  }
  return "";
}

/// T threads move the file in 1 MiB blocks, block b by thread b % T: the threads advance through
/// the file together, as a copy pipeline would.
double interleaved_io(bool write, int fd, char* buf, u64 n, unsigned threads, first_error& err)
{
  return timed_threads(threads, [&](unsigned t) {
    for (u64 off = t * io_block; off < n; off += threads * io_block) {
      std::string e = io_full(write, fd, buf + off, std::min(io_block, n - off), off);
      if (!e.empty()) return err.set(std::move(e));
    }
  });
}

std::string verify(const char* a, const char* b, u64 n, unsigned threads)
{
  std::atomic<bool> same{true};
  timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    if (std::memcmp(a + first, b + first, last - first) != 0) same = false;
  });
  return same ? "verified" : "MISMATCH against the source";
}

/// Rows (5b, 5c with 5d, 5e): a new file ftruncated and mapped shared, its pages created by
/// MADV_POPULATE_WRITE or by a faulting memcpy from the touched buffer.
void file_mmap_rows(results& out, const options& o, const std::string& name, const char* src,
                    bool populate, bool huge, bool rewrite)
{
  const u64 n = o.bytes;
  const unsigned threads = o.threads;
  test_file f{o};
  if (!f.error.empty()) return out.fail(name, f.error);
  const long before = shmem_huge_now();
  const auto t0 = clock_type::now();
  if (::ftruncate(f.fd, static_cast<off_t>(n)) != 0)
    return out.fail(name, errno_text("ftruncate", errno));
  unique_map m{::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0), n};
  if (m.get() == MAP_FAILED) return out.fail(name, errno_text("mmap(MAP_SHARED)", errno));
  std::string note;
  if (huge && ::madvise(m.get(), n, MADV_HUGEPAGE) != 0)
    note = errno_text("madvise(MADV_HUGEPAGE)", errno) + "; ";
  first_error err;
  const double s =
      seconds_since(t0) + timed_threads(threads, [&](unsigned t) {
        const auto [first, last] = share(n, t, threads);
        if (!populate)
          std::memcpy(m.get() + first, src + first, last - first);
        else if (last > first && ::madvise(m.get() + first, last - first, MADV_POPULATE_WRITE) != 0)
          err.set(errno_text("madvise(MADV_POPULATE_WRITE)", errno));
      });
  if (!err.text().empty())
    out.fail(name, note + err.text());
  else
    out.add(name, s, n,
            note + shmem_huge(before) + (populate ? "" : ", " + verify(m.get(), src, n, threads)));
  if (rewrite) {
    const double s2 = timed_threads(threads, [&](unsigned t) {
      const auto [first, last] = share(n, t, threads);
      std::memcpy(m.get() + first, src + first, last - first);
    });
    out.add("file_rewrite_T", s2, n, "memcpy into the pages of " + name);
  }
  if (m.unmap() != 0) return out.fail(name + "_unlink", errno_text("munmap", errno));
  f.remove(out, name + "_unlink", n);
}

std::string first_line(const char* path)
{
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return errno_text(path, errno);
  char line[1024] = "";
  if (std::fgets(line, sizeof line, f) == nullptr) line[0] = '\0';
  std::fclose(f);
  line[std::strcspn(line, "\n")] = '\0';
  return line;
}

/// The /proc/mounts line of the filesystem holding dir: the longest mount point above it.
std::string mount_line(const std::string& dir)
{
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return errno_text("realpath", errno);
  std::FILE* f = std::fopen("/proc/mounts", "r");
  if (f == nullptr) return errno_text("/proc/mounts", errno);
  std::string best, best_mnt;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char dev[1024], mnt[2048];
    if (std::sscanf(line, "%1023s %2047s", dev, mnt) != 2) continue;
    const std::string m = mnt, r = real;
    const bool above = m == "/" || r == m || r.rfind(m + "/", 0) == 0;
    if (above && m.size() >= best_mnt.size()) {
      best_mnt = m;
      best = line;
    }
  }
  std::fclose(f);
  best.erase(best.find_last_not_of('\n') + 1);
  return best;
}

/// Rows (5): the pages of tmpfs (or any --dir) files.
void file_rows(results& out, const options& o, char* src)
{
  const u64 n = o.bytes;
  out.note("shmem_enabled: " + first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
  out.note("mount of " + o.dir + ": " + mount_line(o.dir));
  struct statvfs v {};
  if (::statvfs(o.dir.c_str(), &v) != 0) return out.fail("file_rows", errno_text("statvfs", errno));
  const double free_bytes = static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize);
  if (free_bytes < 2.2 * static_cast<double>(n)) {
    out.failed = true;
    return out.note("file rows skipped: " + std::to_string(static_cast<u64>(free_bytes) / mib) +
                    " MiB free in " + o.dir + ", fewer than 2.2 x --bytes");
  }
  {  // (a) the pages of a new file, created by one fallocate
    test_file f{o};
    if (!f.error.empty()) return out.fail("file_fallocate", f.error);
    const long before = shmem_huge_now();
    const auto t0 = clock_type::now();
    if (::fallocate(f.fd, 0, 0, static_cast<off_t>(n)) != 0)
      out.fail("file_fallocate", errno_text("fallocate", errno));
    else
      out.add("file_fallocate", seconds_since(t0), n, shmem_huge(before));
    f.remove(out, "file_fallocate_unlink", n);
  }
  file_mmap_rows(out, o, "file_populate_T", src, true, false, false);
  file_mmap_rows(out, o, "file_memcpy_T", src, false, false, true);
  file_mmap_rows(out, o, "file_huge_memcpy_T", src, false, true, false);

  // (f) pwrite into a new file, then into its pages; (g) pread it back, buffered and O_DIRECT
  test_file f{o};
  if (!f.error.empty()) return out.fail("file_pwrite_T", f.error);
  for (const char* name : {"file_pwrite_T", "file_pwrite_rewrite_T"}) {
    first_error err;
    const long before = shmem_huge_now();
    const double s = interleaved_io(true, f.fd, src, n, o.threads, err);
    if (!err.text().empty()) return out.fail(name, err.text());
    out.add(name, s, n, shmem_huge(before));
  }
  anon_map dst{n, true};  // touched below, untimed: the reads' destination, as a staging buffer
  if (!dst.error.empty()) return out.fail("file_pread_T", dst.error);
  for (const bool direct : {false, true}) {
    const char* name = direct ? "file_pread_direct_T" : "file_pread_T";
    parallel_memset(dst.data, n, o.threads, 0);
    const int fd = direct ? ::open(file_path, O_RDONLY | O_DIRECT | O_CLOEXEC) : f.fd;
    if (fd < 0 && errno == EINVAL) {
      out.add(name, NAN, 0, "EINVAL: no O_DIRECT on this filesystem");
      continue;
    }
    if (fd < 0) {
      out.fail(name, errno_text("open(O_DIRECT)", errno));
      continue;
    }
    first_error err;
    const double s = interleaved_io(false, fd, dst.data, n, o.threads, err);
    if (direct) check_cleanup(::close(fd) == 0, "close");
    if (err.text().empty())
      out.add(name, s, n, verify(dst.data, src, n, o.threads));
    else if (direct && err.text().find(std::strerror(EINVAL)) != std::string::npos)
      out.add(name, NAN, 0, "EINVAL from O_DIRECT pread: " + err.text());
    else
      out.fail(name, err.text());
  }
  f.remove(out, "file_pwrite_T_unlink", n);
}


/// How a chase row makes and fills a new file's pages.
enum class chase_scheme : std::uint8_t {
  fill_behind,      ///< copiers write each 1 MiB block once the fallocate thread made it
  fill_after,       ///< copiers start once every page is made
  map_behind,       ///< a second thread maps each made step (MADV_POPULATE_WRITE), copiers
                    ///< write behind it: the copies then take no faults
  populate_behind,  ///< no fallocate: the stepping thread maps (and so makes) each step
};

/// The thread that makes a new file's pages in steps from the start (fallocate, or with
/// `populate` MADV_POPULATE_WRITE of its mapping `map`): `made` gives the bytes made so far, a
/// failure sets `failed` and `err`, and `made_at` the seconds from t0 when it stopped.
struct page_maker {
  page_maker(int fd, char* map, u64 n, u64 step, bool populate, clock_type::time_point t0)
      : thread{[=, this] {
          for (u64 at = 0; at < n && !failed; at += step) {
            const u64 len = std::min(step, n - at);
            const bool ok =
                populate
                    ? ::madvise(map + at, len, MADV_POPULATE_WRITE) == 0
                    : ::fallocate(fd, 0, static_cast<off_t>(at), static_cast<off_t>(len)) == 0;
            if (!ok) {
              err.set(errno_text(populate ? "madvise" : "fallocate", errno));
              failed = true;
            }
            made.store(at + len, std::memory_order_release);
          }
          made_at = seconds_since(t0);
        }}
  {
  }
  page_maker(const page_maker&) = delete;
  page_maker& operator=(const page_maker&) = delete;
  ~page_maker() { join(); }
  void join()
  {
    if (thread.joinable()) thread.join();
  }
  std::atomic<u64> made{0};
  std::atomic<bool> failed{false};
  first_error err;
  double made_at{0};
  std::thread thread;  // last: it starts once the members above exist
};

/// Rows (6): the scheme a tmpfs output takes while the GPU's copy-out fills it (issue 18). One
/// thread makes the pages of a new file in steps of 256 MiB; `copiers` threads take 1 MiB blocks
/// in order from a shared counter and copy each once the scheme lets them. The row's time runs
/// from the ftruncate to the last byte copied; its note has when the pages were all made, and
/// the munmap of the mapping, whole and cut in 8 parts unmapped by 8 threads.
void chase_row(results& out, const options& o, const std::string& name, const char* src,
               chase_scheme scheme, unsigned copiers)
{
  const u64 n = o.bytes;
  constexpr u64 step = 256 * mib;
  test_file f{o};
  if (!f.error.empty()) return out.fail(name, f.error);
  const auto t0 = clock_type::now();
  if (::ftruncate(f.fd, static_cast<off_t>(n)) != 0)
    return out.fail(name, errno_text("ftruncate", errno));
  unique_map m{::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0), n};
  if (m.get() == MAP_FAILED) return out.fail(name, errno_text("mmap(MAP_SHARED)", errno));
  std::atomic<u64> mapped{0}, next{0};
  page_maker maker{f.fd, m.get(), n, step, scheme == chase_scheme::populate_behind, t0};
  std::atomic<u64>& made = maker.made;
  std::atomic<bool>& failed = maker.failed;
  first_error& err = maker.err;
  std::thread mapper;
  if (scheme == chase_scheme::map_behind)
    mapper = std::thread{[&] {
      for (u64 at = 0; at < n && !failed; at += step) {
        const u64 len = std::min(step, n - at);
        while (made.load(std::memory_order_acquire) < at + len && !failed)
          std::this_thread::yield();
        if (::madvise(m.get() + at, len, MADV_POPULATE_WRITE) != 0) {
          err.set(errno_text("madvise(MADV_POPULATE_WRITE)", errno));
          failed = true;
        }
        mapped.store(at + len, std::memory_order_release);
      }
    }};
  const std::atomic<u64>& gate = scheme == chase_scheme::map_behind ? mapped : made;
  timed_threads(copiers, [&](unsigned) {
    for (u64 b = next.fetch_add(io_block); b < n && !failed; b = next.fetch_add(io_block)) {
      const u64 len = std::min(io_block, n - b);
      const u64 need = scheme == chase_scheme::fill_after ? n : b + len;
      while (gate.load(std::memory_order_acquire) < need && !failed) std::this_thread::yield();
      if (!failed) std::memcpy(m.get() + b, src + b, len);
    }
  });
  const double s = seconds_since(t0);
  maker.join();
  if (mapper.joinable()) mapper.join();
  if (!err.text().empty()) return out.fail(name, err.text());
  std::string note = "pages made at " + json_number(maker.made_at) + " s, " +
                     std::to_string(copiers) + " copiers, " + verify(m.get(), src, n, o.threads);
  // Unmapping: 8 threads on 8 parts (the kernel zaps a large munmap under the read lock).
  const auto u0 = clock_type::now();
  void* const base = m.get();
  const u64 part = (n / 8 + huge_page - 1) / huge_page * huge_page;
  std::vector<std::thread> unmappers;
  for (u64 at = 0; at < n; at += part)
    unmappers.emplace_back([&, at] {
      if (::munmap(static_cast<char*>(base) + at, std::min(part, n - at)) != 0)
        err.set(errno_text("munmap", errno));
    });
  for (std::thread& t : unmappers) t.join();
  const double unmap_s = seconds_since(u0);
  m.release();
  note += ", munmap by 8 threads " + json_number(unmap_s) + " s";
  if (!err.text().empty()) note += " (" + err.text() + ")";
  out.add(name, s, n, note);
  f.remove(out, name + "_unlink", n);
}

/// Rows (7): who can make the pages of a new tmpfs file fastest. The chase rows above found the
/// one thread that calls fallocate to be what a tmpfs output waits for; these try several
/// threads: each fallocating its own contiguous part of the one file (fallocate takes the
/// file's lock), each mapping its own part (MADV_POPULATE_WRITE: page faults, no file lock),
/// and, as the bound without the file's shared state, each making a file of its own.
void make_rows(results& out, const options& o)
{
  const u64 n = o.bytes;
  enum class how : std::uint8_t { fallocate, populate, own_files };
  const auto row = [&](const std::string& name, how h, unsigned threads) {
    std::vector<std::unique_ptr<test_file>> files;
    const unsigned nfiles = h == how::own_files ? threads : 1;
    for (unsigned i = 0; i < nfiles; ++i) {
      files.push_back(std::make_unique<test_file>(o));
      if (!files.back()->error.empty()) return out.fail(name, files.back()->error);
    }
    char* map = nullptr;
    if (h == how::populate) {
      if (::ftruncate(files[0]->fd, static_cast<off_t>(n)) != 0)
        return out.fail(name, errno_text("ftruncate", errno));
      void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, files[0]->fd, 0);
      if (p == MAP_FAILED) return out.fail(name, errno_text("mmap", errno));
      map = static_cast<char*>(p);
    }
    first_error err;
    const double s = timed_threads(threads, [&](unsigned t) {
      const auto [first, last] = share(n, t, threads);
      if (last <= first) return;
      int rc = 0;
      if (h == how::fallocate)
        rc = ::fallocate(files[0]->fd, 0, static_cast<off_t>(first),
                         static_cast<off_t>(last - first));
      else if (h == how::populate)
        rc = ::madvise(map + first, last - first, MADV_POPULATE_WRITE);
      else
        rc = ::fallocate(files[t]->fd, 0, 0, static_cast<off_t>(last - first));
      if (rc != 0) err.set(errno_text(h == how::populate ? "madvise" : "fallocate", errno));
    });
    if (map != nullptr) check_cleanup(::munmap(map, n) == 0, "munmap");
    if (!err.text().empty()) return out.fail(name, err.text());
    out.add(name, s, n, std::to_string(threads) + " threads, " + std::to_string(nfiles) + " files");
    for (auto& f : files) {
      check_cleanup(::close(std::exchange(f->fd, -1)) == 0, "close");
    }
  };
  row("make_fallocate_1", how::fallocate, 1);
  row("make_fallocate_parts_4", how::fallocate, 4);
  row("make_populate_parts_2", how::populate, 2);
  row("make_populate_parts_4", how::populate, 4);
  row("make_populate_parts_8", how::populate, 8);
  row("make_populate_parts_16", how::populate, 16);
  row("make_own_files_4", how::own_files, 4);
  row("make_own_files_16", how::own_files, 16);
  row("make_fallocate_1_again", how::fallocate, 1);
}

void chase_rows(results& out, const options& o, const char* src)
{
  struct statvfs v {};
  if (::statvfs(o.dir.c_str(), &v) != 0) return out.fail("chase", errno_text("statvfs", errno));
  if (static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize) <
      1.1 * static_cast<double>(o.bytes)) {
    out.failed = true;
    return out.note("chase rows skipped: too little room in " + o.dir);
  }
  make_rows(out, o);
  const unsigned t = o.threads;
  const unsigned half = std::max(1u, t / 2), quarter = std::max(1u, t / 4);
  chase_row(out, o, "chase_fill_after_T", src, chase_scheme::fill_after, t);
  chase_row(out, o, "chase_fill_behind_T", src, chase_scheme::fill_behind, t);
  chase_row(out, o, "chase_fill_behind_T/2", src, chase_scheme::fill_behind, half);
  chase_row(out, o, "chase_fill_behind_T/4", src, chase_scheme::fill_behind, quarter);
  chase_row(out, o, "chase_map_behind_T", src, chase_scheme::map_behind, t);
  chase_row(out, o, "chase_map_behind_T/2", src, chase_scheme::map_behind, half);
  chase_row(out, o, "chase_map_behind_T/4", src, chase_scheme::map_behind, quarter);
  chase_row(out, o, "chase_populate_behind_T/2", src, chase_scheme::populate_behind, half);
}

/// The GPU side of the register rows: a stream, two events, a device window and a pinned
/// buffer to check what arrived. Every call is checked; the first failure is kept in `error`.
struct gpu_window {
  explicit gpu_window(u64 window_bytes) : bytes{window_bytes}
  {
    if ((e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&ev[0])) != cudaSuccess ||
        (e = cudaEventCreate(&ev[1])) != cudaSuccess ||
        (e = cudaMalloc(&dev, bytes)) != cudaSuccess ||
        (e = cudaHostAlloc(&check_mem, bytes, cudaHostAllocPortable)) != cudaSuccess)
      error = cuda_text("cudaStreamCreate/EventCreate/Malloc/HostAlloc", e);
    check = static_cast<char*>(check_mem);
  }
  gpu_window(const gpu_window&) = delete;
  gpu_window& operator=(const gpu_window&) = delete;
  ~gpu_window()
  {
    if (check_mem != nullptr)
      check_cleanup(cudaFreeHost(check_mem) == cudaSuccess, "cudaFreeHost");
    if (dev != nullptr) check_cleanup(cudaFree(dev) == cudaSuccess, "cudaFree");
    for (cudaEvent_t x : ev)
      if (x != nullptr) check_cleanup(cudaEventDestroy(x) == cudaSuccess, "cudaEventDestroy");
    if (stream != nullptr)
      check_cleanup(cudaStreamDestroy(stream) == cudaSuccess, "cudaStreamDestroy");
  }
  /// Queues the copy of host [p + at, + len) to or from the device window (offsets wrap).
  bool copy(char* p, u64 at, u64 len, bool to_device)
  {
    char* d = static_cast<char*>(dev) + at % bytes;
    e = to_device ? cudaMemcpyAsync(d, p + at, len, cudaMemcpyHostToDevice, stream)
                  : cudaMemcpyAsync(p + at, d, len, cudaMemcpyDeviceToHost, stream);
    if (e != cudaSuccess) error = cuda_text("cudaMemcpyAsync", e);
    return e == cudaSuccess;
  }
  bool record(int i)
  {
    if ((e = cudaEventRecord(ev[i], stream)) != cudaSuccess)
      error = cuda_text("cudaEventRecord", e);
    return e == cudaSuccess;
  }
  /// Waits for the stream; the seconds between the two events.
  double wait()
  {
    float ms = 0;
    if ((e = cudaStreamSynchronize(stream)) != cudaSuccess ||
        (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) != cudaSuccess)
      error = cuda_text("cudaStreamSynchronize/EventElapsedTime", e);
    return ms / 1e3;
  }
  u64 bytes;
  cudaError_t e{};
  cudaStream_t stream{};
  cudaEvent_t ev[2]{};
  void* dev{};
  void* check_mem{};
  char* check{};
  std::string error;
};

/// Whether host memory of n bytes at p holds src's pattern: window w of the file is src's first
/// window bytes (the output rows write the device window over and over).
std::string verify_windows(const char* p, const char* src, u64 n, u64 window, unsigned threads)
{
  std::atomic<bool> same{true};
  timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    for (u64 at = first; at < last && same; at += mib) {
      const u64 len = std::min({mib, last - at, window - at % window});
      if (std::memcmp(p + at, src + at % window, len) != 0) same = false;
    }
  });
  return same ? "verified" : "MISMATCH against the source";
}

/// Registers [p, p + n) in `threads` contiguous shares at once (one cudaHostRegister each);
/// the seconds, or a negative number with `error` set. Does the driver pin from several threads
/// at once, or take one lock?
double register_shares(char* p, u64 n, unsigned threads, unsigned flags, std::string& error)
{
  first_error err;
  const double s = timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    if (last > first) {
      const cudaError_t e = cudaHostRegister(p + first, last - first, flags);
      if (e != cudaSuccess) err.set(cuda_text("cudaHostRegister", e));
    }
  });
  error = err.text();
  return error.empty() ? s : -1;
}
double unregister_shares(char* p, u64 n, unsigned threads)
{
  return timed_threads(threads, [&](unsigned t) {
    const auto [first, last] = share(n, t, threads);
    if (last > first)
      check_cleanup(cudaHostUnregister(p + first) == cudaSuccess, "cudaHostUnregister");
  });
}

/// Rows (8b), after the register rows: what the data path would need to register a file's pages
/// or the round-1 buffer while a job runs. For 1, 4 and --threads threads registering shares at
/// once: an input file's populated mapping (4 KiB pages), a new output whose pages are 2 MiB
/// folios (populate one page in each, MADV_COLLAPSE: what the engine's page makers do), and an
/// anonymous buffer with MADV_HUGEPAGE populated from every thread (the round-1 buffer); each
/// registration's copies checked, then unregistered (timed: a job's teardown).
void register_parallel_rows(results& out, const options& o, const char* src, gpu_window& g)
{
  const u64 n = o.bytes, window = std::min(n, u64{1024} * mib);
  constexpr u64 step = 256 * mib;
  const std::vector<unsigned> counts = {1U, 4U, o.threads};
  const auto try_counts = [&](const std::string& p, char* m, unsigned flags, bool to_device) {
    for (const unsigned threads : counts) {
      std::string error;
      const double s = register_shares(m, n, threads, flags, error);
      const std::string name = p + "register_" + std::to_string(threads);
      if (s < 0) {
        out.fail(name, error);
        continue;
      }
      out.add(name, s, n, std::to_string(threads) + " threads, one share each");
      if (threads == counts.back()) {  // the copies through this registration, checked
        bool ok = g.record(0);
        for (u64 at = 0; ok && at < n; at += step)
          ok = g.copy(m, at, std::min(step, n - at), to_device);
        ok = ok && g.record(1);
        const double c = ok ? g.wait() : 0;
        if (!g.error.empty()) {
          out.fail(p + (to_device ? "h2d" : "d2h"), g.error);
        } else {
          std::string note = to_device ? "from" : "into";
          note += " the mapping, registered in shares; ";
          if (to_device) {
            note += cudaMemcpy(g.check, g.dev, window, cudaMemcpyDeviceToHost) != cudaSuccess
                        ? "check copy FAILED"
                        : std::memcmp(g.check, src + n - window, window) == 0 ? "verified"
                                                                               : "MISMATCH";
          } else {
            note += verify_windows(m, src, n, window, o.threads);
          }
          out.add(p + (to_device ? "h2d" : "d2h"), c, n, note);
        }
      }
      out.add(p + "unregister_" + std::to_string(threads), unregister_shares(m, n, threads), n);
    }
  };
  out.note("shmem_enabled: " + first_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled"));
  {  // An input: a file whose pages exist, mapped and populated.
    test_file f{o};
    if (!f.error.empty()) return out.fail("rp_in", f.error);
    first_error err;
    interleaved_io(true, f.fd, const_cast<char*>(src), n, o.threads, err);
    if (!err.text().empty()) return out.fail("rp_in", err.text());
    unique_map m{::mmap(nullptr, n, PROT_READ, MAP_SHARED, f.fd, 0), n};
    if (m.get() == MAP_FAILED) return out.fail("rp_in", errno_text("mmap", errno));
    const double s = timed_threads(o.threads, [&](unsigned t) {
      const auto [first, last] = share(n, t, o.threads);
      if (last > first && ::madvise(m.get() + first, last - first, MADV_POPULATE_READ) != 0)
        err.set(errno_text("madvise(MADV_POPULATE_READ)", errno));
    });
    if (!err.text().empty()) return out.fail("rp_in_populate_T", err.text());
    out.add("rp_in_populate_T", s, n, "MADV_POPULATE_READ of 4 KiB pages");
    int read_only = 0, dev_id = 0;
    if (cudaGetDevice(&dev_id) != cudaSuccess ||
        cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, dev_id) !=
            cudaSuccess)
      read_only = 0;
    try_counts("rp_in_", m.get(), cudaHostRegisterPortable |
                                      (read_only ? cudaHostRegisterReadOnly : 0), true);
  }
  if (cudaMemcpy(g.dev, src, window, cudaMemcpyHostToDevice) != cudaSuccess)
    return out.fail("rp_out", "cudaMemcpy of the source window failed");
  {  // A new output made of 2 MiB folios, as the page makers make them.
    test_file f{o};
    if (!f.error.empty()) return out.fail("rp_out_huge", f.error);
    if (::ftruncate(f.fd, static_cast<off_t>(n)) != 0)
      return out.fail("rp_out_huge", errno_text("ftruncate", errno));
    // Room for a 2 MiB-aligned shared mapping: the file's huge pages are the mapping's.
    unique_map room{::mmap(nullptr, n + huge_page, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), n + huge_page};
    if (room.get() == MAP_FAILED) return out.fail("rp_out_huge", errno_text("mmap", errno));
    const auto at = reinterpret_cast<std::uintptr_t>(room.get());
    char* const want = room.get() + (huge_page - at % huge_page) % huge_page;
    char* const m = static_cast<char*>(::mmap(want, n, PROT_READ | PROT_WRITE,
                                              MAP_SHARED | MAP_FIXED, f.fd, 0));
    if (m == MAP_FAILED) return out.fail("rp_out_huge", errno_text("mmap", errno));
    const long before = shmem_huge_now();
    first_error err;
    const double s = timed_threads(o.threads, [&](unsigned t) {
      const auto [first, last] = share(n, t, o.threads);
      for (u64 p = first; p < last; p += huge_page)
        if (::madvise(m + p, 4096, MADV_POPULATE_WRITE) != 0)
          return err.set(errno_text("madvise(MADV_POPULATE_WRITE)", errno));
      if (last > first && ::madvise(m + first, last - first, 25 /* MADV_COLLAPSE */) != 0)
        err.set(errno_text("madvise(MADV_COLLAPSE)", errno));
    });
    if (!err.text().empty()) {
      out.fail("rp_out_huge_make_T", err.text());
    } else {
      out.add("rp_out_huge_make_T", s, n, "one page populated per 2 MiB, collapsed; " +
                                              shmem_huge(before));
      try_counts("rp_out_huge_", m, cudaHostRegisterPortable, false);
    }
    check_cleanup(room.unmap() == 0, "munmap");  // the file's mapping with the rest of it
    f.remove(out, "rp_out_huge_unlink", n);
  }
  {  // The round-1 buffer: anonymous, huge pages advised, populated from every thread.
    anon_map b{n, true};
    if (!b.error.empty()) return out.fail("rp_anon", b.error);
    const long before = anon_huge_now();
    first_error err;
    const double s = timed_threads(o.threads, [&](unsigned t) {
      const auto [first, last] = share(n, t, o.threads);
      if (last > first && ::madvise(b.data + first, last - first, MADV_POPULATE_WRITE) != 0)
        err.set(errno_text("madvise(MADV_POPULATE_WRITE)", errno));
    });
    if (!err.text().empty()) return out.fail("rp_anon_populate_T", err.text());
    out.add("rp_anon_populate_T", s, n, anon_huge(before));
    try_counts("rp_anon_", b.data, cudaHostRegisterPortable | cudaHostRegisterMapped, false);
  }
}

/// Rows (8), `--only register`: a file's pages mapped and registered with the driver, so that the
/// copy engines move them straight between the file's pages and the GPU, against the staging
/// rows above (issue 18 item 1's mmap + populate + register). For an input (a file of --bytes
/// whose pages exist): populate and register costs, the H2D rate from the registered mapping,
/// unregister and munmap, and registration piece by piece ahead of each piece's copy (does it
/// overlap?). For an output (a new file): fallocate, register, the D2H rate into its pages,
/// and the pipelined scheme (a thread fallocates steps, each made step is registered and
/// written by the copy engine behind it). Every copy is checked.
void register_rows(results& out, const options& o, const char* src)
{
  const u64 n = o.bytes, window = std::min(n, u64{1024} * mib);
  constexpr u64 step = 256 * mib;
  out.note("mount of " + o.dir + ": " + mount_line(o.dir));
  int read_only = 0, dev_id = 0;
  if (cudaGetDevice(&dev_id) != cudaSuccess ||
      cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, dev_id) !=
          cudaSuccess)
    read_only = 0;
  const unsigned in_flags = cudaHostRegisterPortable | (read_only ? cudaHostRegisterReadOnly : 0);
  out.note(std::string{"input registration flags: Portable"} + (read_only ? " | ReadOnly" : ""));
  gpu_window g{window};
  if (!g.error.empty()) return out.fail("register_rows", g.error);
  const auto cuda_row = [&](const std::string& name, cudaError_t e, const char* call,
                            clock_type::time_point t0, const std::string& note = "") {
    if (e != cudaSuccess) {
      out.fail(name, cuda_text(call, e));
      return false;
    }
    out.add(name, seconds_since(t0), n, note);
    return true;
  };

  {  // The input: a file of n bytes whose pages exist (written from src).
    test_file f{o};
    if (!f.error.empty()) return out.fail("rf_in", f.error);
    first_error err;
    interleaved_io(true, f.fd, const_cast<char*>(src), n, o.threads, err);
    if (!err.text().empty()) return out.fail("rf_in", err.text());
    for (const bool populate : {true, false}) {
      const std::string p = populate ? "rf_in_" : "rf_in_unpopulated_";
      auto t0 = clock_type::now();
      unique_map m{::mmap(nullptr, n, PROT_READ, MAP_SHARED, f.fd, 0), n};
      if (m.get() == MAP_FAILED) return out.fail(p + "map", errno_text("mmap", errno));
      if (populate) {
        const double s = seconds_since(t0) + timed_threads(o.threads, [&](unsigned t) {
                           const auto [first, last] = share(n, t, o.threads);
                           if (last > first &&
                               ::madvise(m.get() + first, last - first, MADV_POPULATE_READ) != 0)
                             err.set(errno_text("madvise(MADV_POPULATE_READ)", errno));
                         });
        if (!err.text().empty()) return out.fail(p + "populate_T", err.text());
        out.add(p + "populate_T", s, n, "mmap + MADV_POPULATE_READ");
      }
      t0 = clock_type::now();
      if (!cuda_row(p + "register", cudaHostRegister(m.get(), n, in_flags), "cudaHostRegister",
                    t0))
        continue;
      bool ok = g.record(0);
      for (u64 at = 0; ok && at < n; at += step)
        ok = g.copy(m.get(), at, std::min(step, n - at), true);
      ok = ok && g.record(1);
      const double s = ok ? g.wait() : 0;
      if (!g.error.empty()) return out.fail(p + "h2d", g.error);
      // The window holds the file's last window of bytes: check it.
      std::string note = "copy engine from the registered mapping";
      if (cudaMemcpy(g.check, g.dev, window, cudaMemcpyDeviceToHost) != cudaSuccess)
        note += ", check copy FAILED";
      else if (n % window != 0)
        note += ", not checked (--bytes not a whole number of GiB)";
      else
        note += std::memcmp(g.check, src + n - window, window) == 0 ? ", verified" : ", MISMATCH";
      out.add(p + "h2d", s, n, note);
      t0 = clock_type::now();
      cuda_row(p + "unregister", cudaHostUnregister(m.get()), "cudaHostUnregister", t0);
      t0 = clock_type::now();
      if (m.unmap() != 0) return out.fail(p + "munmap", errno_text("munmap", errno));
      out.add(p + "munmap", seconds_since(t0), n);
    }
    // Piece by piece: register piece k, queue its copy, go on to k + 1 while it runs.
    const auto t0 = clock_type::now();
    unique_map m{::mmap(nullptr, n, PROT_READ, MAP_SHARED, f.fd, 0), n};
    if (m.get() == MAP_FAILED) return out.fail("rf_in_pieces", errno_text("mmap", errno));
    bool ok = g.record(0);
    double register_s = 0;
    u64 registered = 0;
    for (u64 at = 0; ok && at < n; at += step) {
      const u64 len = std::min(step, n - at);
      const auto r0 = clock_type::now();
      const cudaError_t e = cudaHostRegister(m.get() + at, len, in_flags);
      register_s += seconds_since(r0);
      if (e != cudaSuccess) {
        out.fail("rf_in_pieces", cuda_text("cudaHostRegister", e));
        ok = false;
        break;
      }
      registered = at + len;
      ok = g.copy(m.get(), at, len, true);
    }
    ok = ok && g.record(1);
    if (ok) {
      g.wait();
      if (!g.error.empty()) return out.fail("rf_in_pieces", g.error);
      out.add("rf_in_pieces", seconds_since(t0), n,
              "256 MiB pieces registered one after another, each copied once registered; "
              "register calls " + json_number(register_s) + " s");
    }
    const auto u0 = clock_type::now();
    for (u64 at = 0; at < registered; at += step)
      check_cleanup(cudaHostUnregister(m.get() + at) == cudaSuccess, "cudaHostUnregister");
    out.add("rf_in_pieces_unregister", seconds_since(u0), registered);
  }

  // The outputs: the device window holds src's first window, written over the file again and
  // again, so that window w of the file must equal it.
  if (cudaMemcpy(g.dev, src, window, cudaMemcpyHostToDevice) != cudaSuccess)
    return out.fail("rf_out", "cudaMemcpy of the source window failed");
  {
    test_file f{o};
    if (!f.error.empty()) return out.fail("rf_out", f.error);
    auto t0 = clock_type::now();
    const long before = shmem_huge_now();
    if (::fallocate(f.fd, 0, 0, static_cast<off_t>(n)) != 0)
      return out.fail("rf_out_fallocate", errno_text("fallocate", errno));
    out.add("rf_out_fallocate", seconds_since(t0), n, shmem_huge(before));
    t0 = clock_type::now();
    unique_map m{::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0), n};
    if (m.get() == MAP_FAILED) return out.fail("rf_out_map", errno_text("mmap", errno));
    if (cuda_row("rf_out_register", cudaHostRegister(m.get(), n, cudaHostRegisterPortable),
                 "cudaHostRegister", t0, "mmap + cudaHostRegister of the made pages")) {
      bool ok = g.record(0);
      for (u64 at = 0; ok && at < n; at += step)
        ok = g.copy(m.get(), at, std::min(step, n - at), false);
      ok = ok && g.record(1);
      const double s = ok ? g.wait() : 0;
      if (!g.error.empty()) return out.fail("rf_out_d2h", g.error);
      out.add("rf_out_d2h", s, n,
              "copy engine into the registered mapping, " +
                  verify_windows(m.get(), src, n, window, o.threads));
      t0 = clock_type::now();
      cuda_row("rf_out_unregister", cudaHostUnregister(m.get()), "cudaHostUnregister", t0);
    }
    t0 = clock_type::now();
    if (m.unmap() != 0) return out.fail("rf_out_munmap", errno_text("munmap", errno));
    out.add("rf_out_munmap", seconds_since(t0), n);
    f.remove(out, "rf_out_unlink", n);
  }
  {  // Pipelined: a thread fallocates 256 MiB steps; each made step is registered and written.
    test_file f{o};
    if (!f.error.empty()) return out.fail("rf_out_pieces", f.error);
    const auto t0 = clock_type::now();
    if (::ftruncate(f.fd, static_cast<off_t>(n)) != 0)
      return out.fail("rf_out_pieces", errno_text("ftruncate", errno));
    unique_map m{::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0), n};
    if (m.get() == MAP_FAILED) return out.fail("rf_out_pieces", errno_text("mmap", errno));
    page_maker maker{f.fd, m.get(), n, step, false, t0};
    std::atomic<u64>& made = maker.made;
    std::atomic<bool>& failed = maker.failed;
    first_error& err = maker.err;
    bool ok = g.record(0);
    double register_s = 0;
    u64 registered = 0;
    for (u64 at = 0; ok && at < n && !failed; at += step) {
      const u64 len = std::min(step, n - at);
      while (made.load(std::memory_order_acquire) < at + len && !failed) std::this_thread::yield();
      if (failed) break;
      const auto r0 = clock_type::now();
      const cudaError_t e = cudaHostRegister(m.get() + at, len, cudaHostRegisterPortable);
      register_s += seconds_since(r0);
      if (e != cudaSuccess) {
        err.set(cuda_text("cudaHostRegister", e));
        failed = true;
        break;
      }
      registered = at + len;
      ok = g.copy(m.get(), at, len, false);
    }
    ok = ok && g.record(1);
    if (ok) g.wait();
    const double s = seconds_since(t0);
    maker.join();
    if (!err.text().empty() || !g.error.empty())
      out.fail("rf_out_pieces", err.text() + g.error);
    else
      out.add("rf_out_pieces", s, n,
              "pages made at " + json_number(maker.made_at) + " s, register calls " +
                  json_number(register_s) + " s, " +
                  verify_windows(m.get(), src, n, window, o.threads));
    const auto u0 = clock_type::now();
    for (u64 at = 0; at < registered; at += step)
      check_cleanup(cudaHostUnregister(m.get() + at) == cudaSuccess, "cudaHostUnregister");
    out.add("rf_out_pieces_unregister", seconds_since(u0), registered);
    check_cleanup(m.unmap() == 0, "munmap");
    f.remove(out, "rf_out_pieces_unlink", n);
  }
  register_parallel_rows(out, o, src, g);
}

}  // namespace

int main(int argc, char** argv)
{
  options o = parse(argc, argv);
  utsname u{};
  const bool have_uname = ::uname(&u) == 0;
  if (o.machine.empty() && have_uname) o.machine = u.nodename;
  results out{o};
  struct sigaction sa {};
  sa.sa_handler = remove_file_and_die;
  ::sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM})
    if (::sigaction(sig, &sa, nullptr) != 0) out.note(errno_text("sigaction", errno));
  std::printf("mem_bench: machine %s, kernel %s, %llu bytes (%llu MiB), %u threads, dir %s\n",
              o.machine.c_str(), have_uname ? u.release : "?",
              static_cast<unsigned long long>(o.bytes),
              static_cast<unsigned long long>(o.bytes / mib), o.threads, o.dir.c_str());
  std::printf("%-30s %10s %9s  %s\n", "row", "seconds", "GB/s", "note");
  const u64 n = o.bytes;
  const unsigned tt = o.threads;
  // Each section's unexpected failure (a thread that cannot start, bad_alloc) is its FAILED row.
  auto section = [&](const char* name, auto&& body) {
    try {
      body();
    } catch (const std::exception& e) {
      out.fail(name, std::string{"exception: "} + e.what());
    }
  };

  // (1) first, as in the CLI: the first CUDA call creates the context
  auto t0 = clock_type::now();
  const cudaError_t init = cudaFree(nullptr);
  const double init_s = seconds_since(t0);
  const bool cuda = init == cudaSuccess;
  if (!cuda) {
    out.fail("cuda_init", cuda_text("cudaFree(0)", init) + "; CUDA rows skipped");
  } else {
    int dev = 0;
    cudaDeviceProp prop{};
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, dev);
    out.device = e == cudaSuccess ? prop.name : cuda_text("cudaGetDeviceProperties", e);
    out.add("cuda_init", init_s, 0,
            "cudaFree(0); device " + std::to_string(dev) + ": " + out.device);
  }

  out.note("THP enabled: " + first_line("/sys/kernel/mm/transparent_hugepage/enabled") +
           "; defrag: " + first_line("/sys/kernel/mm/transparent_hugepage/defrag"));
  const bool some_only = o.chase_only || o.register_only;
  if (!some_only) section("anon", [&] {  // (2) first touch of new anonymous memory
    anon_first_touch(out, "anon_small_1", n, 1, false, false);
    anon_first_touch(out, "anon_small_T", n, tt, false, false);
    anon_first_touch(out, "anon_huge_1", n, 1, true, false);
    anon_first_touch(out, "anon_huge_T", n, tt, true, false);
    anon_first_touch(out, "anon_huge_populate_T", n, tt, true, true);
  });

  // (3) the touched buffer the later rows copy from; its second memset is the bandwidth bound
  const long before_src = anon_huge_now();
  anon_map src{n, true};
  if (!src.error.empty()) {
    out.fail("anon_retouch_T", src.error + "; the rows after it need this buffer");
    return 1;
  }
  section("anon_retouch_T", [&] {
    parallel_memset(src.data, n, tt, 0x5a);
    const double s = timed_threads(tt, [&](unsigned t) {
      const auto [first, last] = share(n, t, tt);
      std::memset(src.data + first, 0x5a, last - first);
    });
    out.add("anon_retouch_T", s, n, anon_huge(before_src) + ", pages touched before");
  });
  // Host memory bandwidth, one thread and all: the bound of every staged or pageable copy.
  if (!some_only) section("memcpy", [&] {
    anon_map dst{n, true};
    if (!dst.error.empty()) return out.fail("memcpy_1", dst.error);
    parallel_memset(dst.data, n, tt, 0);
    for (const unsigned threads : {1U, tt}) {
      const double s = timed_threads(threads, [&](unsigned t) {
        const auto [first, last] = share(n, t, threads);
        std::memcpy(dst.data + first, src.data + first, last - first);
      });
      out.add(threads == 1 ? "memcpy_1" : "memcpy_T", s, n, "bytes copied, pages touched before");
    }
  });

  if (o.register_only) {
    if (!cuda) return out.fail("register", "no CUDA context (see cuda_init)"), 1;
    section("register", [&] { register_rows(out, o, src.data); });  // (8)
    return out.failed ? 1 : 0;
  }
  if (o.chase_only) {
  } else if (cuda) {
    section("cuda", [&] { cuda_rows(out, n, src.data); });  // (4)
  } else {
    out.note("CUDA rows skipped: no CUDA context (see cuda_init)");
  }
  if (!some_only) section("file", [&] { file_rows(out, o, src.data); });  // (5)
  section("chase", [&] { chase_rows(out, o, src.data); });                  // (6)
  return out.failed ? 1 : 0;
}
