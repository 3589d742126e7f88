// File I/O benchmark (issue 18): which way of moving a big file between the page cache or a local
// disk and host memory is fastest on a GPU host. One run times, on a test file of N bytes in DIR:
// reads by buffered pread on T threads and on one, mmap with faulting or populated copies,
// O_DIRECT pread and io_uring (when built with liburing); writes the same ways into a new file,
// its fsync timed apart; and a plain memcpy as the host-memory bound. Every read is checked
// against the file's known content and every written file is read back and checked: a wrong rate
// is worse than none. Memory is one anonymous, huge-page-advised, pre-touched buffer standing in
// for the pinned staging buffers.
//
//   io_bench --dir DIR [--bytes 4Gi] [--threads T] [--json FILE] [--drop-caches] [--machine NAME]
//            [--staging [--piece 32Mi] [--pieces 4] [--call 1Gi] [--link-gbps 50]] [--pages]
//
// --staging times instead the GPU staging's way with a file (pipeline/cuda/staging.hpp) without
// a GPU: the file read into --pieces rotating buffers of --piece bytes, each handed to a stand-in
// for the copy engine (a link of --link-gbps that holds a buffer for piece/rate after the
// previous copy; 0: no link), in calls of --call bytes (a fitting job's copy_in of one sorted
// piece); and the same backwards into a new output file (mapped, its pages made by a fallocate
// thread, in tmpfs, as the engine writes outputs). Two schemes each way: "per_piece", the one
// before piece_mover (one parallel read or write of 1 MiB blocks per piece, forked and joined
// per piece), and "mover" (pipeline/file_window.hpp: threads that keep every buffer in flight).
// Each scheme runs once checked (every piece against the file's content, the output read back),
// then timed unchecked.
//
// --pages times how the engine makes a new tmpfs output's pages (pipeline/file_window.hpp): 4 KiB
// pages by one fallocate thread, or 2 MiB pages (MADV_COLLAPSE) from 1, 2, 4, ... threads, each
// followed by the copy of the whole output into them through the engine's mapping.
//
// Case (a), a file in tmpfs or in the page cache: --dir /dev/shm, or a disk directory without
// --drop-caches (the file has just been written, so it is cached). Case (b), a file on disk and
// not in the cache: a disk directory with --drop-caches (as root, sync and drop_caches before
// every read; otherwise posix_fadvise(DONTNEED) on the file). Each read's note gives how much of
// the file was cached when it started (mincore), so the case a number belongs to is on record.
#include "bench/results_format.hpp"
#include "pipeline/file_window.hpp"

#include <gpusort/gpusort.hpp>

#include <omp.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#if GPUSORT_WITH_LIBURING
#include <liburing.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

// Linux >= 5.14; older C libraries lack the names (the kernel answers EINVAL, handled below).
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using gpusort::bench::json_string;

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = kib * 1024;
constexpr std::uint64_t gib = mib * 1024;
// Every method moves 4 MiB blocks: large enough that a syscall per block costs nothing, aligned
// for O_DIRECT, and what a staging pipeline would move at a time.
constexpr std::uint64_t block_bytes = 4 * mib;
// O_DIRECT needs offsets and lengths in whole logical blocks (512 or 4096 bytes): N is rounded
// down to this.
constexpr std::uint64_t direct_align = 4 * kib;
constexpr std::uint64_t huge_page = 2 * mib;

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string errno_text(const char* call, int err)
{
  return std::string{call} + ": " + std::strerror(err);
}

// The files a signal (a time limit's SIGTERM, ^C) must not leave behind: a handler can reach
// nothing but globals. Filled before the files are created.
char in_path_for_signal[4096];
char out_path_for_signal[4096];

void remove_files_and_die(int sig)
{
  if (in_path_for_signal[0] != '\0') ::unlink(in_path_for_signal);
  if (out_path_for_signal[0] != '\0') ::unlink(out_path_for_signal);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

struct options {
  std::string dir;
  std::uint64_t bytes{4 * gib};
  unsigned threads{std::max(1u, std::thread::hardware_concurrency())};
  std::string json;
  bool drop_caches{false};
  std::string machine;
  bool staging{false};
  bool pages{false};
  std::uint64_t piece{32 * mib};
  unsigned pieces{4};
  std::uint64_t call{gib};
  double link_gbps{50};
};

[[noreturn]] void usage(const std::string& why)
{
  std::fprintf(stderr,
               "io_bench: %s\nusage: io_bench --dir DIR [--bytes N] [--threads T] [--json FILE] "
               "[--drop-caches] [--machine NAME]\n"
               "       [--staging [--piece 32Mi] [--pieces 4] [--call 1Gi] [--link-gbps 50]]\n"
               "       [--pages]\n"
               "  N: bytes, default 4Gi; k/M/G/T are powers of 1000 and Ki/Mi/Gi/Ti powers of "
               "1024,\n  as in gpusort's other tools. T: default the hardware threads.\n",
               why.c_str());
  std::exit(64);
}

/// digits [K|k|M|G|T [i]] [B]: the grammar of gpusort's parse_bytes (integers only), so that
/// sizes read the same here as in the service's configuration. nullopt when malformed or too big.
std::optional<std::uint64_t> parse_bytes(std::string_view text)
{
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view rest = text.substr(i);
  if (rest.empty() || rest == "B") return value;
  int power = 0;
  switch (rest[0]) {
    case 'k':
    case 'K': power = 1; break;
    case 'M': power = 2; break;
    case 'G': power = 3; break;
    case 'T': power = 4; break;
    default: return std::nullopt;
  }
  rest.remove_prefix(1);
  std::uint64_t base = 1000;
  if (!rest.empty() && rest[0] == 'i') {
    base = 1024;
    rest.remove_prefix(1);
  }
  if (!rest.empty() && rest != "B") return std::nullopt;
  for (int p = 0; p < power; ++p) {
    if (value > std::numeric_limits<std::uint64_t>::max() / base) return std::nullopt;
    value *= base;
  }
  return value;
}

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) usage("missing value after " + std::string{a});
      return argv[++i];
    };
    if (a == "--dir") {
      o.dir = std::string{next()};
    } else if (a == "--bytes") {
      const auto b = parse_bytes(next());
      if (!b || *b < direct_align) usage("bad --bytes (at least 4096)");
      o.bytes = *b;
    } else if (a == "--threads") {
      const auto t = parse_bytes(next());
      if (!t || *t == 0 || *t > 4096) usage("bad --threads (1 to 4096)");
      o.threads = static_cast<unsigned>(*t);
    } else if (a == "--json") {
      o.json = std::string{next()};
    } else if (a == "--drop-caches") {
      o.drop_caches = true;
    } else if (a == "--machine") {
      o.machine = std::string{next()};
    } else if (a == "--staging") {
      o.staging = true;
    } else if (a == "--pages") {
      o.pages = true;
    } else if (a == "--piece" || a == "--call") {
      const auto b = parse_bytes(next());
      if (!b || *b == 0) usage("bad " + std::string{a} + " (bytes, more than 0)");
      (a == "--piece" ? o.piece : o.call) = *b;
    } else if (a == "--pieces") {
      const auto k = parse_bytes(next());
      if (!k || *k == 0 || *k > 64) usage("bad --pieces (1 to 64)");
      o.pieces = static_cast<unsigned>(*k);
    } else if (a == "--link-gbps") {
      const std::string text{next()};
      char* end = nullptr;
      o.link_gbps = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(o.link_gbps >= 0))
        usage("bad --link-gbps (GB/s, 0 for no link)");
    } else {
      usage("unknown argument " + std::string{a});
    }
  }
  if (o.dir.empty()) usage("--dir is required");
  if (o.staging && o.pages) usage("--staging and --pages are separate runs");
  return o;
}

