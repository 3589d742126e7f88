// What slows a sort beside a kernel that reads mapped host memory (issue 44): round 2's sort
// of a small budget's chunk takes 1.6x round 1's beside the gather kernel, and as long as
// round 1's when copy engines gather instead. Neither SM residency (s14) nor the gathered bytes
// in L2 (s15, evict-first hints) explained it. This bench times CUB's radix sort of one chunk
// (--keys u64) on a GPU alone and beside back-to-back gathers of --slices slices (round 2's
// table at 1/256 of 8 GiB: 1594 slices of 674K keys in all) from
//   device memory, mapped host memory in one compact block (a few pages), and mapped host memory
//   spread over --host-bytes (round 2's: every slice in another run),
// for host memory registered with huge pages advised, registered without them, and allocated
// by cudaHostAlloc. Spread against compact at the same read rate tells translations (the
// GPU's TLBs) from the reads themselves. Then, from registered memory with huge pages, the
// copy engines' gather (cudaMemcpyBatchAsync on 1 to 8 streams), the kernel on a quarter or
// half of the slices alone, and that kernel beside copies of the rest. Last, the GPU split by
// green contexts (CUDA 12.4's SM partitions, through the driver's entry points): the gather on
// 8, 16 or 32 SMs of its own and the sort on the rest, so that no sort block shares an SM with
// a gather block; if the sort then keeps its speed, what slowed it was its blocks on the
// gather's SMs holding up the rest (onesweep's look-back waits for its slowest tiles). It did
// not (h200x2-20261130-s16, call 2: 2.2-2.5x on its own SMs). So two ways round it, measured
// from registered memory with huge pages: the copy engines bringing a superset of the slices in
// one 2D copy (a row a slice, each row as wide as the slice times 1 to 2, at the runs' pitch:
// round 2's slices of uniform keys start near the same offset in every run), for the device to
// pick the slices out of; and the kernel writing the slices to mapped host memory instead of
// reading them (round 1 scattering its sorted chunk into buckets), the sort beside each.
// Prints one line a case; exit 1 on any CUDA failure.
#include "bench/bench_cli.hpp"
#include "bench/gpu_timing.hpp"
#include "bench/results_format.hpp"
#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <cub/device/device_radix_sort.cuh>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using gpusort::cuda::cuda_event;
using gpusort::cuda::cuda_stream;
using gpusort::cuda::device_buffer;
using gpusort::cuda::event_timing;
using gpusort::cuda::gather_slice;

struct options {
  std::uint64_t host_bytes = std::uint64_t{8} << 30;
  std::uint64_t keys = 674'000;
  std::uint64_t slices = 1594;
  int reps = 101;
  bool writes = false;
  gpusort::bench::results_options results;
};

constexpr const char* usage =
    "usage: beside_bench [--host-bytes 8Gi] [--keys 674000] [--slices 1594] [--reps 101]\n"
    "                    [--writes yes] [--json FILE] [--machine NAME] [--commit C]\n"
    "CUB's radix sort of --keys u64 alone and beside back-to-back gathers of --slices slices\n"
    "(as many keys in all) from device memory and mapped host memory, compact and spread over\n"
    "--host-bytes, for three kinds of host memory; median microseconds a sort of --reps.\n"
    "Then the copy engines' gather on 1 to 8 streams, the kernel beside copies, the copy\n"
    "engines' 2D copies of a superset of the slices, the kernel writing the slices to host\n"
    "memory, and the sort and the gather in green contexts of their own.\n"
    "--writes yes: only round 1's writes of a scattering round (round1_writes), for round 1's\n"
    "chunk at 1/256 and at the smallest budget of 8 GiB.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

