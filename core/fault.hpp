// Fault injection, counted as SQLite's test harness counts its mallocs: every CUDA runtime call
// (through GPUSORT_CUDA_TRY / GPUSORT_CHECK_LAUNCH, core/checks.hpp) and every host I/O call
// (through the wrappers of core/sys_io.hpp) is a *seam* of one class. A test arms a plan ("fail
// call N of class C", optionally "and every call of C after it", with the errno or cudaError_t
// to return) and sweeps N over every call a clean run made, so that each error path runs once.
//
// Zero cost when not armed: a seam is one relaxed atomic load. A process is armed only by a
// test through arm(), or by the environment variable GPUSORT_FAULT (parse() documents its
// form) for whole programs (the CLI, the daemon); nothing else arms it, and arming from the
// environment logs a warning, so a production user who never sets the variable cannot meet it.
//
// Internal: not installed, no CUDA header (host-only code such as service/ includes it).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::detail::fault {

/// The classes of calls. The CUDA classes come first, the host I/O classes after.
enum class site : std::uint8_t {
  device_alloc,   // cudaMalloc*
  pinned_alloc,   // cudaHostAlloc, cudaMallocHost
  host_register,  // cudaHostRegister
  copy,           // cudaMemcpy*, cudaMemset*
  launch,         // kernel launches (checked by GPUSORT_CHECK_LAUNCH), CUB calls, a host
                  // device's sort step (the CPU stand-in for a GPU's kernels)
  stream,         // cudaStream*
  event,          // cudaEvent*
  cuda_other,     // every other CUDA runtime call: device queries, cudaSetDevice, attributes
  open,           // open, openat
  read,           // read, pread
  write,          // write, pwrite
  mmap,           // mmap, mremap
  stat,           // fstat
  sync,           // fsync, fdatasync
  rename,         // rename
  exchange,       // renameat2(RENAME_EXCHANGE); EINVAL for good stands for a filesystem without it
  link,           // link, linkat
  truncate,       // ftruncate, fallocate, posix_fallocate
  memfd,          // memfd_create
  send,           // sendmsg on the daemon's socket
  recv,           // recvmsg on the daemon's socket
  none,           // not a seam (a status already returned by a call made elsewhere)
};
inline constexpr std::size_t site_count = static_cast<std::size_t>(site::none);
inline constexpr site first_io_site = site::open;

/// Which calls a plan counts toward its N: one class, or a group of them.
enum class scope : std::uint8_t { one, all, cuda, io };

struct plan {
  scope group = scope::all;
  site target = site::none;  // with group scope::one
  std::uint64_t nth = 0;     // the call that fails, from 1; 0 fails none and only counts
  bool sticky = false;       // every matching call after the nth fails too
  int error = 0;             // errno or cudaError_t to return; 0: the class's default
};

[[nodiscard]] std::string_view name_of(site s) noexcept;
[[nodiscard]] std::optional<site> site_named(std::string_view name) noexcept;
[[nodiscard]] constexpr bool is_cuda(site s) noexcept { return s < first_io_site; }

/// "CLASS:N[:sticky][:ERROR]" or "count": CLASS a class name above or all, cuda, io; ERROR an
/// errno name (EIO, ENOSPC, EINTR, ...) or a number (errno, or cudaError_t for CUDA classes).
/// Throws gpusort::invalid_argument naming what is wrong.
[[nodiscard]] plan parse(std::string_view spec);

/// At most this many plans at once, each counted on its own: a sticky one stands for what a
/// machine lacks (a filesystem without RENAME_EXCHANGE: "exchange:1:sticky:EINVAL") while
/// another fails the Nth call of what it then does.
inline constexpr std::size_t max_plans = 4;
/// Plans separated by commas, each as parse() reads it.
[[nodiscard]] std::vector<plan> parse_all(std::string_view spec);

/// Arms `p` and sets every counter to zero; disarm() stops counting and failing.
void arm(const plan& p) noexcept;
/// Arms every plan of `plans` (at most max_plans; the rest are ignored): a call fails when any
/// of them picks it, with the error of the first plan whose scope holds it.
void arm(const std::vector<plan>& plans) noexcept;
void disarm() noexcept;
/// Calls of class `s` made since arm() (failed ones included).
[[nodiscard]] std::uint64_t calls(site s) noexcept;
/// Calls made since arm() that `p`'s scope counts.
[[nodiscard]] std::uint64_t calls_in(const plan& p) noexcept;
/// Calls made to fail since arm().
[[nodiscard]] std::uint64_t injected() noexcept;
/// "open=3 read=12 ..." for the classes called since arm().
[[nodiscard]] std::string summary();