std::string fs_name(long type)
{
  switch (static_cast<unsigned long>(type)) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x794c7630: return "overlay";
    case 0x9123683E: return "btrfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(type));
      return hex;
    }
  }
}

// The file's content is a function of the offset, so any block of the buffer or of a written
// file can be checked on its own, in parallel, without a second copy: word i is splitmix64(i).
std::uint64_t pattern_word(std::uint64_t i)
{
  std::uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Fills len bytes at p with the pattern of file offset off (both multiples of 8).
void fill_pattern(char* p, std::uint64_t off, std::uint64_t len)
{
  for (std::uint64_t k = 0; k < len; k += 8) {
    const std::uint64_t w = pattern_word((off + k) / 8);
    std::memcpy(p + k, &w, 8);
  }
}

/// The file offset of the first word at p (holding file offset off) that is not the pattern.
std::optional<std::uint64_t> find_mismatch(const char* p, std::uint64_t off, std::uint64_t len)
{
  for (std::uint64_t k = 0; k < len; k += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + k, 8);
    if (w != pattern_word((off + k) / 8)) return off + k;
  }
  return std::nullopt;
}

/// Runs body(t) for t in [0, count) on count threads and joins them all, also when starting
/// one throws (the exception then goes on to the method's caller).
template <class F>
void run_threads(unsigned count, F&& body)
{
  std::vector<std::thread> pool;
  pool.reserve(count);
  try {
    for (unsigned t = 0; t < count; ++t) pool.emplace_back(body, t);
  } catch (...) {
    for (std::thread& th : pool) th.join();
    throw;
  }
  for (std::thread& th : pool) th.join();
}

/// Block-cyclic split: block b to thread b % threads, the last block shorter. The threads move
/// through the file together, one front that readahead and the disk see as one sequential
/// stream, rather than T streams far apart. Stops when f returns false.
template <class F>
void for_each_block(std::uint64_t n, unsigned t, unsigned threads, F&& f)
{
  for (std::uint64_t off = t * block_bytes; off < n; off += threads * block_bytes)
    if (!f(off, std::min(block_bytes, n - off))) return;
}

// The first failure among a method's threads: the others stop at their next block, and the
// method's note gives this one.
class first_error {
 public:
  void set(std::string text)
  {
    const std::lock_guard lock{mutex_};
    if (failed_.exchange(true)) return;
    text_ = std::move(text);
  }
  void set_errno(const char* call, int err) { set(errno_text(call, err)); }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  std::string text() const
  {
    const std::lock_guard lock{mutex_};
    return text_;
  }

 private:
  mutable std::mutex mutex_;
  std::atomic<bool> failed_{false};
  std::string text_;
};

class unique_fd {
 public:
  explicit unique_fd(int fd) : fd_{fd} {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd()
  {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  /// Closes now, for the methods whose time includes the close and that must see its error.
  int close()
  {
    const int fd = std::exchange(fd_, -1);
    return ::close(fd);
  }

 private:
  int fd_;
};

class unique_map {
 public:
  unique_map(void* p, std::uint64_t len) : p_{p}, len_{len} {}
  unique_map(const unique_map&) = delete;
  unique_map& operator=(const unique_map&) = delete;
  ~unique_map()
  {
    if (p_ != MAP_FAILED) ::munmap(p_, len_);
  }
  char* get() const { return static_cast<char*>(p_); }
  int unmap()
  {
    void* p = std::exchange(p_, MAP_FAILED);
    return ::munmap(p, len_);
  }

 private:
  void* p_;
  std::uint64_t len_;
};

/// Anonymous memory aligned to 2 MiB and advised MADV_HUGEPAGE (as cudaHostAlloc'd memory would
/// be backed), then touched by all threads so that no page fault lands in a timed region.
class anon_buffer {
 public:
  anon_buffer(std::uint64_t bytes, unsigned threads)
      : total_{(bytes + huge_page - 1) / huge_page * huge_page + huge_page}, bytes_{bytes}
  {
    base_ = ::mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) {
      error_ = errno_text("mmap", errno);
      return;
    }
    const auto addr = reinterpret_cast<std::uintptr_t>(base_);
    data_ = static_cast<char*>(base_) + ((huge_page - addr % huge_page) % huge_page);
    if (::madvise(data_, total_ - huge_page, MADV_HUGEPAGE) != 0)
      hugepage_note_ = errno_text("madvise(MADV_HUGEPAGE)", errno) + " (small pages)";
    run_threads(threads, [&](unsigned t) {
      for_each_block(bytes_, t, threads, [&](std::uint64_t off, std::uint64_t len) {
        std::memset(data_ + off, 0, len);
        return true;
      });
    });
  }
  anon_buffer(const anon_buffer&) = delete;
  anon_buffer& operator=(const anon_buffer&) = delete;
  ~anon_buffer()
  {
    if (base_ != MAP_FAILED) ::munmap(base_, total_);
  }
  char* data() const { return data_; }
  const std::string& error() const { return error_; }
  const std::string& hugepage_note() const { return hugepage_note_; }

 private:
  std::uint64_t total_;
  std::uint64_t bytes_;
  void* base_{MAP_FAILED};
  char* data_{nullptr};
  std::string error_;
  std::string hugepage_note_;
};

void parallel_memset(char* p, std::uint64_t n, unsigned threads)
{
  run_threads(threads, [&](unsigned t) {
    for_each_block(n, t, threads, [&](std::uint64_t off, std::uint64_t len) {
      std::memset(p + off, 0, len);
      return true;
    });
  });
}

/// The first file offset where p[0, n) differs from the pattern, checked on all threads.
std::optional<std::uint64_t> check_buffer(const char* p, std::uint64_t n, unsigned threads)
{
  std::vector<std::uint64_t> first(threads, std::numeric_limits<std::uint64_t>::max());
  run_threads(threads, [&](unsigned t) {
    for_each_block(n, t, threads, [&](std::uint64_t off, std::uint64_t len) {
      const auto bad = find_mismatch(p + off, off, len);
      if (bad) first[t] = *bad;
      return !bad;
    });
  });
  const std::uint64_t bad = *std::min_element(first.begin(), first.end());
  if (bad == std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
  return bad;
}

bool pread_full(int fd, char* p, std::uint64_t len, std::uint64_t off, first_error& err)
{
  while (len > 0) {
    const ssize_t r = ::pread(fd, p, len, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      err.set_errno("pread", errno);
      return false;
    }
    if (r == 0) {
      err.set("pread: end of file at byte " + std::to_string(off));
      return false;
    }
    const auto got = static_cast<std::uint64_t>(r);
    p += got;
    off += got;
    len -= got;
  }
  return true;
}

bool pwrite_full(int fd, const char* p, std::uint64_t len, std::uint64_t off, first_error& err)
{
  while (len > 0) {
    const ssize_t r = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      err.set_errno("pwrite", errno);
      return false;
    }
    if (r == 0) {  // would loop for ever
      err.set("pwrite: wrote nothing at byte " + std::to_string(off));
      return false;
    }
    const auto put = static_cast<std::uint64_t>(r);
    p += put;
    off += put;
    len -= put;
  }
  return true;
}

/// Reads the file at path back on all threads and checks it: its size and its content. An
/// empty string when it is right.
std::string check_file(const std::string& path, std::uint64_t n, unsigned threads)
{
  const unique_fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0) return errno_text("check: open", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_text("check: fstat", errno);
  if (static_cast<std::uint64_t>(st.st_size) != n)
    return "WRONG SIZE: " + std::to_string(st.st_size) + " bytes";
  first_error err;
  run_threads(threads, [&](unsigned t) {
    std::vector<char> scratch(block_bytes);
    for_each_block(n, t, threads, [&](std::uint64_t off, std::uint64_t len) {
      if (err.failed() || !pread_full(fd.get(), scratch.data(), len, off, err)) return false;
      if (const auto bad = find_mismatch(scratch.data(), off, len)) {
        err.set("WRONG DATA written from byte " + std::to_string(*bad));
        return false;
      }
      return true;
    });
  });
  return err.failed() ? "check: " + err.text() : std::string{};
}

/// How much of the file at path is in the page cache: mincore of a mapping, which faults
/// nothing in. Says whether a read ran in case (a) or (b); negative when unknown.
double cached_fraction(const std::string& path, std::uint64_t n)
{
  const unique_fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0) return -1;
  const unique_map map{::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd.get(), 0), n};
  if (map.get() == MAP_FAILED) return -1;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((n + page - 1) / page);
  if (::mincore(map.get(), n, resident.data()) != 0) return -1;
  const auto in_cache = std::count_if(resident.begin(), resident.end(),
                                      [](unsigned char r) { return (r & 1) != 0; });
  return static_cast<double>(in_cache) / static_cast<double>(resident.size());
}