/// Huge pages of anonymous memory the process holds now (kB, from smaps_rollup).
long anon_huge_kb()
{
  std::ifstream in{"/proc/self/smaps_rollup"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stol(line.substr(14));
  return -1;
}

/// Host memory of one kind, page-locked and mapped, as the bench reads it.
struct host_memory {
  std::string name;
  void* data{};
  std::uint64_t bytes{};
  bool mmapped{};
  std::unique_ptr<gpusort::cuda::host_registration> registration;
  std::unique_ptr<gpusort::cuda::pinned_buffer> allocated;

  host_memory(std::string n, std::uint64_t b, int kind) : name{std::move(n)}, bytes{b}
  {
    if (kind == 2) {
      allocated = std::make_unique<gpusort::cuda::pinned_buffer>(
          bytes, cudaHostAllocPortable | cudaHostAllocMapped);
      data = allocated->data();
    } else {
      data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (data == MAP_FAILED) throw std::runtime_error{"mmap failed"};
      mmapped = true;
      (void)::madvise(data, bytes, kind == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    }
    // Every page written, from every core, so that the registration pins what is there.
    auto* words = static_cast<std::uint64_t*>(data);
    const std::uint64_t count = bytes / 8;
    const unsigned threads = std::max(std::thread::hardware_concurrency(), 1U);
    std::vector<std::thread> writers;
    for (unsigned t = 0; t < threads; ++t)
      writers.emplace_back([=] {
        for (std::uint64_t i = count * t / threads; i < count * (t + 1) / threads; ++i)
          words[i] = i * 0x9E3779B97F4A7C15ULL;
      });
    for (std::thread& w : writers) w.join();
    if (mmapped)
      registration = std::make_unique<gpusort::cuda::host_registration>(
          data, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  }
  ~host_memory()
  {
    registration.reset();
    if (mmapped) ::munmap(data, bytes);
  }
  host_memory(const host_memory&) = delete;
  host_memory& operator=(const host_memory&) = delete;

  [[nodiscard]] const char* device_address() const
  {
    void* d = nullptr;
    GPUSORT_CUDA_TRY(cudaHostGetDevicePointer(&d, data, 0));
    return static_cast<const char*>(d);
  }
};

/// The gather table: `slices` slices making `keys` keys in all, from `base` (a device address)
/// of `span` bytes: compact (one after another) or spread (slice i in the i-th of `slices`
/// equal parts of the span, at a random place of it).
std::vector<gather_slice> table_of(const char* base, std::uint64_t span, std::uint64_t keys,
                                   std::uint64_t slices, bool spread)
{
  std::vector<gather_slice> t;
  std::mt19937_64 rng{42};
  std::uint64_t at = 0;
  const std::uint64_t part = span / 8 / slices;
  for (std::uint64_t i = 0; i < slices; ++i) {
    const std::uint64_t length = keys / slices + (i < keys % slices ? 1 : 0);
    std::uint64_t from = at;
    if (spread) from = i * part + rng() % (part - length);
    t.push_back({base + from * 8, length, at});
    at += length;
  }
  return t;
}

struct sorter {
  std::uint64_t n;
  device_buffer keys, alt, scratch;
  std::size_t scratch_bytes{};

  explicit sorter(std::uint64_t count) : n{count}, keys{count * 8}, alt{count * 8}
  {
    cub::DoubleBuffer<std::uint64_t> b{keys.data<std::uint64_t>(), alt.data<std::uint64_t>()};
    GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, scratch_bytes, b,
                                                    static_cast<int>(n)));
    scratch = device_buffer{scratch_bytes};
    std::vector<std::uint64_t> h(n);
    std::mt19937_64 rng{7};
    for (auto& x : h) x = rng();
    GPUSORT_CUDA_TRY(cudaMemcpy(keys.data(), h.data(), n * 8, cudaMemcpyHostToDevice));
  }

  /// Median seconds of `reps` sorts on `s` (the keys sorted again each time: a radix sort's
  /// time does not depend on their order).
  double median_seconds(cudaStream_t s, int reps)
  {
    return gpusort::bench::gpu_time_median(s, reps, nullptr, [&] {
      cub::DoubleBuffer<std::uint64_t> b{keys.data<std::uint64_t>(), alt.data<std::uint64_t>()};
      std::size_t bytes = scratch_bytes;
      GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(scratch.data(), bytes, b,
                                                      static_cast<int>(n), 0, 64, s));
    });
  }
};

/// Where a case's gathers and sorts run: their streams, and how each one's context is made
/// current while its events are made and recorded (green contexts; nothing to do otherwise).
struct placement {
  using in_context = std::function<void(const std::function<void()>&)>;
  cudaStream_t gather{}, sort{};
  in_context in_gather = [](const std::function<void()>& f) { f(); };
  in_context in_sort = [](const std::function<void()>& f) { f(); };
};

/// A case's times: one gather alone, one gather beside the sorts, one sort beside the gathers.
struct beside_times {
  double gather{}, gather_beside{}, sort_beside{};
};

/// `issue` queues one gather on the stream it is given: gathers alone, then the sort's median
/// of `reps` beside back-to-back gathers (`alone`: the sort's time without them).
beside_times measure_beside(const std::function<void(cudaStream_t)>& issue, sorter& sort,
                            int reps, double alone, const placement& where)
{
  beside_times t;
  where.in_gather([&] {
    const cudaStream_t gs = where.gather;
    cuda_event start{event_timing::enabled}, stop{event_timing::enabled};
    issue(gs);
    start.record(gs);
    constexpr int alone_gathers = 50;
    for (int i = 0; i < alone_gathers; ++i) issue(gs);
    stop.record(gs);
    stop.synchronize();
    t.gather = gpusort::cuda::elapsed_ms(start, stop) / 1e3 / alone_gathers;
    // Enough gathers to outlast the sorts and the waits between them, twice over.
    const int beside_gathers = static_cast<int>(2 * reps * (alone + 50e-6) / t.gather) + 20;
    start.record(gs);
    for (int i = 0; i < beside_gathers; ++i) issue(gs);
    stop.record(gs);
    where.in_sort([&] { t.sort_beside = sort.median_seconds(where.sort, reps); });
    stop.synchronize();
    t.gather_beside = gpusort::cuda::elapsed_ms(start, stop) / 1e3 / beside_gathers;
  });
  return t;
}

