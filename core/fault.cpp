#include "core/fault.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::detail::fault {

std::atomic<bool> armed_flag{false};

namespace {

constexpr std::array<std::string_view, site_count> site_names{
    "device_alloc", "pinned_alloc", "host_register", "copy",     "launch", "stream", "event",
    "cuda_other",   "open",         "read",          "write",    "mmap",   "stat",   "sync",
    "rename",       "exchange",     "link",          "truncate", "memfd",  "send",   "recv"};

constexpr std::array<std::pair<std::string_view, int>, 21> errno_names{{
    {"EIO", EIO},       {"ENOSPC", ENOSPC}, {"EINTR", EINTR},   {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM}, {"EMFILE", EMFILE}, {"ENFILE", ENFILE}, {"EACCES", EACCES},
    {"EPERM", EPERM},   {"EROFS", EROFS},   {"EFBIG", EFBIG},   {"EDQUOT", EDQUOT},
    {"EBADF", EBADF},   {"EINVAL", EINVAL}, {"EPIPE", EPIPE},   {"ENOENT", ENOENT},
    {"EXDEV", EXDEV},   {"ECONNRESET", ECONNRESET},             {"ENODEV", ENODEV},
    {"ENOSYS", ENOSYS}, {"EOPNOTSUPP", EOPNOTSUPP},
}};

// The plans in atomics: a seam on any thread reads them while a test may re-arm between jobs.
struct armed_plan {
  std::atomic<std::uint8_t> group{0};
  std::atomic<std::uint8_t> target{0};
  std::atomic<std::uint64_t> nth{0};
  std::atomic<bool> sticky{false};
  std::atomic<int> error{0};
  std::atomic<std::uint64_t> matching{0};  // calls in the plan's scope
};
std::array<armed_plan, max_plans> plans{};
std::atomic<std::size_t> plan_count{0};

std::array<std::atomic<std::uint64_t>, site_count> counters{};
std::atomic<std::uint64_t> failed{0};

bool in_scope(scope g, site target, site s) noexcept
{
  switch (g) {
    case scope::one: return s == target;
    case scope::all: return true;
    case scope::cuda: return is_cuda(s);
    case scope::io: return !is_cuda(s);
  }
  return false;
}

int default_error(site s, bool sticky) noexcept
{
  switch (s) {
    case site::device_alloc:
    case site::pinned_alloc:
    case site::host_register: return 2;  // cudaErrorMemoryAllocation
    case site::open:
    case site::memfd: return EMFILE;
    case site::mmap: return ENOMEM;
    case site::truncate: return ENOSPC;
    case site::send: return EPIPE;
    case site::recv: return ECONNRESET;
    case site::read:
    case site::write:
    case site::stat:
    case site::sync:
    case site::rename:
    case site::exchange:
    case site::link: return EIO;
    default:
      // A sticky CUDA failure stands for a lost context: cudaErrorIllegalAddress, which the
      // driver then returns to every call; a single one for a call refused
      // (cudaErrorInvalidValue), after which the context is still good.
      return sticky ? 700 : 1;
  }
}

std::uint64_t parse_number(std::string_view text, std::string_view spec)
{
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size())
    throw invalid_argument{"fault plan '" + std::string{spec} + "': '" + std::string{text} +
                           "' is not a number"};
  return v;
}

// Arming from the environment happens before main, so that the CLI's and the daemon's very
// first calls are counted too; GPUSORT_FAULT_COUNTS=FILE writes the counts at exit, which is
// how a sweep learns how many calls a clean run of a whole program makes.
std::string counts_file;

void write_counts_at_exit()
{
  if (counts_file.empty()) return;
  if (std::FILE* f = std::fopen(counts_file.c_str(), "w")) {
    std::fputs((summary() + "\n").c_str(), f);
    std::fclose(f);
  }
}

[[maybe_unused]] const bool armed_from_environment = [] {
  const char* spec = std::getenv("GPUSORT_FAULT");
  if (spec == nullptr || *spec == '\0') return false;
  try {
    arm(parse_all(spec));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpusort: warning: GPUSORT_FAULT ignored: %s\n", e.what());
    return false;
  }
  if (const char* file = std::getenv("GPUSORT_FAULT_COUNTS"); file != nullptr) {
    counts_file = file;
    std::atexit(write_counts_at_exit);
  }
  std::fprintf(stderr, "gpusort: warning: fault injection armed by GPUSORT_FAULT=%s\n", spec);
  return true;
}();

}  // namespace

std::string_view name_of(site s) noexcept
{
  return s == site::none ? std::string_view{"none"} : site_names[static_cast<std::size_t>(s)];
}

std::optional<site> site_named(std::string_view name) noexcept
{
  for (std::size_t i = 0; i < site_count; ++i)
    if (site_names[i] == name) return static_cast<site>(i);
  return std::nullopt;
}

plan parse(std::string_view spec)
{
  const std::string whole{spec};
  if (spec == "count") return plan{};
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t colon = spec.find(':', at);
    parts.push_back(spec.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 4)
    throw invalid_argument{"fault plan '" + whole + "': expected CLASS:N[:sticky][:ERROR]"};
  plan p;
  if (parts[0] == "all") {
    p.group = scope::all;
  } else if (parts[0] == "cuda") {
    p.group = scope::cuda;
  } else if (parts[0] == "io") {
    p.group = scope::io;
  } else if (const auto s = site_named(parts[0])) {
    p.group = scope::one;
    p.target = *s;
  } else {
    throw invalid_argument{"fault plan '" + whole + "': unknown class '" +
                           std::string{parts[0]} + "'"};
  }
  p.nth = parse_number(parts[1], spec);
  std::size_t next = 2;
  if (next < parts.size() && parts[next] == "sticky") {
    p.sticky = true;
    ++next;
  }
  if (next < parts.size()) {
    const std::string_view e = parts[next++];
    p.error = -1;
    for (const auto& [n, v] : errno_names)
      if (n == e) p.error = v;
    if (p.error < 0) p.error = static_cast<int>(parse_number(e, spec));
  }
  if (next != parts.size())
    throw invalid_argument{"fault plan '" + whole + "': expected CLASS:N[:sticky][:ERROR]"};
  return p;
}