// What the methods work on.
struct setup {
  std::string in_path;
  std::string out_path;
  char* buf{};
  std::uint64_t n{};
  unsigned threads{};
  bool populate{};  // MADV_POPULATE_READ/WRITE are there (Linux >= 5.14)
};

// One timed run of a method.
struct attempt {
  bool ok{true};
  std::string note;  // the failure, or what the method had to do differently
  double fallocate_seconds{-1};
};

attempt failure(std::string why)
{
  return {false, std::move(why), -1};
}

attempt from(const first_error& err, std::string note = {})
{
  if (err.failed()) return failure(err.text());
  return {true, std::move(note), -1};
}

/// O_DIRECT is refused with EINVAL where the file system has no direct I/O (tmpfs before 6.6).
attempt open_failure(int err, bool direct)
{
  if (direct && err == EINVAL) return failure("unsupported: " + errno_text("open(O_DIRECT)", err));
  return failure(errno_text("open", err));
}

/// madvise over [p, p + len), again when a signal interrupts it.
int madvise_retry(char* p, std::uint64_t len, int advice)
{
  int rc;
  do rc = ::madvise(p, len, advice);
  while (rc != 0 && errno == EINTR);
  return rc;
}

attempt read_pread(const setup& s, unsigned threads, bool direct)
{
  unique_fd fd{::open(s.in_path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0))};
  if (fd.get() < 0) return open_failure(errno, direct);
  first_error err;
  run_threads(threads, [&](unsigned t) {
    for_each_block(s.n, t, threads, [&](std::uint64_t off, std::uint64_t len) {
      return !err.failed() && pread_full(fd.get(), s.buf + off, len, off, err);
    });
  });
  if (fd.close() != 0) err.set_errno("close", errno);
  return from(err);
}

/// Every thread populates its blocks of the mapping (when asked: MADV_POPULATE_WRITE for a
/// write, _READ for a read), then copies them between the mapping and the buffer.
void copy_mapped(const setup& s, char* map, bool populate, bool to_map, first_error& err)
{
  const int advice = to_map ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;
  const char* advice_name = to_map ? "madvise(MADV_POPULATE_WRITE)" : "madvise(MADV_POPULATE_READ)";
  run_threads(s.threads, [&](unsigned t) {
    if (populate)
      for_each_block(s.n, t, s.threads, [&](std::uint64_t off, std::uint64_t len) {
        if (err.failed()) return false;
        if (madvise_retry(map + off, len, advice) == 0) return true;
        err.set_errno(advice_name, errno);
        return false;
      });
    for_each_block(s.n, t, s.threads, [&](std::uint64_t off, std::uint64_t len) {
      if (err.failed()) return false;
      if (to_map)
        std::memcpy(map + off, s.buf + off, len);
      else
        std::memcpy(s.buf + off, map + off, len);
      return true;
    });
  });
}

attempt read_mmap(const setup& s, bool populate)
{
  unique_fd fd{::open(s.in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0) return open_failure(errno, false);
  // Without MADV_POPULATE_READ, MAP_POPULATE populates the whole mapping, on one thread, in mmap.
  const bool map_populate = populate && !s.populate;
  unique_map map{::mmap(nullptr, s.n, PROT_READ, MAP_SHARED | (map_populate ? MAP_POPULATE : 0),
                        fd.get(), 0),
                 s.n};
  if (map.get() == MAP_FAILED) return failure(errno_text("mmap", errno));
  first_error err;
  copy_mapped(s, map.get(), populate && s.populate, false, err);
  if (map.unmap() != 0) err.set_errno("munmap", errno);
  if (fd.close() != 0) err.set_errno("close", errno);
  return from(err, map_populate ? "MADV_POPULATE_READ unsupported: MAP_POPULATE (one thread)" : "");
}

attempt write_pwrite(const setup& s, unsigned threads, bool preallocate, bool direct)
{
  unique_fd fd{::open(s.out_path.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600)};
  if (fd.get() < 0) return open_failure(errno, direct);
  double fallocate_seconds = -1;
  if (preallocate) {
    const auto t0 = clock_type::now();
    const int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(s.n));  // returns the error
    fallocate_seconds = seconds_since(t0);
    if (rc != 0) return failure(errno_text("posix_fallocate", rc));
  }
  first_error err;
  run_threads(threads, [&](unsigned t) {
    for_each_block(s.n, t, threads, [&](std::uint64_t off, std::uint64_t len) {
      return !err.failed() && pwrite_full(fd.get(), s.buf + off, len, off, err);
    });
  });
  if (fd.close() != 0) err.set_errno("close", errno);
  attempt a = from(err);
  a.fallocate_seconds = fallocate_seconds;
  return a;
}