/// One line of the table and one JSON object (with `extra` fields, each ", \"name\": value").
void report(const std::string& memory, const std::string& method, std::uint64_t bytes,
            double alone, const beside_times& t, std::ostringstream& raw,
            const std::string& extra = {})
{
  const double gbps = static_cast<double>(bytes) / 1e9 / t.gather;
  const double beside_gbps = static_cast<double>(bytes) / 1e9 / t.gather_beside;
  std::printf("| %-40s | %-28s | %8.1f | %8.1f | %7.1f | %7.1f | %5.2f |\n", memory.c_str(),
              method.c_str(), gbps, beside_gbps, alone * 1e6, t.sort_beside * 1e6,
              t.sort_beside / alone);
  std::fflush(stdout);
  raw << "{\"memory\": " << gpusort::bench::json_string(memory)
      << ", \"gather\": " << gpusort::bench::json_string(method) << extra
      << ", \"gather_gbps\": " << gbps << ", \"gather_beside_gbps\": " << beside_gbps
      << ", \"sort_seconds\": " << alone << ", \"sort_beside_seconds\": " << t.sort_beside
      << "},";
}

/// One case on the whole GPU: `issue` queues one gather of `bytes` on the stream it is given.
void run_case(const std::string& memory, const char* method,
              const std::function<void(cudaStream_t)>& issue, std::uint64_t bytes, sorter& sort,
              int reps, double alone, std::ostringstream& raw)
{
  cuda_stream gs, ss;
  report(memory, method, bytes, alone,
         measure_beside(issue, sort, reps, alone, {.gather = gs.value(), .sort = ss.value()}),
         raw);
}

/// Rates (GB/s) of the copy engine copying in and of a kernel writing to host memory, each
/// alone and beside the other.
struct link_rates {
  double copy_alone{}, write_alone{}, copy_beside{}, write_beside{};
};

/// The copy engine copying in from host memory (64 MiB copies from `host`, `host_bytes` of it,
/// at most `max_pieces` a round) and `write` (`bytes` a launch) writing to host memory, each
/// back to back on a stream of its own: their rates alone (`alone_writes` launches, one round
/// of copies), then beside each other for `rounds` rounds of copies (the writes a few more
/// launches than fit) while `during` runs on the host (it may time something of its own).
link_rates copies_beside_writes(const std::function<void(cudaStream_t)>& write,
                                std::uint64_t bytes, const char* host, std::uint64_t host_bytes,
                                std::uint64_t max_pieces, int alone_writes, int rounds,
                                const std::function<void()>& during)
{
  constexpr std::uint64_t piece = std::uint64_t{64} << 20;
  device_buffer in{piece};
  cuda_stream cs, ws;
  cuda_event start_c{event_timing::enabled}, stop_c{event_timing::enabled};
  cuda_event start_w{event_timing::enabled}, stop_w{event_timing::enabled};
  const std::uint64_t pieces = std::min<std::uint64_t>(host_bytes / piece, max_pieces);
  const auto copies = [&](int n) {
    start_c.record(cs.value());
    for (int r = 0; r < n; ++r)
      for (std::uint64_t i = 0; i < pieces; ++i)
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(in.data(), host + i * piece, piece,
                                         cudaMemcpyHostToDevice, cs.value()));
    stop_c.record(cs.value());
  };
  const auto writes = [&](int launches) {
    start_w.record(ws.value());
    for (int i = 0; i < launches; ++i) write(ws.value());
    stop_w.record(ws.value());
  };
  const auto gbps = [](std::uint64_t moved, const cuda_event& a, const cuda_event& b) {
    return static_cast<double>(moved) / 1e9 / (gpusort::cuda::elapsed_ms(a, b) / 1e3);
  };
  link_rates r;
  copies(1);
  stop_c.synchronize();
  r.copy_alone = gbps(pieces * piece, start_c, stop_c);
  writes(alone_writes);
  stop_w.synchronize();
  r.write_alone = gbps(static_cast<std::uint64_t>(alone_writes) * bytes, start_w, stop_w);
  const int launches =
      static_cast<int>(r.write_alone / r.copy_alone * rounds * pieces * piece / bytes) + 8;
  copies(rounds);
  writes(launches);
  during();
  stop_c.synchronize();
  stop_w.synchronize();
  r.copy_beside = gbps(static_cast<std::uint64_t>(rounds) * pieces * piece, start_c, stop_c);
  r.write_beside = gbps(static_cast<std::uint64_t>(launches) * bytes, start_w, stop_w);
  return r;
}