std::vector<plan> parse_all(std::string_view spec)
{
  std::vector<plan> out;
  for (std::size_t at = 0;;) {
    const std::size_t comma = spec.find(',', at);
    out.push_back(parse(spec.substr(at, comma == std::string_view::npos ? comma : comma - at)));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (out.size() > max_plans)
    throw invalid_argument{"fault plan '" + std::string{spec} + "': at most " +
                           std::to_string(max_plans) + " plans"};
  return out;
}

void arm(const plan& p) noexcept { arm(std::vector<plan>{p}); }

void arm(const std::vector<plan>& ps) noexcept
{
  armed_flag.store(false, std::memory_order_seq_cst);
  for (auto& c : counters) c.store(0, std::memory_order_relaxed);
  failed.store(0, std::memory_order_relaxed);
  const std::size_t count = std::min(ps.size(), max_plans);
  for (std::size_t i = 0; i < count; ++i) {
    armed_plan& a = plans[i];
    a.group.store(static_cast<std::uint8_t>(ps[i].group), std::memory_order_relaxed);
    a.target.store(static_cast<std::uint8_t>(ps[i].target), std::memory_order_relaxed);
    a.nth.store(ps[i].nth, std::memory_order_relaxed);
    a.sticky.store(ps[i].sticky, std::memory_order_relaxed);
    a.error.store(ps[i].error, std::memory_order_relaxed);
    a.matching.store(0, std::memory_order_relaxed);
  }
  plan_count.store(count, std::memory_order_relaxed);
  armed_flag.store(true, std::memory_order_seq_cst);
}

void disarm() noexcept { armed_flag.store(false, std::memory_order_seq_cst); }

bool hit_armed(site s) noexcept
{
  if (s == site::none) return false;
  counters[static_cast<std::size_t>(s)].fetch_add(1, std::memory_order_relaxed);
  bool fails = false;
  // Every plan in scope counts the call, also once an earlier plan already failed it.
  for (std::size_t i = 0; i < plan_count.load(std::memory_order_relaxed); ++i) {
    armed_plan& a = plans[i];
    const auto g = static_cast<scope>(a.group.load(std::memory_order_relaxed));
    if (!in_scope(g, static_cast<site>(a.target.load(std::memory_order_relaxed)), s)) continue;
    const std::uint64_t n = a.matching.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::uint64_t nth = a.nth.load(std::memory_order_relaxed);
    if (nth != 0 && (n == nth || (n > nth && a.sticky.load(std::memory_order_relaxed))))
      fails = true;
  }
  if (fails) failed.fetch_add(1, std::memory_order_relaxed);
  return fails;
}

int error_for(site s) noexcept
{
  const std::size_t count = plan_count.load(std::memory_order_relaxed);
  std::size_t i = 0;
  while (i + 1 < count &&
         !in_scope(static_cast<scope>(plans[i].group.load(std::memory_order_relaxed)),
                   static_cast<site>(plans[i].target.load(std::memory_order_relaxed)), s))
    ++i;
  const int e = plans[i].error.load(std::memory_order_relaxed);
  return e != 0 ? e : default_error(s, plans[i].sticky.load(std::memory_order_relaxed));
}

void throw_device_fault(site s, std::string_view device)
{
  const int status = error_for(s);
  note_cuda_error(status);
  const std::string message = "injected failure of a " + std::string{name_of(s)} +
                              " step on device " + std::string{device} + " (cudaError_t " +
                              std::to_string(status) + (device_lost() ? ", device lost)" : ")");
  if (status == 2) throw out_of_memory{message};  // cudaErrorMemoryAllocation
  throw cuda_error{message};
}

std::uint64_t calls(site s) noexcept
{
  return s == site::none ? 0 : counters[static_cast<std::size_t>(s)].load();
}

std::uint64_t calls_in(const plan& p) noexcept
{
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < site_count; ++i)
    if (in_scope(p.group, p.target, static_cast<site>(i))) n += counters[i].load();
  return n;
}

std::uint64_t injected() noexcept { return failed.load(); }

std::string summary()
{
  std::string out;
  for (std::size_t i = 0; i < site_count; ++i) {
    if (counters[i].load() == 0) continue;
    if (!out.empty()) out += ' ';
    out += std::string{site_names[i]} + "=" + std::to_string(counters[i].load());
  }
  return out;
}

}  // namespace gpusort::detail::fault

namespace gpusort::detail {

namespace {
std::atomic<bool> lost{false};
std::array<std::atomic<std::int64_t>, static_cast<std::size_t>(held::count_)> held_bytes{};
}  // namespace

void note_cuda_error(int status) noexcept
{
  if (is_sticky_cuda_error(status)) lost.store(true);
}

bool device_lost() noexcept { return lost.load(); }

void count_held(held kind, std::int64_t bytes) noexcept
{
  held_bytes[static_cast<std::size_t>(kind)].fetch_add(bytes, std::memory_order_relaxed);
}

std::int64_t bytes_held(held kind) noexcept
{
  return held_bytes[static_cast<std::size_t>(kind)].load();
}

}  // namespace gpusort::detail