attempt write_mmap(const setup& s, bool populate)
{
  unique_fd fd{::open(s.out_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (fd.get() < 0) return open_failure(errno, false);
  if (::ftruncate(fd.get(), static_cast<off_t>(s.n)) != 0)
    return failure(errno_text("ftruncate", errno));
  unique_map map{::mmap(nullptr, s.n, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0), s.n};
  if (map.get() == MAP_FAILED) return failure(errno_text("mmap", errno));
  first_error err;
  copy_mapped(s, map.get(), populate && s.populate, true, err);
  if (map.unmap() != 0) err.set_errno("munmap", errno);
  if (fd.close() != 0) err.set_errno("close", errno);
  return from(err, populate && !s.populate ? "MADV_POPULATE_WRITE unsupported: faulting writes"
                                           : "");
}

#if GPUSORT_WITH_LIBURING
/// Requests in flight per ring: about 64 in all, enough to keep an NVMe disk's queues busy.
unsigned uring_depth(unsigned threads)
{
  return std::max(4u, 64u / threads);
}

// One ring per thread, each over its blocks of the block-cyclic split with up to uring_depth
// 4 MiB requests in flight. Per-thread rather than one ring because a buffered read of cached
// pages is copied inline by the submitting thread: one ring would be a one-thread memcpy in
// case (a). Short transfers are resubmitted for the rest.
attempt uring_io(const setup& s, bool write, bool direct)
{
  const int flags = (write ? O_WRONLY | O_CREAT | O_EXCL : O_RDONLY) | O_CLOEXEC |
                    (direct ? O_DIRECT : 0);
  unique_fd fd{::open((write ? s.out_path : s.in_path).c_str(), flags, 0600)};
  if (fd.get() < 0) return open_failure(errno, direct);
  const unsigned depth = uring_depth(s.threads);
  const char* what = write ? "io_uring write" : "io_uring read";
  first_error err;
  run_threads(s.threads, [&](unsigned t) {
    io_uring ring;
    const int rc = ::io_uring_queue_init(depth, &ring, 0);
    if (rc < 0) {
      err.set_errno("io_uring_queue_init", -rc);
      return;
    }
    struct request {
      std::uint64_t off, len, done;
    };
    std::vector<request> requests(depth);
    std::vector<request*> idle;
    for (request& q : requests) idle.push_back(&q);
    auto queue = [&](request& q) {
      // Never null: the ring has depth entries and at most depth requests exist.
      io_uring_sqe* sqe = ::io_uring_get_sqe(&ring);
      char* p = s.buf + q.off + q.done;
      const auto len = static_cast<unsigned>(q.len - q.done);
      if (write)
        ::io_uring_prep_write(sqe, fd.get(), p, len, q.off + q.done);
      else
        ::io_uring_prep_read(sqe, fd.get(), p, len, q.off + q.done);
      ::io_uring_sqe_set_data(sqe, &q);
    };
    unsigned in_flight = 0;
    std::uint64_t next = t * block_bytes;
    while (true) {
      while (!err.failed() && next < s.n && !idle.empty()) {
        request& q = *idle.back();
        idle.pop_back();
        q = {next, std::min(block_bytes, s.n - next), 0};
        queue(q);
        ++in_flight;
        next += s.threads * block_bytes;
      }
      if (in_flight == 0) break;
      const int submitted = ::io_uring_submit(&ring);
      if (submitted < 0 && submitted != -EINTR && submitted != -EAGAIN) {
        err.set_errno("io_uring_submit", -submitted);
        break;  // queue_exit below cancels what is in flight
      }
      io_uring_cqe* cqe = nullptr;
      const int waited = ::io_uring_wait_cqe(&ring, &cqe);
      if (waited == -EINTR) continue;
      if (waited < 0) {
        err.set_errno("io_uring_wait_cqe", -waited);
        break;
      }
      do {
        request& q = *static_cast<request*>(::io_uring_cqe_get_data(cqe));
        const int res = cqe->res;
        ::io_uring_cqe_seen(&ring, cqe);
        if (res == -EINTR || res == -EAGAIN) {
          queue(q);
        } else if (res <= 0) {
          if (res < 0)
            err.set_errno(what, -res);
          else
            err.set(std::string{what} + ": nothing moved at byte " +
                    std::to_string(q.off + q.done));
          --in_flight;
          idle.push_back(&q);
        } else {
          q.done += static_cast<std::uint64_t>(res);
          if (q.done < q.len) {
            queue(q);
          } else {
            --in_flight;
            idle.push_back(&q);
          }
        }
      } while (::io_uring_peek_cqe(&ring, &cqe) == 0);
    }
    ::io_uring_queue_exit(&ring);
  });
  if (fd.close() != 0) err.set_errno("close", errno);
  return from(err, std::to_string(s.threads) + " rings of depth " + std::to_string(depth));
}
#endif

// One line of the table.
struct result {
  result(std::string m, std::string d, std::uint64_t b)
      : method{std::move(m)}, direction{std::move(d)}, bytes{b}
  {
  }
  std::string method;
  std::string direction;  // read, write or memory
  std::uint64_t bytes{};
  double seconds{-1};  // the best run; negative when the method failed
  double fsync_seconds{-1};
  double fallocate_seconds{-1};
  std::string note;
  bool verified{false};
};

double gbps(std::uint64_t bytes, double seconds)
{
  return static_cast<double>(bytes) / seconds / 1e9;
}

// Runs each method (best of `repetitions`), checks what it moved and keeps the results.
class runner {
 public:
  runner(const setup& s, int repetitions, bool drop_caches, std::vector<std::string>& notes)
      : s_{s}, repetitions_{repetitions}, drop_caches_{drop_caches}, notes_{notes}
  {
  }

  void memory(const char* name, unsigned threads, char* dst, std::uint64_t bytes)
  {
    result r{name, "memory", bytes};
    for (int rep = 0; rep < repetitions_; ++rep) {
      parallel_memset(dst, bytes, s_.threads);
      const auto t0 = clock_type::now();
      run_threads(threads, [&](unsigned t) {
        for_each_block(bytes, t, threads, [&](std::uint64_t off, std::uint64_t len) {
          std::memcpy(dst + off, s_.buf + off, len);
          return true;
        });
      });
      const double seconds = seconds_since(t0);
      if (const auto bad = check_buffer(dst, bytes, s_.threads)) {
        r.seconds = -1;
        r.note = "WRONG DATA from byte " + std::to_string(*bad);
        break;
      }
      r.verified = true;
      if (r.seconds < 0 || seconds < r.seconds) r.seconds = seconds;
    }
    if (r.verified) r.note = "bytes copied per second (each read once and written once)";
    finish(std::move(r));
  }

  void read(const char* name, const std::function<attempt()>& method)
  {
    result r{name, "read", s_.n};
    std::string cached;
    for (int rep = 0; rep < repetitions_; ++rep) {
      // Zeroed first, so that a method that moves nothing fails the check.
      parallel_memset(s_.buf, s_.n, s_.threads);
      if (drop_caches_) drop_caches();
      const double fraction = cached_fraction(s_.in_path, s_.n);
      const auto t0 = clock_type::now();
      const attempt a = guarded(method);
      const double seconds = seconds_since(t0);
      if (!a.ok) {
        r.seconds = -1;
        r.note = a.note;
        break;
      }
      if (const auto bad = check_buffer(s_.buf, s_.n, s_.threads)) {
        r.seconds = -1;
        r.note = "WRONG DATA read from byte " + std::to_string(*bad);
        break;
      }
      r.verified = true;
      if (r.seconds < 0 || seconds < r.seconds) {
        r.seconds = seconds;
        r.note = a.note;
        cached = fraction < 0 ? "cached: unknown" : "cached " + percent(fraction) + " at start";
      }
    }
    if (r.seconds >= 0) r.note = join(r.note, cached);
    finish(std::move(r));
  }

  void write(const char* name, const std::function<attempt()>& method)
  {
    result r{name, "write", s_.n};
    for (int rep = 0; rep < repetitions_; ++rep) {
      remove_output();
      const auto t0 = clock_type::now();
      const attempt a = guarded(method);
      const double seconds = seconds_since(t0);
      if (!a.ok) {
        r.seconds = -1;
        r.note = a.note;
        break;
      }
      const auto t1 = clock_type::now();
      const std::string synced = sync_output();
      const double fsync_seconds = seconds_since(t1);
      const std::string wrong = synced.empty() ? check_file(s_.out_path, s_.n, s_.threads) : synced;
      if (!wrong.empty()) {
        r.seconds = -1;
        r.note = wrong;
        break;
      }
      r.verified = true;
      if (r.seconds < 0 || seconds < r.seconds) {
        r.seconds = seconds;
        r.fsync_seconds = fsync_seconds;
        r.fallocate_seconds = a.fallocate_seconds;
        r.note = a.note;
      }
    }
    remove_output();
    if (r.seconds >= 0) {
      char text[160];
      std::snprintf(text, sizeof text, "fsync %.3f s (%.2f GB/s with it)", r.fsync_seconds,
                    gbps(s_.n, r.seconds + r.fsync_seconds));
      r.note = join(r.note, text);
      if (r.fallocate_seconds >= 0) {
        std::snprintf(text, sizeof text, "posix_fallocate %.3f s of it", r.fallocate_seconds);
        r.note = join(r.note, text);
      }
    }
    finish(std::move(r));
  }

  /// A scheme of the GPU staging (--staging): once with `method(true)`, which checks what it
  /// moves (a write: the file read back), then timed with `method(false)`, best of the
  /// repetitions. The checked run is not timed: the checks cost more than the moves.
  void staged(const char* name, const char* direction, const std::function<attempt(bool)>& method)
  {
    const bool writing = std::string_view{direction} == "write";
    result r{name, direction, s_.n};
    if (writing) remove_output();
    attempt a = guarded([&] { return method(true); });
    if (a.ok && writing) {
      const std::string wrong = check_file(s_.out_path, s_.n, s_.threads);
      if (!wrong.empty()) a = failure(wrong);
    }
    if (!a.ok) {
      r.note = a.note;
      finish(std::move(r));
      return;
    }
    r.verified = true;
    for (int rep = 0; rep < repetitions_; ++rep) {
      if (writing) remove_output();
      const auto t0 = clock_type::now();
      a = guarded([&] { return method(false); });
      const double seconds = seconds_since(t0);
      if (!a.ok) {
        r.seconds = -1;
        r.note = a.note;
        break;
      }
      if (r.seconds < 0 || seconds < r.seconds) {
        r.seconds = seconds;
        r.note = a.note;
      }
    }
    if (writing) remove_output();
    finish(std::move(r));
  }

  /// A method that is not there on this build or host.
  void absent(const char* name, const char* direction, const char* why)
  {
    result r{name, direction, s_.n};
    r.note = why;
    finish(std::move(r));
  }

  const std::vector<result>& results() const { return results_; }

 private:
  static std::string join(const std::string& a, const std::string& b)
  {
    if (a.empty()) return b;
    if (b.empty()) return a;
    return a + "; " + b;
  }

  static std::string percent(double fraction)
  {
    char text[16];
    std::snprintf(text, sizeof text, "%.0f%%", fraction * 100);
    return text;
  }

  /// A method's exception (a thread that would not start, memory) is its failure, not the run's.
  static attempt guarded(const std::function<attempt()>& method)
  {
    try {
      return method();
    } catch (const std::exception& e) {
      return failure(std::string{"exception: "} + e.what());
    }
  }

  // sync; echo 3 > /proc/sys/vm/drop_caches, as root where /proc/sys is writable (not in every
  // container). posix_fadvise(DONTNEED) drops this file's clean pages for anyone, so it runs
  // either way: case (b) holds wherever the kernel allows it.
  void drop_caches()
  {
    ::sync();
    int err = 0;
    if (::geteuid() != 0) {
      err = EPERM;
    } else {
      const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
      if (fd < 0) {
        err = errno;
      } else {
        if (::write(fd, "3", 1) != 1) err = errno;
        if (::close(fd) != 0 && err == 0) err = errno;
      }
    }
    if (err != 0 && !drop_noted_) {
      drop_noted_ = true;
      const char* what = ::geteuid() != 0 ? "drop_caches (not root)" : "drop_caches";
      notes_.push_back(errno_text(what, err) +
                       "; dropped the file's pages with posix_fadvise(POSIX_FADV_DONTNEED)");
      std::fprintf(stderr, "io_bench: %s\n", notes_.back().c_str());
    }
    const unique_fd fd{::open(s_.in_path.c_str(), O_RDONLY | O_CLOEXEC)};
    const int rc = fd.get() < 0 ? errno : ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    if (rc != 0 && !fadvise_noted_) {
      fadvise_noted_ = true;
      notes_.push_back(errno_text("posix_fadvise(POSIX_FADV_DONTNEED)", rc));
      std::fprintf(stderr, "io_bench: %s\n", notes_.back().c_str());
    }
  }

  /// fsync of the written file through a new descriptor: the method's time ends at its close.
  std::string sync_output() const
  {
    unique_fd fd{::open(s_.out_path.c_str(), O_WRONLY | O_CLOEXEC)};
    if (fd.get() < 0) return errno_text("fsync: open", errno);
    if (::fsync(fd.get()) != 0) return errno_text("fsync", errno);
    if (fd.close() != 0) return errno_text("fsync: close", errno);
    return {};
  }

  void remove_output() const { ::unlink(s_.out_path.c_str()); }  // ENOENT is fine

  void finish(result r)
  {
    if (r.seconds >= 0)
      std::fprintf(stderr, "io_bench: %-28s %-6s %8.2f GB/s %8.3f s\n", r.method.c_str(),
                   r.direction.c_str(), gbps(r.bytes, r.seconds), r.seconds);
    else
      std::fprintf(stderr, "io_bench: %-28s %-6s %s\n", r.method.c_str(), r.direction.c_str(),
                   r.note.c_str());
    results_.push_back(std::move(r));
  }

  const setup& s_;
  int repetitions_;
  bool drop_caches_;
  std::vector<std::string>& notes_;
  bool drop_noted_{false};
  bool fadvise_noted_{false};
  std::vector<result> results_;
};

// ---- --staging: the GPU staging's schemes with a file, a stand-in for the copy engine ----

struct staging_options {
  std::uint64_t piece{};
  unsigned pieces{};
  std::uint64_t call{};
  double link_gbps{};
};

/// A copy engine as the staging sees it: a copy of piece i queued now ends piece/rate after the
/// copy before it ends (one engine per direction, copies in order), and the buffer is busy
/// until then. Rate 0: copies end at once.
class fake_link {
 public:
  fake_link(double gbps, std::size_t buffers) : gbps_{gbps}, done_at_(buffers) {}
  void issue(std::size_t i, std::uint64_t bytes)
  {
    if (gbps_ <= 0) return;
    const std::lock_guard lock{mutex_};
    const auto now = clock_type::now();
    busy_until_ = std::max(busy_until_, now) +
                  std::chrono::duration_cast<clock_type::duration>(
                      std::chrono::duration<double>(static_cast<double>(bytes) / (gbps_ * 1e9)));
    done_at_[i] = busy_until_;
  }
  void wait(std::size_t i) const
  {
    if (gbps_ <= 0) return;
    clock_type::time_point until;
    {
      const std::lock_guard lock{mutex_};
      until = done_at_[i];
    }
    std::this_thread::sleep_until(until);
  }
  void wait_all() const
  {
    for (std::size_t i = 0; i < done_at_.size(); ++i) wait(i);
  }

 private:
  double gbps_;
  mutable std::mutex mutex_;
  clock_type::time_point busy_until_{};
  std::vector<clock_type::time_point> done_at_;
};

/// The staging's pinned pieces, as anonymous memory touched beforehand.
struct staging_ring {
  staging_ring(const staging_options& o, unsigned threads) : memory{o.piece * o.pieces, threads}
  {
    for (unsigned i = 0; i < o.pieces; ++i) buffers.push_back(memory.data() + i * o.piece);
  }
  anon_buffer memory;
  std::vector<char*> buffers;
};

/// `body(at, bytes, first)` for each call of o.call bytes of the n: `first`, the buffer its first
/// piece goes to, turns on from call to call, as a staging's ring does.
template <typename Body>
void for_each_call(std::uint64_t n, const staging_options& o, Body&& body)
{
  std::uint64_t pieces = 0;
  for (std::uint64_t at = 0; at < n; at += o.call) {
    const std::uint64_t bytes = std::min(o.call, n - at);
    body(at, bytes, static_cast<std::size_t>(pieces % o.pieces));
    pieces += (bytes + o.piece - 1) / o.piece;
  }
}

/// Reads the input through the ring as staging::copy_in does, in calls of o.call bytes:
/// `mover` false, one host_read per piece (an OpenMP fork/join of 1 MiB preads, the scheme
/// before piece_mover); true, a piece_mover. `check`: every piece against the pattern.
attempt staged_read(const setup& s, const staging_options& o, bool mover, bool check)
{
  unique_fd fd{::open(s.in_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.get() < 0) return failure(errno_text("open", errno));
  const gpusort::file_array window{fd.get(), 0, s.n, s.in_path};
  const char* const src = static_cast<const char*>(window.data());
  staging_ring ring{o, s.threads};
  if (ring.memory.data() == nullptr) return failure(ring.memory.error());
  fake_link link{o.link_gbps, o.pieces};
  gpusort::detail::piece_mover movers{s.threads};
  std::optional<std::uint64_t> bad;
  const auto hand_on = [&](std::size_t i, std::uint64_t at, std::uint64_t len) {
    if (check && !bad) bad = find_mismatch(ring.buffers[i], at, len);
    link.issue(i, len);
  };
  for_each_call(s.n, o, [&](std::uint64_t call, std::uint64_t bytes, std::size_t first) {
    if (mover) {
      movers.read(src + call, bytes,
                  {.buffers = &ring.buffers, .piece_bytes = o.piece, .first = first},
                  [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
                    hand_on(i, call + off, len);
                  },
                  [&](std::size_t i) { link.wait(i); });
      return;
    }
    for (std::uint64_t off = 0, i = first; off < bytes; off += o.piece, i = (i + 1) % o.pieces) {
      const std::uint64_t len = std::min(o.piece, bytes - off);
      link.wait(i);
      gpusort::detail::host_read(ring.buffers[i], src + call + off, len);
      hand_on(i, call + off, len);
    }
  });
  link.wait_all();
  if (bad) return failure("WRONG DATA read from byte " + std::to_string(*bad));
  return {};
}

/// Writes a new output file through the ring as staging::copy_out does (same schemes); the
/// output is made, sized and (in tmpfs) mapped with its fallocate thread as the engine does at
/// a job's start. `check`: each piece holds the pattern when its copy is issued.
attempt staged_write(const setup& s, const staging_options& o, bool mover, bool check)
{
  unique_fd fd{::open(s.out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (fd.get() < 0) return failure(errno_text("open", errno));
  if (::ftruncate(fd.get(), static_cast<off_t>(s.n)) != 0)
    return failure(errno_text("ftruncate", errno));
  const gpusort::file_array window{fd.get(), 0, s.n, s.out_path};
  char* const dst = static_cast<char*>(window.data());
  const gpusort::detail::output_mappings mapped{{dst, s.n}};
  staging_ring ring{o, s.threads};
  if (ring.memory.data() == nullptr) return failure(ring.memory.error());
  fake_link link{o.link_gbps, o.pieces};
  gpusort::detail::piece_mover movers{s.threads};
  const auto issue = [&](std::size_t i, std::uint64_t at, std::uint64_t len) {
    if (check) fill_pattern(ring.buffers[i], at, len);
    link.issue(i, len);
  };
  for_each_call(s.n, o, [&](std::uint64_t call, std::uint64_t bytes, std::size_t first) {
    if (mover) {
      movers.write(dst + call, bytes,
                   {.buffers = &ring.buffers, .piece_bytes = o.piece, .first = first},
                   [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
                     issue(i, call + off, len);
                   },
                   [&](std::size_t i) { link.wait(i); });
      return;
    }
    // As copy_out: up to a ring of copies queued ahead, each piece written once it landed.
    const std::uint64_t count = (bytes + o.piece - 1) / o.piece;
    const std::uint64_t ahead = std::min<std::uint64_t>(count, o.pieces);
    const auto buffer = [&](std::uint64_t p) { return (first + p) % o.pieces; };
    const auto length = [&](std::uint64_t p) { return std::min(o.piece, bytes - p * o.piece); };
    for (std::uint64_t p = 0; p < ahead; ++p) issue(buffer(p), call + p * o.piece, length(p));
    for (std::uint64_t p = 0; p < count; ++p) {
      link.wait(buffer(p));
      gpusort::detail::host_write(dst + call + p * o.piece, ring.buffers[buffer(p)], length(p));
      if (p + ahead < count)
        issue(buffer(p + ahead), call + (p + ahead) * o.piece, length(p + ahead));
    }
  });
  if (fd.close() != 0) return failure(errno_text("close", errno));
  return {};
}

/// Fills the buffer with the file's content, the pattern, on all threads.
void fill_buffer(const setup& s)
{
  run_threads(s.threads, [&](unsigned t) {
    for_each_block(s.n, t, s.threads, [&](std::uint64_t off, std::uint64_t len) {
      fill_pattern(s.buf + off, off, len);
      return true;
    });
  });
}

/// Fills the buffer with the pattern and writes it to the input file on all threads, then syncs
/// it, so that its pages are clean and can be dropped. Not timed. An empty string on success.
std::string create_input(const setup& s)
{
  fill_buffer(s);
  unique_fd fd{::open(s.in_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (fd.get() < 0) return errno_text("open", errno);
  first_error err;
  run_threads(s.threads, [&](unsigned t) {
    for_each_block(s.n, t, s.threads, [&](std::uint64_t off, std::uint64_t len) {
      return !err.failed() && pwrite_full(fd.get(), s.buf + off, len, off, err);
    });
  });
  if (err.failed()) return err.text();
  if (::fsync(fd.get()) != 0) return errno_text("fsync", errno);
  if (fd.close() != 0) return errno_text("close", errno);
  return {};
}

/// MADV_POPULATE_READ/WRITE (Linux >= 5.14) on a page of anonymous memory: EINVAL where the
/// kernel does not know them.
bool populate_supported()
{
  const unique_map map{
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), 4096};
  if (map.get() == MAP_FAILED) return false;
  return ::madvise(map.get(), 4096, MADV_POPULATE_WRITE) == 0 &&
         ::madvise(map.get(), 4096, MADV_POPULATE_READ) == 0;
}

std::string json_number(double v, const char* format)
{
  if (!(v >= 0) || v > 1e300) return "null";
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

}  // namespace

/// The file methods: memcpy as the bound, then each read and each write.
void run_methods(runner& run, const setup& s, std::uint64_t n, const std::string& created)
{
  const unsigned threads = s.threads;

  {
    // The host-memory bound, from the pattern just written into the buffer. The second
    // buffer goes before the files' methods, which may want the memory (tmpfs, page cache).
    const std::uint64_t copy_bytes = std::min(n, 4 * gib);
    const anon_buffer copy{copy_bytes, threads};
    if (copy.data() == nullptr) {
      run.absent("memcpy_threads", "memory", copy.error().c_str());
      run.absent("memcpy_1", "memory", copy.error().c_str());
    } else {
      run.memory("memcpy_threads", threads, copy.data(), copy_bytes);
      run.memory("memcpy_1", 1, copy.data(), copy_bytes);
    }
  }

  const std::vector<std::pair<const char*, std::function<attempt()>>> reads{
      {"pread_threads", [&] { return read_pread(s, threads, false); }},
      {"pread_1", [&] { return read_pread(s, 1, false); }},
      {"mmap_memcpy", [&] { return read_mmap(s, false); }},
      {"mmap_populate_memcpy", [&] { return read_mmap(s, true); }},
      {"odirect_pread", [&] { return read_pread(s, threads, true); }},
#if GPUSORT_WITH_LIBURING
      {"io_uring_read", [&] { return uring_io(s, false, false); }},
      {"io_uring_read_direct", [&] { return uring_io(s, false, true); }},
#endif
  };
  for (const auto& [name, method] : reads) {
    if (created.empty())
      run.read(name, method);
    else
      run.absent(name, "read", "no input file");
  }
#if !GPUSORT_WITH_LIBURING
  run.absent("io_uring_read", "read", "not built (no static liburing)");
  run.absent("io_uring_read_direct", "read", "not built (no static liburing)");
#endif

  // A failed read leaves the buffer part zero: the writes start from the whole pattern again,
  // so that every written file can be checked.
  fill_buffer(s);
  ::unlink(s.in_path.c_str());  // frees the space (and, in tmpfs, the memory) for the writes
  run.write("pwrite_threads", [&] { return write_pwrite(s, threads, false, false); });
  run.write("fallocate_pwrite_threads", [&] { return write_pwrite(s, threads, true, false); });
  run.write("pwrite_1", [&] { return write_pwrite(s, 1, false, false); });
  run.write("mmap_populate_memcpy_write", [&] { return write_mmap(s, true); });
  run.write("mmap_memcpy_write", [&] { return write_mmap(s, false); });
  run.write("odirect_pwrite", [&] { return write_pwrite(s, threads, false, true); });
  // Extending O_DIRECT writes serialise on the inode lock in ext4 and xfs; into preallocated
  // blocks they need not: the way a writer of a known size would go.
  run.write("odirect_fallocate_pwrite", [&] { return write_pwrite(s, threads, true, true); });
#if GPUSORT_WITH_LIBURING
  run.write("io_uring_write", [&] { return uring_io(s, true, false); });
  run.write("io_uring_write_direct", [&] { return uring_io(s, true, true); });
#else
  run.absent("io_uring_write", "write", "not built (no static liburing)");
  run.absent("io_uring_write_direct", "write", "not built (no static liburing)");
#endif
}

/// --staging: the GPU staging's two schemes, reading then writing.
void run_staging(runner& run, const setup& s, const options& opt, const std::string& created,
                 std::vector<std::string>& notes)
{
  const unsigned threads = s.threads;
  // The old scheme's reads run on OpenMP's threads: as many as the mover's.
  omp_set_num_threads(static_cast<int>(threads));
  const staging_options so{.piece = opt.piece, .pieces = opt.pieces, .call = opt.call,
                           .link_gbps = opt.link_gbps};
  char text[200];
  std::snprintf(text, sizeof text,
                "staging: %u pieces of %llu bytes, calls of %llu bytes, link %.1f GB/s", so.pieces,
                static_cast<unsigned long long>(so.piece),
                static_cast<unsigned long long>(so.call), so.link_gbps);
  notes.emplace_back(text);
  for (const bool mover : {false, true}) {
    const char* name = mover ? "staging_mover" : "staging_per_piece";
    if (created.empty())
      run.staged(name, "read", [&](bool check) { return staged_read(s, so, mover, check); });
    else
      run.absent(name, "read", "no input file");
  }
  ::unlink(s.in_path.c_str());  // the space (in tmpfs, the memory) for the output
  for (const bool mover : {false, true})
    run.staged(mover ? "staging_mover" : "staging_per_piece", "write",
               [&](bool check) { return staged_write(s, so, mover, check); });
}

// ---- --pages: how the engine makes a new tmpfs output's pages ----

/// A new output of the pattern, written as the engine writes a tmpfs output
/// (pipeline/file_window.hpp): mapped, its pages made the given way from the start, then copied
/// in through the mapping once they all exist. The note gives both parts and how many bytes
/// were made as 2 MiB pages.
attempt made_pages_write(const setup& s, gpusort::detail::tmpfs_page_making making)
{
  unique_fd fd{::open(s.out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (fd.get() < 0) return failure(errno_text("open", errno));
  if (::ftruncate(fd.get(), static_cast<off_t>(s.n)) != 0)
    return failure(errno_text("ftruncate", errno));
  const gpusort::detail::tmpfs_page_making before = gpusort::detail::set_tmpfs_page_making(making);
  const std::uint64_t huge_before = gpusort::detail::tmpfs_huge_bytes_made();
  const auto t0 = clock_type::now();
  double made = 0, copied = 0;
  bool mapped = false;
  {
    gpusort::file_array window{fd.get(), 0, s.n, s.out_path};
    char* const dst = static_cast<char*>(window.data());
    mapped = window.prepare_output();
    if (mapped) {
      gpusort::detail::host_write(dst + s.n - 1, s.buf + s.n - 1, 1);  // waits for every page
      made = seconds_since(t0);
      gpusort::detail::host_write(dst, s.buf, s.n);
      copied = seconds_since(t0) - made;
    }
  }
  gpusort::detail::set_tmpfs_page_making(before);
  if (!mapped) return failure("not mapped (the engine maps outputs in tmpfs only): no pages made");
  if (fd.close() != 0) return failure(errno_text("close", errno));
  char text[160];
  std::snprintf(text, sizeof text, "pages made in %.3f s (%llu MiB as 2 MiB pages), copy %.3f s",
                made,
                static_cast<unsigned long long>(
                    (gpusort::detail::tmpfs_huge_bytes_made() - huge_before) / mib),
                copied);
  return {true, text, -1};
}

/// --pages: 4 KiB pages by one fallocate thread against 2 MiB pages from 1, 2, 4, ... makers (up
/// to --threads), each a new output.
void run_pages(runner& run, const setup& s)
{
  ::unlink(s.in_path.c_str());  // the space (in tmpfs, the memory) for the output
  run.staged("pages_fallocate", "write", [&](bool) {
    return made_pages_write(s, {.huge = false, .makers = 1});
  });
  const gpusort::detail::tmpfs_page_making engine = gpusort::detail::current_tmpfs_page_making();
  for (unsigned makers = 1; makers <= s.threads; makers *= 2) {
    for (const bool give_up : {true, false}) {
      const std::string name =
          "pages_huge_" + std::to_string(makers) + (give_up ? "" : "_never_giving_up");
      run.staged(name.c_str(), "write", [&](bool) {
        return made_pages_write(s, {.huge = true,
                                    .makers = makers,
                                    .give_up_below_gbps = give_up ? engine.give_up_below_gbps : 0});
      });
    }
  }
}

int main(int argc, char** argv)
{
  const options opt = parse(argc, argv);

  struct statvfs vfs {};
  struct statfs sfs {};
  if (::statvfs(opt.dir.c_str(), &vfs) != 0 || ::statfs(opt.dir.c_str(), &sfs) != 0)
    usage("--dir " + opt.dir + ": " + std::strerror(errno));
  const std::string fs = fs_name(static_cast<long>(sfs.f_type));

  std::FILE* json = nullptr;
  if (!opt.json.empty()) {
    // Opened now: a path that cannot be written is a bad argument, not a lost run.
    json = std::fopen(opt.json.c_str(), "w");
    if (json == nullptr) usage("--json " + opt.json + ": " + std::strerror(errno));
  }

  std::vector<std::string> notes;
  std::uint64_t n = opt.bytes;
  // The input and the output file exist together: each gets at most 40% of the free space.
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (n > free_bytes / 5 * 2) {
    n = free_bytes / 5 * 2;
    notes.push_back("--bytes " + std::to_string(opt.bytes) + " is more than 40% of the " +
                    std::to_string(free_bytes) + " bytes free in " + opt.dir + ": " +
                    std::to_string(n / direct_align * direct_align) + " bytes instead");
  }
  if (n % direct_align != 0) {
    if (n == opt.bytes)
      notes.push_back("--bytes rounded down to a multiple of 4096 (for O_DIRECT)");
    n = n / direct_align * direct_align;
  }
  if (n < direct_align) usage("--dir " + opt.dir + " has too little free space");

  const unsigned threads = opt.threads;
  const int repetitions = n <= gib ? 2 : 1;
  std::string machine = opt.machine;
  if (machine.empty()) {
    char host[256] = {};
    machine = ::gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
  }
  utsname uts{};
  const std::string kernel = ::uname(&uts) == 0 ? uts.release : "unknown";
  const bool root = ::geteuid() == 0;
#if GPUSORT_WITH_LIBURING
  const bool with_liburing = true;
#else
  const bool with_liburing = false;
#endif

  const anon_buffer buffer{n, threads};
  if (buffer.data() == nullptr) {
    std::fprintf(stderr, "io_bench: cannot allocate the %llu-byte buffer: %s\n",
                 static_cast<unsigned long long>(n), buffer.error().c_str());
    return 1;
  }
  if (!buffer.hugepage_note().empty()) notes.push_back(buffer.hugepage_note());

  setup s;
  s.in_path = opt.dir + "/io_bench." + std::to_string(::getpid()) + ".in";
  s.out_path = opt.dir + "/io_bench." + std::to_string(::getpid()) + ".out";
  s.buf = buffer.data();
  s.n = n;
  s.threads = threads;
  s.populate = populate_supported();
  if (!s.populate) notes.push_back("MADV_POPULATE_READ/WRITE unsupported by this kernel");
  std::snprintf(in_path_for_signal, sizeof in_path_for_signal, "%s", s.in_path.c_str());
  std::snprintf(out_path_for_signal, sizeof out_path_for_signal, "%s", s.out_path.c_str());
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, remove_files_and_die);

  std::printf("io_bench: %s on %s (%s), %llu bytes (%.2f GiB), %u threads, 4 MiB blocks, best of "
              "%d, kernel %s, %s, io_uring %s%s\n",
              machine.c_str(), opt.dir.c_str(), fs.c_str(), static_cast<unsigned long long>(n),
              static_cast<double>(n) / static_cast<double>(gib), threads, repetitions,
              kernel.c_str(), root ? "root" : "not root",
              with_liburing ? "built (static liburing)" : "not built",
              opt.drop_caches ? ", caches dropped before each read" : "");
  std::fflush(stdout);

  runner run{s, repetitions, opt.drop_caches, notes};
  try {
    const std::string created = create_input(s);
    if (!created.empty()) notes.push_back("cannot create the input file: " + created);

    if (opt.staging)
      run_staging(run, s, opt, created, notes);
    else if (opt.pages)
      run_pages(run, s);
    else
      run_methods(run, s, n, created);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_bench: %s\n", e.what());
    notes.push_back(std::string{"stopped early: "} + e.what());
  }
  ::unlink(s.in_path.c_str());
  ::unlink(s.out_path.c_str());

  std::printf("\n| method | direction | GB/s | seconds | note |\n"
              "| --- | --- | ---: | ---: | --- |\n");
  for (const result& r : run.results()) {
    if (r.seconds >= 0)
      std::printf("| %s | %s | %.2f | %.3f | %s |\n", r.method.c_str(), r.direction.c_str(),
                  gbps(r.bytes, r.seconds), r.seconds, r.note.c_str());
    else
      std::printf("| %s | %s | - | - | %s |\n", r.method.c_str(), r.direction.c_str(),
                  r.note.c_str());
  }
  for (const std::string& note : notes) std::printf("\nnote: %s", note.c_str());
  std::printf("%s", notes.empty() ? "" : "\n");

  if (json != nullptr) {
    std::string out = "{\"tool\":\"io_bench\",\"machine\":" + json_string(machine) +
                      ",\"dir\":" + json_string(opt.dir) + ",\"fs\":" + json_string(fs) +
                      ",\"kernel\":" + json_string(kernel) + ",\"bytes\":" + std::to_string(n) +
                      ",\"threads\":" + std::to_string(threads) +
                      ",\"repetitions\":" + std::to_string(repetitions) +
                      ",\"drop_caches\":" + (opt.drop_caches ? "true" : "false") +
                      ",\"root\":" + (root ? "true" : "false") + ",\"notes\":[";
    for (std::size_t i = 0; i < notes.size(); ++i)
      out += (i > 0 ? "," : "") + json_string(notes[i]);
    out += "],\"results\":[\n";
    const auto& results = run.results();
    for (std::size_t i = 0; i < results.size(); ++i) {
      const result& r = results[i];
      out += "  {\"method\":" + json_string(r.method) + ",\"direction\":" +
             json_string(r.direction) + ",\"bytes\":" + std::to_string(r.bytes) +
             ",\"gbps\":" + json_number(r.seconds > 0 ? gbps(r.bytes, r.seconds) : -1, "%.3f") +
             ",\"seconds\":" + json_number(r.seconds, "%.6f") +
             ",\"fsync_seconds\":" + json_number(r.fsync_seconds, "%.6f");
      if (r.fallocate_seconds >= 0)
        out += ",\"fallocate_seconds\":" + json_number(r.fallocate_seconds, "%.6f");
      out += std::string{",\"verified\":"} + (r.verified ? "true" : "false") +
             ",\"note\":" + json_string(r.note) + "}" + (i + 1 < results.size() ? "," : "") +
             "\n";
    }
    out += "]}\n";
    const bool written = std::fwrite(out.data(), 1, out.size(), json) == out.size();
    if (std::fclose(json) != 0 || !written) {
      std::fprintf(stderr, "io_bench: cannot write %s\n", opt.json.c_str());
      return 1;
    }
  }
  return 0;
}