/// The copy engine copying in alone, the kernel writing to host memory (`write`, `bytes` a
/// launch) alone, and both at once, for about a second: GB/s of each.
void copy_in_beside_writes(const std::function<void(cudaStream_t)>& write, std::uint64_t bytes,
                           const char* host, std::uint64_t host_bytes, std::ostringstream& raw)
{
  const link_rates r = copies_beside_writes(write, bytes, host, host_bytes, 128, 50, 1, [] {});
  std::printf("copy engine in %.1f GB/s alone, %.1f beside the kernel writing to host; the "
              "kernel writing %.1f GB/s alone, %.1f beside the copies in\n",
              r.copy_alone, r.copy_beside, r.write_alone, r.write_beside);
  raw << "{\"copy_in_gbps\": " << r.copy_alone << ", \"copy_in_beside_writes_gbps\": "
      << r.copy_beside << ", \"writes_gbps\": " << r.write_alone
      << ", \"writes_beside_copy_in_gbps\": " << r.write_beside << "},";
}

/// A gather table on the device, and one launch of the gather kernel over it.
struct kernel_gather {
  device_buffer d_table;
  std::uint32_t count;
  std::uint64_t longest = 0;
  char* d_out;

  kernel_gather(const std::vector<gather_slice>& table, char* out)
      : d_table{std::max<std::size_t>(table.size(), 1) * sizeof(gather_slice)},
        count{static_cast<std::uint32_t>(table.size())}, d_out{out}
  {
    if (!table.empty())
      GPUSORT_CUDA_TRY(cudaMemcpy(d_table.data(), table.data(),
                                  table.size() * sizeof(gather_slice), cudaMemcpyHostToDevice));
    for (const gather_slice& s : table) longest = std::max(longest, s.length);
  }
  gpusort::cuda::gather_tuning tuning{};
  void operator()(cudaStream_t s) const
  {
    gpusort::cuda::gather(d_table.data<gather_slice>(), count, longest, d_out, 8, s, tuning);
  }
};

/// The copy engines' gather: the table's slices in `streams` parts, each one
/// cudaMemcpyBatchAsync on a stream of its own forked from the caller's and joined back.
struct copy_gather {
  std::vector<std::vector<void*>> dst;
  std::vector<std::vector<const void*>> src;
  std::vector<std::vector<std::size_t>> sizes;
  std::vector<cuda_stream> streams;
  std::vector<cuda_event> joined;
  cuda_event fork;

  copy_gather(const std::vector<gather_slice>& table, const char* host_base,
              const char* device_base, char* out, unsigned parts)
      : dst(parts), src(parts), sizes(parts), streams(parts), joined(parts)
  {
    for (std::size_t i = 0; i < table.size(); ++i) {
      const std::size_t p = i * parts / table.size();
      dst[p].push_back(out + table[i].dst_offset * 8);
      // The copy engines take the host address; the table holds the device one.
      src[p].push_back(host_base + (static_cast<const char*>(table[i].src) - device_base));
      sizes[p].push_back(table[i].length * 8);
    }
  }
  void operator()(cudaStream_t s)
  {
    fork.record(s);
    for (std::size_t p = 0; p < streams.size(); ++p) {
      if (dst[p].empty()) continue;
      GPUSORT_CUDA_TRY(cudaStreamWaitEvent(streams[p].value(), fork.value()));
      cudaMemcpyAttributes attributes{};
      attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      std::size_t first_index = 0;
      GPUSORT_CUDA_TRY(cudaMemcpyBatchAsync(dst[p].data(), src[p].data(), sizes[p].data(),
                                            dst[p].size(), &attributes, &first_index, 1,
                                            streams[p].value()));
      joined[p].record(streams[p].value());
      GPUSORT_CUDA_TRY(cudaStreamWaitEvent(s, joined[p].value()));
    }
  }
};

/// The copy engines bringing a superset of the slices: one 2D copy of `rows` rows of `width`
/// bytes at `pitch` bytes from one another in host memory, packed in the device's buffer.
struct copy_2d {
  const char* host;
  std::uint64_t pitch, width, rows;
  char* out;
  void operator()(cudaStream_t s) const
  {
    GPUSORT_CUDA_TRY(cudaMemcpy2DAsync(out, width, host, pitch, width, rows,
                                       cudaMemcpyHostToDevice, s));
  }
};

/// Round 2's table split: the first `share` of its slices for the kernel, the rest for copies.
std::pair<std::vector<gather_slice>, std::vector<gather_slice>> split_table(
    const std::vector<gather_slice>& table, double share)
{
  const auto cut = static_cast<std::size_t>(static_cast<double>(table.size()) * share);
  return {{table.begin(), table.begin() + static_cast<std::ptrdiff_t>(cut)},
          {table.begin() + static_cast<std::ptrdiff_t>(cut), table.end()}};
}

std::uint64_t keys_of(const std::vector<gather_slice>& table)
{
  std::uint64_t n = 0;
  for (const gather_slice& s : table) n += s.length;
  return n;
}