/// Arms for the scope of a test and disarms at its end.
class armed {
 public:
  explicit armed(const plan& p) noexcept { arm(p); }
  explicit armed(const std::vector<plan>& plans) noexcept { arm(plans); }
  ~armed() { disarm(); }
  armed(const armed&) = delete;
  armed& operator=(const armed&) = delete;
};

extern std::atomic<bool> armed_flag;
[[nodiscard]] bool hit_armed(site s) noexcept;

/// The seam: true when this call of class `s` is to fail.
[[nodiscard]] inline bool hit(site s) noexcept
{
  if (!armed_flag.load(std::memory_order_relaxed)) [[likely]]
    return false;
  return hit_armed(s);
}

/// The errno or cudaError_t a failing call of class `s` returns: that of the first armed plan
/// whose scope holds `s`.
[[nodiscard]] int error_for(site s) noexcept;

/// Throws what a failing device step of class `s` on `device` throws: out_of_memory for an
/// allocation error, else cuda_error (a sticky status marks the device lost first).
[[noreturn]] void throw_device_fault(site s, std::string_view device);

/// The class of a CUDA runtime call, from its text (GPUSORT_CUDA_TRY's #call): constant-folded
/// at compile time, so a seam costs no string compare.
[[nodiscard]] constexpr site cuda_site(std::string_view call) noexcept
{
  const auto starts = [&](std::string_view prefix) { return call.starts_with(prefix); };
  if (starts("cub::") || starts("cudaPeekAtLastError") || starts("cudaGetLastError"))
    return site::launch;
  if (!starts("cuda")) return site::none;
  if (starts("cudaMallocHost") || starts("cudaHostAlloc")) return site::pinned_alloc;
  if (starts("cudaMalloc")) return site::device_alloc;
  if (starts("cudaHostRegister")) return site::host_register;
  if (starts("cudaMemcpy") || starts("cudaMemset")) return site::copy;
  if (starts("cudaStream")) return site::stream;
  if (starts("cudaEvent")) return site::event;
  // Releases are not seams: they run in destructors, which only log a failure, and a release
  // that was never made would be a leak of the harness's own making.
  if (starts("cudaFree") || starts("cudaHostUnregister")) return site::none;
  return site::cuda_other;
}

}  // namespace gpusort::detail::fault

namespace gpusort::detail {

/// Errors after which a CUDA context is unusable (the driver reports them to every later call
/// of the process): only a new process recovers, so a daemon that sees one exits for its
/// supervisor to restart it.
[[nodiscard]] constexpr bool is_sticky_cuda_error(int status) noexcept
{
  switch (status) {
    case 214:  // cudaErrorECCUncorrectable
    case 700:  // cudaErrorIllegalAddress
    case 702:  // cudaErrorLaunchTimeout
    case 709:  // cudaErrorContextIsDestroyed
    case 710:  // cudaErrorAssert
    case 714:  // cudaErrorHardwareStackError
    case 715:  // cudaErrorIllegalInstruction
    case 716:  // cudaErrorMisalignedAddress
    case 717:  // cudaErrorInvalidAddressSpace
    case 718:  // cudaErrorInvalidPc
    case 719:  // cudaErrorLaunchFailure
      return true;
    default: return false;
  }
}

/// Records a failed CUDA status (GPUSORT_CUDA_TRY calls it): a sticky one marks the process's
/// devices lost for good.
void note_cuda_error(int status) noexcept;
/// True once a sticky CUDA error was seen in this process.
[[nodiscard]] bool device_lost() noexcept;

/// The memory the pipeline holds now, per kind, so that tests can check that a failed job gave
/// everything back. Counted always: one relaxed atomic add per allocation and per release.
enum class held : std::uint8_t { host, pinned, device, registered, count_ };
void count_held(held kind, std::int64_t bytes) noexcept;
[[nodiscard]] std::int64_t bytes_held(held kind) noexcept;

}  // namespace gpusort::detail