/// The driver's green-context calls, fetched at run time (the benchmarks link only cudart).
struct green_api {
  CUresult (*get_resource)(CUdevice, CUdevResource*, CUdevResourceType){};
  CUresult (*split)(CUdevResource*, unsigned*, const CUdevResource*, CUdevResource*, unsigned,
                    unsigned){};
  CUresult (*describe)(CUdevResourceDesc*, CUdevResource*, unsigned){};
  CUresult (*create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned){};
  CUresult (*destroy)(CUgreenCtx){};
  CUresult (*stream_create)(CUstream*, CUgreenCtx, unsigned, int){};
  CUresult (*stream_destroy)(CUstream){};
  CUresult (*as_context)(CUcontext*, CUgreenCtx){};
  CUresult (*push)(CUcontext){};
  CUresult (*pop)(CUcontext*){};

  /// Null where the driver lacks green contexts (older than 12.5), after a line naming the
  /// entry point it lacks.
  static const green_api* get()
  {
    static const std::optional<green_api> api = []() -> std::optional<green_api> {
      green_api a;
      // The entry points as this build's headers declare them (CUDA_VERSION): asking for 12.4's
      // found no cuGreenCtxStreamCreate, which came in 12.5 (h200x2-20261130-s16, call 1), and
      // the structures passed (CUdevResource) are the headers' own.
      const auto fetch = [](const char* name, auto& fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult status{};
        const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION,
                                                               cudaEnableDefault, &status);
        if (e == cudaSuccess && status == cudaDriverEntryPointSuccess) {
          fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
          return true;
        }
        std::printf("green contexts: no %s for CUDA %d in this driver (%s, query status %d)\n",
                    name, CUDA_VERSION, cudaGetErrorString(e), static_cast<int>(status));
        return false;
      };
      if (fetch("cuDeviceGetDevResource", a.get_resource) &&
          fetch("cuDevSmResourceSplitByCount", a.split) &&
          fetch("cuDevResourceGenerateDesc", a.describe) &&
          fetch("cuGreenCtxCreate", a.create) && fetch("cuGreenCtxDestroy", a.destroy) &&
          fetch("cuGreenCtxStreamCreate", a.stream_create) &&
          fetch("cuStreamDestroy", a.stream_destroy) &&
          fetch("cuCtxFromGreenCtx", a.as_context) && fetch("cuCtxPushCurrent", a.push) &&
          fetch("cuCtxPopCurrent", a.pop))
        return a;
      return std::nullopt;
    }();
    return api ? &*api : nullptr;
  }
};

void check_driver(CUresult r, const char* what)
{
  if (r != CUDA_SUCCESS)
    throw std::runtime_error{std::string{what} + " failed: CUresult " + std::to_string(r)};
}

/// A green context on some of device 0's SMs, with a stream in it.
class green_part {
 public:
  green_part(const green_api& api, CUdevResource sms) : api_{api}
  {
    CUdevResourceDesc desc{};
    check_driver(api_.describe(&desc, &sms, 1), "cuDevResourceGenerateDesc");
    check_driver(api_.create(&ctx_, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    check_driver(api_.stream_create(&stream_, ctx_, CU_STREAM_NON_BLOCKING, 0),
                 "cuGreenCtxStreamCreate");
    check_driver(api_.as_context(&context_, ctx_), "cuCtxFromGreenCtx");
    sms_ = sms.sm.smCount;
  }
  ~green_part()
  {
    (void)cudaStreamSynchronize(stream_);
    (void)api_.stream_destroy(stream_);
    (void)api_.destroy(ctx_);
  }
  green_part(const green_part&) = delete;
  green_part& operator=(const green_part&) = delete;

  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] unsigned sms() const noexcept { return sms_; }
  /// Runs `f` with this context current (events made in it belong to it).
  template <typename F>
  auto in(F&& f) const
  {
    check_driver(api_.push(context_), "cuCtxPushCurrent");
    struct popper {
      const green_api& api;
      ~popper()
      {
        CUcontext c{};
        (void)api.pop(&c);
      }
    } pop{api_};
    return f();
  }

 private:
  const green_api& api_;
  CUgreenCtx ctx_{};
  CUcontext context_{};
  CUstream stream_{};
  unsigned sms_{};
};

/// The sort alone and beside back-to-back gathers, each in a green context of its own: the
/// gather on `gather_sms` SMs (rounded as the driver rounds partitions), the sort on the rest.
void run_green_case(const std::string& memory, const std::vector<gather_slice>& table,
                    std::uint64_t keys, sorter& sort, int reps, double whole_gpu_alone,
                    unsigned gather_sms, char* d_out, std::ostringstream& raw)
{
  const green_api* api = green_api::get();
  if (api == nullptr) {
    std::printf("green contexts: not in this driver\n");
    return;
  }
  CUdevResource all{};
  check_driver(api->get_resource(0, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  CUdevResource group{}, rest{};
  unsigned groups = 1;
  check_driver(api->split(&group, &groups, &all, &rest, 0, gather_sms),
               "cuDevSmResourceSplitByCount");
  const green_part gather_part{*api, group};
  const green_part sort_part{*api, rest};
  const placement where{
      .gather = gather_part.stream(),
      .sort = sort_part.stream(),
      .in_gather = [&](const std::function<void()>& f) { gather_part.in(f); },
      .in_sort = [&](const std::function<void()>& f) { sort_part.in(f); }};
  double alone = 0;
  where.in_sort([&] { alone = sort.median_seconds(where.sort, reps); });
  const kernel_gather k{table, d_out};
  const beside_times t = measure_beside(std::cref(k), sort, reps, alone, where);
  const std::string method = "kernel on " + std::to_string(gather_part.sms()) + " SMs, sort on " +
                             std::to_string(sort_part.sms());
  report(memory, method, keys * 8, alone, t, raw,
         ", \"gather_sms\": " + std::to_string(gather_part.sms()) +
             ", \"sort_sms\": " + std::to_string(sort_part.sms()));
  std::printf("  (the sort on %u SMs alone: %.2fx its time on the whole GPU)\n", sort_part.sms(),
              alone / whole_gpu_alone);
}

/// cuda::scatter_lines over a device table (the scattering store's kernel), `blocks` blocks.
struct kernel_lines {
  device_buffer d_table;
  std::uint32_t count;
  char* d_out;
  unsigned blocks;

  kernel_lines(const std::vector<gather_slice>& table, char* out, unsigned b)
      : d_table{std::max<std::size_t>(table.size(), 1) * sizeof(gather_slice)},
        count{static_cast<std::uint32_t>(table.size())}, d_out{out}, blocks{b}
  {
    GPUSORT_CUDA_TRY(cudaMemcpy(d_table.data(), table.data(), table.size() * sizeof(gather_slice),
                                cudaMemcpyHostToDevice));
  }
  void operator()(cudaStream_t s) const
  {
    gpusort::cuda::scatter_lines(d_table.data<gather_slice>(), count, d_out, 8, blocks, s);
  }
};

/// Round 1 of a scattering round, its three parts at once: the copy engine copying chunks in
/// (64 MiB copies from `host`), `write` (a chunk's `bytes` a launch) writing to host memory,
/// and CUB's sort of a chunk; each part's rate alone and beside the others.
void round1_mix(const std::string& pattern, const std::string& method,
                const std::function<void(cudaStream_t)>& write, std::uint64_t bytes,
                const char* host, std::uint64_t host_bytes, sorter& sort, int reps,
                std::ostringstream& raw)
{
  cuda_stream ss;
  const double sort_alone = sort.median_seconds(ss.value(), reps);
  double sort_beside = 0;
  // All three for as long as the sorts take, the copies and writes outlasting them.
  const link_rates r = copies_beside_writes(write, bytes, host, host_bytes, 64, 200, 4, [&] {
    sort_beside = sort.median_seconds(ss.value(), reps);
  });
  std::printf("| %-22s | %-34s | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %5.2f |\n",
              pattern.c_str(), method.c_str(), r.write_alone, r.copy_alone, r.write_beside,
              r.copy_beside, sort_alone * 1e6, sort_beside * 1e6, sort_beside / sort_alone);
  std::fflush(stdout);
  raw << "{\"pattern\": " << gpusort::bench::json_string(pattern)
      << ", \"writes\": " << gpusort::bench::json_string(method)
      << ", \"writes_gbps\": " << r.write_alone << ", \"copy_in_gbps\": " << r.copy_alone
      << ", \"writes_beside_gbps\": " << r.write_beside << ", \"copy_in_beside_gbps\": "
      << r.copy_beside << ", \"sort_seconds\": " << sort_alone
      << ", \"sort_beside_seconds\": " << sort_beside << "},";
}

/// --writes yes: round 1 of a scattering round at two budgets of 8 GiB, its sorted chunk
/// written to `slices` bucket regions spread over registered host memory (huge pages) by the
/// gather kernel turned round (s17's store), by scatter_lines (whole lines) on 4 to 32 blocks,
/// and (the reference: DSPS's round 1) by the copy engine to one place; each beside the copy
/// engine copying in and the chunk's sort. (s18's call 3 also tried PTX's st.wt and st.cs
/// stores in both kernels: no change, h200-20261201-s18/call3/writes.txt.)
int run_writes(const options& o)
{
  std::ostringstream raw;
  GPUSORT_CUDA_TRY(cudaSetDevice(0));
  host_memory h{"registered, huge pages", o.host_bytes, 0};
  const auto* host = static_cast<const char*>(h.data);
  char* const d_host = const_cast<char*>(h.device_address());
  std::printf("| pattern | writes | GB/s alone | copy in alone | writes beside | copy in beside "
              "| sort us alone | beside | ratio |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  struct pattern {
    const char* name;
    std::uint64_t keys, slices;
  };
  for (const pattern p : {pattern{"1/256: 674K keys, 1594", 674'000, 1594},
                          pattern{"22 MiB: 262K keys, 4096", 262'144, 4096}}) {
    sorter sort{p.keys};
    device_buffer chunk{p.keys * 8};
    GPUSORT_CUDA_TRY(cudaMemset(chunk.data(), 3, p.keys * 8));
    // The chunk's slices, one after another in device memory, each to its bucket's region.
    const std::vector<gather_slice> spread = table_of(d_host, o.host_bytes, p.keys, p.slices, true);
    std::vector<gather_slice> scatter;
    for (const gather_slice& g : spread)
      scatter.push_back({chunk.data<char>() + g.dst_offset * 8, g.length,
                         static_cast<std::uint64_t>(static_cast<const char*>(g.src) - d_host) / 8});
    const std::uint64_t bytes = p.keys * 8;
    {
      const kernel_gather k{scatter, d_host};
      round1_mix(p.name, "gather kernel (8 B a lane)", std::cref(k), bytes, host, o.host_bytes,
                 sort, o.reps, raw);
    }
    for (const unsigned blocks : {4U, 8U, 16U, 32U}) {
      const kernel_lines k{scatter, d_host, blocks};
      round1_mix(p.name, "scatter_lines, " + std::to_string(blocks) + " blocks", std::cref(k),
                 bytes, host, o.host_bytes, sort, o.reps, raw);
    }
    char* const to = const_cast<char*>(host) + o.host_bytes / 2;
    const auto copy_out = [&](cudaStream_t s) {
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(to, chunk.data(), bytes, cudaMemcpyDeviceToHost, s));
    };
    round1_mix(p.name, "copy engine, one place (DSPS)", copy_out, bytes, host, o.host_bytes,
               sort, o.reps, raw);
  }
  if (!o.results.json.empty()) {
    std::string rows = raw.str();
    if (!rows.empty()) rows.pop_back();
    gpusort::bench::write_results(o.results.json, o.results.commit, o.results.machine, {}, rows,
                                  {});
  }
  return 0;
}

int run(const options& o)
{
  if (o.writes) return run_writes(o);
  if (o.slices > o.keys) throw gpusort::bench::usage_error{"--slices: at most --keys"};
  // Each spread slice needs a part of the host memory longer than itself.
  if (o.host_bytes / 8 / o.slices <= o.keys / o.slices + 1)
    throw gpusort::bench::usage_error{"--host-bytes: more than 8 bytes a key"};
  std::ostringstream raw;
  GPUSORT_CUDA_TRY(cudaSetDevice(0));
  sorter sort{o.keys};
  cuda_stream s;
  const double alone = sort.median_seconds(s.value(), o.reps);
  std::printf("CUB radix sort of %llu u64 keys alone: %.1f us (median of %d)\n",
              static_cast<unsigned long long>(o.keys), alone * 1e6, o.reps);
  std::printf("| memory | gather | GB/s alone | beside | sort us alone | beside | ratio |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  device_buffer out{o.keys * 8};
  // The 2D copies' rows, up to twice a slice's length each.
  device_buffer wide{(o.keys / o.slices + 1) * 2 * 8 * o.slices};
  const std::uint64_t bytes = o.keys * 8;
  {
    const std::uint64_t span = std::uint64_t{1} << 30;
    device_buffer src{span};
    GPUSORT_CUDA_TRY(cudaMemset(src.data(), 1, span));
    const char* base = src.data<char>();
    for (const bool spread : {false, true}) {
      const kernel_gather k{table_of(base, span, o.keys, o.slices, spread), out.data<char>()};
      run_case("device", spread ? "kernel, spread" : "kernel, compact", std::cref(k), bytes, sort,
               o.reps, alone, raw);
    }
  }
  const char* names[] = {"registered, huge pages", "registered, 4 KiB pages", "cudaHostAlloc"};
  // Huge pages last: their cases go on to the copy engines and the green contexts, whose
  // failure (a driver without them) could leave the GPU unusable for the cases after it.
  for (const int kind : {1, 2, 0}) {
    const long before = anon_huge_kb();
    host_memory h{names[kind], o.host_bytes, kind};
    const long huge = anon_huge_kb() - before;
    const std::string label = std::string{names[kind]} + " (" + std::to_string(huge / 1024) +
                              " MiB huge)";
    const char* base = h.device_address();
    const std::vector<gather_slice> spread = table_of(base, o.host_bytes, o.keys, o.slices, true);
    for (const bool is_spread : {false, true}) {
      const kernel_gather k{is_spread ? spread
                                      : table_of(base, o.host_bytes, o.keys, o.slices, false),
                            out.data<char>()};
      run_case(label, is_spread ? "kernel, spread" : "kernel, compact", std::cref(k), bytes, sort,
               o.reps, alone, raw);
    }
    if (kind != 0) continue;
    // The copy engines on 1 to 8 streams; the kernel on a share of the slices alone; and the
    // kernel and the copies side by side, each on its share.
    const auto* host = static_cast<const char*>(h.data);
    for (const unsigned parts : {1U, 2U, 4U, 8U}) {
      copy_gather c{spread, host, base, out.data<char>(), parts};
      const std::string method = "copies, " + std::to_string(parts) + " stream(s)";
      run_case(label, method.c_str(), std::ref(c), bytes, sort, o.reps, alone, raw);
    }
    // 2D copies of a superset, the useful bytes' rate reported: each row is a slice's
    // average length times `widen`, the rows at the spread table's pitch.
    for (const double widen : {1.0, 1.25, 1.5, 2.0}) {
      const std::uint64_t width =
          static_cast<std::uint64_t>(widen * static_cast<double>(o.keys / o.slices + 1)) * 8;
      const copy_2d c{host, o.host_bytes / o.slices, width, o.slices, wide.data<char>()};
      char method[64];
      std::snprintf(method, sizeof method, "2D copy, rows %.2fx a slice", widen);
      run_case(label, method, std::cref(c), bytes, sort, o.reps, alone, raw);
    }
    // The kernel writing each slice to its place in host memory (the spread table reversed).
    {
      std::vector<gather_slice> scatter;
      for (const gather_slice& g : spread)
        scatter.push_back({out.data<char>() + g.dst_offset * 8, g.length,
                           static_cast<std::uint64_t>(static_cast<const char*>(g.src) - base) /
                               8});
      const kernel_gather k{scatter, const_cast<char*>(base)};
      run_case(label, "kernel writing to host", std::cref(k), bytes, sort, o.reps, alone, raw);
      // And beside the copy engine copying in, as a round 1 that writes its slices so would
      // run: does either direction lose?
      copy_in_beside_writes(std::cref(k), bytes, host, o.host_bytes, raw);
    }
    for (const double share : {0.25, 0.5}) {
      const auto [kernel_part, copy_part] = split_table(spread, share);
      const kernel_gather k{kernel_part, out.data<char>()};
      const std::string alone_method = "kernel, " + std::to_string(int(share * 100)) + "% only";
      run_case(label, alone_method.c_str(), std::cref(k), keys_of(kernel_part) * 8, sort, o.reps,
               alone, raw);
      for (const unsigned parts : {2U, 4U}) {
        copy_gather c{copy_part, host, base, out.data<char>(), parts};
        cuda_stream ks;
        cuda_event forked, kernel_done;
        const auto both = [&](cudaStream_t s) {
          forked.record(s);
          GPUSORT_CUDA_TRY(cudaStreamWaitEvent(ks.value(), forked.value()));
          k(ks.value());
          kernel_done.record(ks.value());
          c(s);
          GPUSORT_CUDA_TRY(cudaStreamWaitEvent(s, kernel_done.value()));
        };
        const std::string method = "kernel " + std::to_string(int(share * 100)) +
                                   "% + copies x" + std::to_string(parts);
        run_case(label, method.c_str(), both, bytes, sort, o.reps, alone, raw);
      }
    }
    // The GPU split between the gather and the sort by green contexts; a driver that refuses
    // one is said and the rest still run.
    for (const unsigned gather_sms : {8U, 16U, 32U}) {
      try {
        run_green_case(label, spread, o.keys, sort, o.reps, alone, gather_sms, out.data<char>(),
                       raw);
      } catch (const std::exception& e) {
        std::printf("green contexts, gather on %u SMs: %s\n", gather_sms, e.what());
        (void)cudaGetLastError();
      }
    }
  }
  std::printf("CUB radix sort alone again: %.1f us\n",
              sort.median_seconds(s.value(), o.reps) * 1e6);
  if (!o.results.json.empty()) {
    std::string rows = raw.str();
    if (!rows.empty()) rows.pop_back();  // the last comma
    gpusort::bench::write_results(o.results.json, o.results.commit, o.results.machine, {}, rows,
                                  {});
  }
  return 0;
}

void set_option(options& o, std::string_view flag, const std::string& value)
{
  if (flag == "--host-bytes") o.host_bytes = gpusort::bench::parse_one_count(flag, value);
  if (flag == "--keys")
    o.keys = gpusort::bench::parse_one_count(flag, value, std::uint64_t{1} << 28);
  if (flag == "--slices") o.slices = gpusort::bench::parse_one_count(flag, value, 65535);
  if (flag == "--writes") {
    if (value != "yes" && value != "no")
      throw gpusort::bench::usage_error{"--writes takes yes or no"};
    o.writes = value == "yes";
  }
  if (flag == "--reps")
    o.reps = static_cast<int>(gpusort::bench::parse_one_count(flag, value, 100'000));
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>("beside_bench", usage, argc, argv,
                                           {"--host-bytes", "--keys", "--slices", "--reps",
                                            "--writes"},
                                           set_option, run);
}
