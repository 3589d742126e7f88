// Round 1 scattering into buckets (issue 44), a prototype measured whole on one GPU. A small
// device budget makes round 2 gather d short slices a chunk with a kernel reading mapped host
// memory, and a sort beside such reads runs at under half speed on any SMs (beside_bench,
// h200x2-20261130-s15 and -s16); a kernel writing slices to host memory leaves it at full speed
// (1.02x, s16 call 4). So this bench turns the gather round: splitters first, from a sample of
// the input; round 1 copies each chunk in (copy engine), orders it by bucket, finds its d
// bucket slices and writes them by kernel to their buckets' places in host memory (each bucket
// a region of round 2's capacity); round 2 copies each bucket in whole (copy engine), sorts it
// on the bits its splitters leave and copies it out to its place in the array. Round 1 orders
// a chunk either by sorting it whole, as the engine's round 1 does, or by partitioning it (each
// key's bucket number, then a radix sort of the numbers carrying the keys: one or two passes
// of 8 bits instead of eight), since round 2 sorts each bucket anyway. Keys only, u64 uniform
// (a bucket's slices land in the chunks' order); a bucket fuller than its region fails the
// run. Against the engine at budget 1/8, run beside it (gpu_bench --chunks): how far the design
// would carry the small budgets. Each run is verified by core/verify.hpp: sorted, and the same
// keys as before.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "core/counter_rng.hpp"
#include "core/cpu_sort.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/generate.hpp"
#include "core/verify.hpp"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/staging.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <cub/block/block_scan.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using gpusort::cuda::cuda_stream;
using gpusort::cuda::device_buffer;
using gpusort::cuda::gather_slice;
using clock_type = std::chrono::steady_clock;

/// How round 1 orders a chunk by bucket before writing its slices out: sorting its keys whole
/// (what the engine's round 1 does), or partitioning them (each key's bucket number, then a
/// radix sort of the numbers carrying the keys: a pass or two of 8 bits instead of eight).
enum class order_by : std::uint8_t { sort, partition };

struct options {
  std::uint64_t bytes = std::uint64_t{8} << 30;
  std::vector<std::uint64_t> divisors{8, 256, 372};
  std::vector<std::uint64_t> slots{3};
  std::vector<order_by> orders{order_by::sort, order_by::partition};
  std::uint64_t repeat = 3;
  std::uint64_t samples_per_bucket = 1024;
  bool profile = false;
  gpusort::bench::results_options results;
};

constexpr const char* usage =
    "usage: scatter_bench [--bytes 8Gi] [--divisors 8,256,372] [--slots 3] [--repeat 3]\n"
    "                     [--round1 sort,partition] [--samples-per-bucket 1024]\n"
    "                     [--profile no] [--json FILE] [--machine NAME] [--commit C]\n"
    "Out of core on GPU 0 with round 1 scattering into buckets (splitters from a sample first;\n"
    "round 2 copies whole buckets): u64 uniform keys of --bytes in registered memory, a device\n"
    "budget of --bytes / each divisor shared by each count of --slots (chunks in flight), round\n"
    "1 ordering each chunk as --round1 says (a sort, a partition); the median of --repeat runs,\n"
    "each verified. --profile yes: then a run more, each stage's busy time in each round.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

// Buckets are planned this much below their regions, for the sample's error: with 1024
// samples a bucket, a bucket's size deviates by about 3%, and the fullest of 1790 buckets of
// 8 GiB held 1.12 times the mean in a simulation of this sample (a slack of 1.15 overflowed
// once on the GPU, h200x2-20261130-s16 call 6).
constexpr double bucket_slack = 1.25;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// `f(begin, end)` over [0, n) split among the host's cores.
template <typename F>
void in_parallel(std::uint64_t n, F&& f)
{
  const unsigned threads = std::max(std::thread::hardware_concurrency(), 1U);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
  for (std::thread& th : pool) th.join();
}

/// Bucket j holds the keys in [splitters[j - 1], splitters[j]) (the first from the lowest key,
/// the last to the highest). A sorted chunk has bucket j's slice where a search of its keys
/// finds it: one thread a bucket finds its slice, takes its place in the bucket's region (fill,
/// in the order the chunks' kernels come on their one stream) and writes the scatter's table
/// entry; a bucket past `capacity` raises `overflow` and writes nothing.
__global__ void bucket_table_kernel(const std::uint64_t* __restrict__ keys, std::uint64_t n,
                                    const std::uint64_t* __restrict__ splitters,
                                    std::uint32_t buckets, std::uint64_t capacity,
                                    unsigned long long* __restrict__ fill,
                                    gather_slice* __restrict__ table,
                                    unsigned* __restrict__ overflow)
{
  const std::uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= buckets) return;
  const auto first_of = [&](std::uint32_t b) {  // the first key at least splitters[b - 1]
    const std::uint64_t v = splitters[b - 1];
    std::uint64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  };
  const std::uint64_t begin = j == 0 ? 0 : first_of(j);
  const std::uint64_t end = j + 1 == buckets ? n : first_of(j + 1);
  const std::uint64_t length = end - begin;
  const unsigned long long at = fill[j];
  if (at + length > capacity) {
    atomicExch(overflow, 1U);
    table[j] = gather_slice{keys, 0, 0};
    return;
  }
  table[j] = gather_slice{keys + begin, length, j * capacity + at};
  fill[j] = at + length;
}

/// Each key's bucket: how many splitters are at most it, searched in shared memory; and how
/// many keys each bucket has (`counts`, count + 1 of them, zero before), so that the slices'
/// places come from a scan instead of searches of the ordered chunk.
__global__ void classify_kernel(const std::uint64_t* __restrict__ keys, std::uint64_t n,
                                const std::uint64_t* __restrict__ splitters,
                                std::uint32_t count, std::uint32_t* __restrict__ ids,
                                unsigned* __restrict__ counts)
{
  extern __shared__ std::uint64_t s[];
  auto* histogram = reinterpret_cast<unsigned*>(s + count);
  for (std::uint32_t i = threadIdx.x; i < count; i += blockDim.x) s[i] = splitters[i];
  for (std::uint32_t i = threadIdx.x; i <= count; i += blockDim.x) histogram[i] = 0;
  __syncthreads();
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::uint64_t k = keys[i];
    std::uint32_t lo = 0, hi = count;  // the first splitter above k
    while (lo < hi) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (s[mid] <= k)
        lo = mid + 1;
      else
        hi = mid;
    }
    ids[i] = lo;
    atomicAdd(&histogram[lo], 1U);
  }
  __syncthreads();
  for (std::uint32_t i = threadIdx.x; i <= count; i += blockDim.x)
    if (histogram[i] != 0) atomicAdd(&counts[i], histogram[i]);
}

/// The shared memory classify_kernel takes for `count` splitters.
std::uint64_t classify_shared_bytes(std::uint64_t count) { return count * 8 + (count + 1) * 4; }

constexpr unsigned table_threads = 1024;

/// The scatter's table of a partitioned chunk from its buckets' counts, in one block: each
/// thread scans a run of buckets, the block scans the runs' sums, and each bucket takes its
/// place in its region (fill; the kernels of the chunks run in their order on one stream). A
/// bucket past `capacity` raises `overflow` and writes nothing.
__global__ void __launch_bounds__(table_threads)
    table_from_counts_kernel(const std::uint64_t* __restrict__ ordered,
                             const unsigned* __restrict__ counts, std::uint32_t buckets,
                             std::uint64_t capacity, unsigned long long* __restrict__ fill,
                             gather_slice* __restrict__ table, unsigned* __restrict__ overflow)
{
  using block_scan = cub::BlockScan<unsigned long long, table_threads>;
  __shared__ typename block_scan::TempStorage temp;
  const std::uint32_t per = (buckets + table_threads - 1) / table_threads;
  const std::uint32_t first = threadIdx.x * per;
  const std::uint32_t last = min(first + per, buckets);
  unsigned long long sum = 0;
  for (std::uint32_t j = first; j < last; ++j) sum += counts[j];
  unsigned long long begin = 0;
  block_scan(temp).ExclusiveSum(sum, begin);
  for (std::uint32_t j = first; j < last; ++j) {
    const unsigned long long length = counts[j];
    const unsigned long long at = fill[j];
    if (at + length > capacity) {
      atomicExch(overflow, 1U);
      table[j] = gather_slice{ordered, 0, 0};
    } else {
      table[j] = gather_slice{ordered + begin, length, j * capacity + at};
      fill[j] = at + length;
    }
    begin += length;
  }
}

/// The shape of one budget's job: round 1's chunk capacity, round 2's bucket capacity (one
/// bucket a chunk there) and the bucket count, each slot's share of the budget.
struct shape {
  std::uint64_t chunk{}, bucket{}, buckets{}, chunks{}, slot_bytes{};
};

std::uint64_t table_bytes(std::uint64_t buckets) { return buckets * sizeof(gather_slice); }

/// Round 1's bytes in a slot for a chunk of `c` keys.
std::uint64_t round1_slot_bytes(std::uint64_t c, std::uint64_t buckets, order_by how)
{
  const std::uint64_t sort = how == order_by::sort
                                 ? 16 * c + gpusort::cuda::radix_sort_scratch_bytes(c, 8, 0)
                                 : 24 * c + gpusort::cuda::radix_sort_scratch_bytes(c, 4, 8);
  return sort + table_bytes(buckets) + (how == order_by::partition ? buckets * 4 + 256 : 0) +
         1024;
}

/// Round 2's bytes in a slot for a bucket of `c` keys.
std::uint64_t round2_slot_bytes(std::uint64_t c)
{
  return 16 * c + gpusort::cuda::radix_sort_scratch_bytes(c, 8, 0) + 512;
}

/// The largest `c` with `bytes(c)` at most `room`.
template <typename F>
std::uint64_t largest(std::uint64_t room, F bytes)
{
  std::uint64_t c = room / 16;
  while (c > 1024 && bytes(c) > room) c -= std::max<std::uint64_t>(c / 128, 1);
  if (c <= 1024) throw std::runtime_error{"a budget too small for this prototype"};
  return c;
}

/// `slots`: chunks in flight (three: one copying in, one sorting, one writing out; two make
/// each chunk and bucket half as large again, and a small sort is cheaper a key the larger).
shape shape_for(std::uint64_t n, std::uint64_t budget, order_by how, unsigned slots)
{
  shape sh;
  // A slot's share of the budget, the splitters and fills set aside; the table's size depends
  // on the bucket count, which depends on the bucket's capacity: twice round.
  std::uint64_t buckets = 1;
  for (int pass = 0; pass < 2; ++pass) {
    sh.slot_bytes = (budget - 16 * buckets - 4096) / slots;
    sh.bucket = largest(sh.slot_bytes, round2_slot_bytes);
    buckets = static_cast<std::uint64_t>(static_cast<double>(n) * bucket_slack /
                                         static_cast<double>(sh.bucket)) + 1;
  }
  sh.buckets = buckets;
  sh.chunk = largest(sh.slot_bytes,
                     [&](std::uint64_t c) { return round1_slot_bytes(c, buckets, how); });
  sh.chunks = (n + sh.chunk - 1) / sh.chunk;
  return sh;
}

/// A slot's share of the budget, carved anew for each round, and the events that pass it from
/// one stage of the pipeline to the next: copied in, worked on (ordered, or sorted), and free
/// again once written out.
struct slot {
  device_buffer arena;
  gpusort::cuda::cuda_event in, worked, freed;

  /// The next `bytes` of the arena from `at` (256-byte aligned).
  template <typename T>
  T* carve(std::uint64_t& at, std::uint64_t bytes)
  {
    at = (at + 255) / 256 * 256;
    T* p = reinterpret_cast<T*>(arena.data<char>() + at);
    at += bytes;
    if (at > arena.size()) throw std::logic_error{"a slot's arena overflows"};
    return p;
  }
};

/// The pipeline's three streams: the copy engine copying in, the SMs' work, and the writing
/// out (round 1's kernel writing slices to host memory, round 2's copy engine copying out), so
/// that a chunk copies in while the one before is worked on and the one before that goes out.
struct stages {
  cuda_stream in, work, out;
  void synchronize()
  {
    in.synchronize();
    work.synchronize();
    out.synchronize();
  }
};

/// The pipeline's stages, as stage_clock counts them.
enum stage : unsigned { in_stage, work_stage, out_stage, stage_count };

/// Busy seconds of each stage of a round (--profile): an event pair around every chunk's or
/// bucket's work on each stage's stream, summed once the round is done. Where the round's time
/// goes: a stage busy all the round long is its bound.
class stage_clock {
 public:
  explicit stage_clock(std::uint64_t items) : marked_(items)
  {
    for (auto& pairs : events_)
      for (std::uint64_t i = 0; i < 2 * items; ++i)
        pairs.emplace_back(gpusort::cuda::event_timing::enabled);
  }
  void begin(stage s, std::uint64_t i, cudaStream_t stream)
  {
    events_[s][2 * i].record(stream);
    marked_[i] = true;
  }
  void end(stage s, std::uint64_t i, cudaStream_t stream) { events_[s][2 * i + 1].record(stream); }
  /// The stages' busy seconds since the last reset (the round synchronized).
  [[nodiscard]] std::array<double, stage_count> busy() const
  {
    std::array<double, stage_count> seconds{};
    for (unsigned s = 0; s < stage_count; ++s)
      for (std::uint64_t i = 0; i < marked_.size(); ++i)
        if (marked_[i])
          seconds[s] += gpusort::cuda::elapsed_ms(events_[s][2 * i], events_[s][2 * i + 1]) / 1e3;
    return seconds;
  }
  void reset() { std::fill(marked_.begin(), marked_.end(), false); }

 private:
  std::array<std::vector<gpusort::cuda::cuda_event>, stage_count> events_;
  std::vector<bool> marked_;
};

struct times {
  double sample{}, round1{}, round2{}, total{};
  /// Each round's stages' busy seconds, in a profiled run.
  std::array<double, stage_count> busy1{}, busy2{};
};

/// One job: `keys` (registered) sorted in place through `buckets_host` (registered, mapped).
times run_once(std::uint64_t* keys, std::uint64_t n, const shape& sh, order_by how,
               std::uint64_t per_bucket, std::uint64_t* buckets_host, std::vector<slot>& ring,
               stages& st, std::uint64_t* d_splitters, unsigned long long* d_fill,
               unsigned* d_overflow, stage_clock* clock)
{
  times t;
  const auto mark = [&](bool begin, stage s, std::uint64_t i, cudaStream_t stream) {
    if (clock == nullptr) return;
    if (begin)
      clock->begin(s, i, stream);
    else
      clock->end(s, i, stream);
  };
  const auto t0 = clock_type::now();
  // Splitters: every per_bucket-th of a random sample, sorted by the CPU sorter on every core.
  const std::uint64_t d = sh.buckets;
  std::vector<std::uint64_t> sample(per_bucket * d);
  const gpusort::detail::counter_rng pick{per_bucket, 0};  // the sample's i-th place: pick(i)
  in_parallel(sample.size(), [&](std::uint64_t b, std::uint64_t e) {
    for (std::uint64_t i = b; i < e; ++i) sample[i] = keys[pick(i) % n];
  });
  using gpusort::detail::no_value;
  std::vector<std::uint64_t> sort_scratch(
      (gpusort::detail::cpu_sort_scratch_bytes<std::uint64_t, no_value>(sample.size()) + 7) / 8);
  gpusort::detail::cpu_sort<std::uint64_t, no_value>(sample.data(), nullptr, sample.size(),
                                                     sort_scratch.data(), 0);
  std::vector<std::uint64_t> splitters(d - 1);
  for (std::uint64_t j = 0; j + 1 < d; ++j) splitters[j] = sample[(j + 1) * per_bucket];
  GPUSORT_CUDA_TRY(cudaMemcpy(d_splitters, splitters.data(), splitters.size() * 8,
                              cudaMemcpyHostToDevice));
  GPUSORT_CUDA_TRY(cudaMemset(d_fill, 0, d * sizeof(unsigned long long)));
  GPUSORT_CUDA_TRY(cudaMemset(d_overflow, 0, sizeof(unsigned)));
  t.sample = seconds_since(t0);

  // Round 1: in, ordered by bucket, slices found, written to their buckets.
  const auto t1 = clock_type::now();
  void* buckets_device = nullptr;
  GPUSORT_CUDA_TRY(cudaHostGetDevicePointer(&buckets_device, buckets_host, 0));
  const unsigned id_bits = std::max(64U - static_cast<unsigned>(std::countl_zero(d - 1)), 1U);
  const auto count = static_cast<std::uint32_t>(d - 1);
  const std::uint64_t shared = classify_shared_bytes(count);
  for (std::uint64_t c = 0; c < sh.chunks; ++c) {
    slot& s = ring[c % ring.size()];
    const std::uint64_t first = c * sh.chunk;
    const std::uint64_t len = std::min(sh.chunk, n - first);
    std::uint64_t at = 0;
    auto* k = s.carve<std::uint64_t>(at, sh.chunk * 8);
    auto* k_alt = s.carve<std::uint64_t>(at, sh.chunk * 8);
    s.freed.make_wait(st.in.value());
    mark(true, in_stage, c, st.in.value());
    GPUSORT_CUDA_TRY(
        cudaMemcpyAsync(k, keys + first, len * 8, cudaMemcpyHostToDevice, st.in.value()));
    mark(false, in_stage, c, st.in.value());
    s.in.record(st.in.value());
    const cudaStream_t w = st.work.value();
    s.in.make_wait(w);
    mark(true, work_stage, c, w);
    const std::uint64_t* ordered = nullptr;
    const unsigned* bucket_counts = nullptr;
    if (how == order_by::sort) {
      const std::size_t scratch = gpusort::cuda::radix_sort_scratch_bytes(sh.chunk, 8, 0);
      void* d_scratch = s.carve<char>(at, scratch);
      ordered =
          gpusort::cuda::radix_sort(k, k_alt, nullptr, nullptr, len, 8, 0, d_scratch, scratch, w)
              ? k_alt
              : k;
    } else {
      auto* id = s.carve<std::uint32_t>(at, sh.chunk * 4);
      auto* id_alt = s.carve<std::uint32_t>(at, sh.chunk * 4);
      const std::size_t scratch = gpusort::cuda::radix_sort_scratch_bytes(sh.chunk, 4, 8);
      void* d_scratch = s.carve<char>(at, scratch);
      auto* counts = s.carve<unsigned>(at, d * 4);
      if (shared > 48 * 1024) throw std::runtime_error{"too many splitters for shared memory"};
      GPUSORT_CUDA_TRY(cudaMemsetAsync(counts, 0, d * 4, w));
      classify_kernel<<<264, 256, shared, w>>>(k, len, d_splitters, count, id, counts);
      GPUSORT_CUDA_TRY(cudaGetLastError());
      const bool alt = gpusort::cuda::radix_sort(id, id_alt, k, k_alt, len, 4, 8, d_scratch,
                                                 scratch, w, id_bits);
      ordered = alt ? k_alt : k;
      bucket_counts = counts;
    }
    // The chunks' tables in their order on one stream: each bucket's slices land in it in
    // the chunks' order.
    auto* table = s.carve<gather_slice>(at, table_bytes(d));
    if (bucket_counts != nullptr) {
      table_from_counts_kernel<<<1, table_threads, 0, w>>>(ordered, bucket_counts,
                                                           static_cast<std::uint32_t>(d),
                                                           sh.bucket, d_fill, table, d_overflow);
    } else {
      bucket_table_kernel<<<static_cast<unsigned>((d + 127) / 128), 128, 0, w>>>(
          ordered, len, d_splitters, static_cast<std::uint32_t>(d), sh.bucket, d_fill, table,
          d_overflow);
    }
    GPUSORT_CUDA_TRY(cudaGetLastError());
    mark(false, work_stage, c, w);
    s.worked.record(w);
    s.worked.make_wait(st.out.value());
    mark(true, out_stage, c, st.out.value());
    // The longest slice is not known here: the mean picks the kernel (a warp a slice for
    // short ones, blocks along long ones), and either takes slices of any length.
    gpusort::cuda::gather(table, static_cast<std::uint32_t>(d), len / d + 1, buckets_device, 8,
                          st.out.value());
    mark(false, out_stage, c, st.out.value());
    s.freed.record(st.out.value());
  }
  st.synchronize();
  t.round1 = seconds_since(t1);
  if (clock != nullptr) {
    t.busy1 = clock->busy();
    clock->reset();
  }
  unsigned overflow = 0;
  GPUSORT_CUDA_TRY(cudaMemcpy(&overflow, d_overflow, sizeof overflow, cudaMemcpyDeviceToHost));
  if (overflow != 0)
    throw std::runtime_error{"a bucket outgrew its region (raise --samples-per-bucket)"};
  std::vector<unsigned long long> fill(d);
  GPUSORT_CUDA_TRY(cudaMemcpy(fill.data(), d_fill, d * sizeof(fill[0]), cudaMemcpyDeviceToHost));

  // Round 2: each bucket in whole, sorted on the bits its splitters leave, out to its place.
  const auto t2 = clock_type::now();
  std::uint64_t out = 0;
  const std::size_t scratch = gpusort::cuda::radix_sort_scratch_bytes(sh.bucket, 8, 0);
  for (std::uint64_t j = 0; j < d; ++j) {
    slot& s = ring[j % ring.size()];
    const std::uint64_t len = fill[j];
    if (len > 0) {
      std::uint64_t at = 0;
      auto* k = s.carve<std::uint64_t>(at, sh.bucket * 8);
      auto* k_alt = s.carve<std::uint64_t>(at, sh.bucket * 8);
      void* d_scratch = s.carve<char>(at, scratch);
      const std::uint64_t lo = j == 0 ? 0 : splitters[j - 1];
      const std::uint64_t hi = j + 1 == d ? ~std::uint64_t{0} : splitters[j] - 1;
      const unsigned bits = std::max(64U - static_cast<unsigned>(std::countl_zero(lo ^ hi)), 1U);
      s.freed.make_wait(st.in.value());
      mark(true, in_stage, j, st.in.value());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(k, buckets_host + j * sh.bucket, len * 8,
                                       cudaMemcpyHostToDevice, st.in.value()));
      mark(false, in_stage, j, st.in.value());
      s.in.record(st.in.value());
      s.in.make_wait(st.work.value());
      mark(true, work_stage, j, st.work.value());
      const bool alt = gpusort::cuda::radix_sort(k, k_alt, nullptr, nullptr, len, 8, 0,
                                                 d_scratch, scratch, st.work.value(), bits);
      mark(false, work_stage, j, st.work.value());
      s.worked.record(st.work.value());
      s.worked.make_wait(st.out.value());
      mark(true, out_stage, j, st.out.value());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys + out, alt ? k_alt : k, len * 8,
                                       cudaMemcpyDeviceToHost, st.out.value()));
      mark(false, out_stage, j, st.out.value());
      s.freed.record(st.out.value());
    }
    out += len;
  }
  st.synchronize();
  t.round2 = seconds_since(t2);
  if (clock != nullptr) {
    t.busy2 = clock->busy();
    clock->reset();
  }
  t.total = seconds_since(t0);
  if (out != n) throw std::runtime_error{"the buckets do not hold every key"};
  return t;
}

/// One case: the median of --repeat runs after a warm-up, each verified, then with --profile a
/// run more whose stages are timed.
void run_case(const options& o, std::uint64_t* keys, std::uint64_t n, std::uint64_t divisor,
              unsigned slots, order_by how, std::ostringstream& raw)
{
  const std::uint64_t budget = n * 8 / divisor;
  const shape sh = shape_for(n, budget, how, slots);
  std::vector<slot> ring;
  for (unsigned i = 0; i < slots; ++i)
    ring.push_back(slot{device_buffer{sh.slot_bytes}, gpusort::cuda::cuda_event{},
                        gpusort::cuda::cuda_event{}, gpusort::cuda::cuda_event{}});
  stages st;
  device_buffer splitters{sh.buckets * 8}, fill{sh.buckets * 8}, overflow{sizeof(unsigned)};
  gpusort::detail::host_buffer buckets =
      gpusort::detail::pinned_host_buffer(sh.buckets * sh.bucket * 8);
  std::optional<stage_clock> clock;
  const auto one = [&](std::uint64_t seed) {
    gpusort::generate(std::span<std::uint64_t>{keys, n}, gpusort::distribution::uniform, seed);
    const gpusort::key_array view{keys, n, gpusort::dtype::u64};
    const gpusort::fingerprint before = gpusort::fingerprint_of(view);
    const times t = run_once(keys, n, sh, how, o.samples_per_bucket, buckets.as<std::uint64_t>(),
                             ring, st, splitters.data<std::uint64_t>(),
                             fill.data<unsigned long long>(), overflow.data<unsigned>(),
                             clock ? &*clock : nullptr);
    const gpusort::verify_result v =
        gpusort::verify(view, std::nullopt, gpusort::order::ascending, before);
    if (!v.ok) throw std::runtime_error{"not verified: " + v.message};
    return t;
  };
  std::vector<times> runs;
  for (std::uint64_t r = 0; r <= o.repeat; ++r) {  // the first a warm-up
    const times t = one(r + 1);
    if (r > 0) runs.push_back(t);
  }
  std::sort(runs.begin(), runs.end(),
            [](const times& a, const times& b) { return a.total < b.total; });
  const times m = runs[runs.size() / 2];
  const char* name = how == order_by::sort ? "sort" : "partition";
  std::printf("budget 1/%llu (%s), %u slots, round 1 by %s: chunks of %llu keys (%llu), %llu "
              "buckets of at most %llu: median %.3f s (%.2f GB/s) of %zu: sample %.3f, round 1 "
              "%.3f, round 2 %.3f s; verified\n",
              static_cast<unsigned long long>(divisor), gpusort::format_bytes(budget).c_str(),
              slots, name, static_cast<unsigned long long>(sh.chunk),
              static_cast<unsigned long long>(sh.chunks),
              static_cast<unsigned long long>(sh.buckets),
              static_cast<unsigned long long>(sh.bucket), m.total,
              static_cast<double>(n * 8) / 1e9 / m.total, runs.size(), m.sample, m.round1,
              m.round2);
  raw << "{\"divisor\": " << divisor << ", \"slots\": " << slots << ", \"round1\": \"" << name
      << "\", \"budget_bytes\": " << budget << ", \"chunk\": " << sh.chunk
      << ", \"chunks\": " << sh.chunks << ", \"bucket\": " << sh.bucket
      << ", \"buckets\": " << sh.buckets << ", \"seconds\": " << m.total
      << ", \"sample_seconds\": " << m.sample << ", \"round1_seconds\": " << m.round1
      << ", \"round2_seconds\": " << m.round2;
  if (o.profile) {
    clock.emplace(std::max(sh.chunks, sh.buckets));
    const times p = one(o.repeat + 2);
    std::printf("  profiled run %.3f s: round 1 %.3f s, busy: in %.3f, work %.3f, out %.3f; "
                "round 2 %.3f s, busy: in %.3f, work %.3f, out %.3f\n",
                p.total, p.round1, p.busy1[in_stage], p.busy1[work_stage], p.busy1[out_stage],
                p.round2, p.busy2[in_stage], p.busy2[work_stage], p.busy2[out_stage]);
    raw << ", \"profile\": {\"round1_seconds\": " << p.round1 << ", \"round1_busy\": ["
        << p.busy1[in_stage] << ", " << p.busy1[work_stage] << ", " << p.busy1[out_stage]
        << "], \"round2_seconds\": " << p.round2 << ", \"round2_busy\": ["
        << p.busy2[in_stage] << ", " << p.busy2[work_stage] << ", " << p.busy2[out_stage]
        << "]}";
  }
  raw << "},";
  std::fflush(stdout);
}

int run(const options& o)
{
  const std::uint64_t n = o.bytes / 8;
  if (n < 1024) throw gpusort::bench::usage_error{"--bytes: at least 8Ki"};
  GPUSORT_CUDA_TRY(cudaSetDevice(0));
  gpusort::detail::host_buffer array = gpusort::detail::pinned_host_buffer(n * 8);
  auto* keys = array.as<std::uint64_t>();
  std::ostringstream raw;
  std::printf("%s u64 uniform, registered, GPU 0, round 1 scattering into buckets\n",
              gpusort::format_bytes(n * 8).c_str());
  for (const std::uint64_t divisor : o.divisors) {
    for (const std::uint64_t slots : o.slots) {
      for (const order_by how : o.orders)
        run_case(o, keys, n, divisor, static_cast<unsigned>(slots), how, raw);
    }
  }
  if (!o.results.json.empty()) {
    std::string rows = raw.str();
    if (!rows.empty()) rows.pop_back();
    gpusort::bench::write_results(o.results.json, o.results.commit, o.results.machine, {}, rows,
                                  {});
  }
  return 0;
}

void set_option(options& o, std::string_view flag, const std::string& value)
{
  if (flag == "--bytes") o.bytes = gpusort::bench::parse_one_count(flag, value);
  if (flag == "--divisors") o.divisors = gpusort::bench::parse_counts(flag, value);
  if (flag == "--slots") {
    o.slots = gpusort::bench::parse_counts(flag, value);
    for (const std::uint64_t k : o.slots)
      if (k < 2 || k > 8) throw gpusort::bench::usage_error{"--slots: 2 to 8 each"};
  }
  if (flag == "--round1") {
    o.orders.clear();
    static constexpr std::string_view names[] = {"sort", "partition"};
    for (const std::string& name : gpusort::bench::parse_names(flag, value, names))
      o.orders.push_back(name == "sort" ? order_by::sort : order_by::partition);
  }
  if (flag == "--repeat") o.repeat = gpusort::bench::parse_one_count(flag, value, 100);
  if (flag == "--profile") {
    if (value != "yes" && value != "no")
      throw gpusort::bench::usage_error{"--profile: yes or no, not '" + value + "'"};
    o.profile = value == "yes";
  }
  if (flag == "--samples-per-bucket")
    o.samples_per_bucket = gpusort::bench::parse_one_count(flag, value, 1 << 20);
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "scatter_bench", usage, argc, argv,
      {"--bytes", "--divisors", "--slots", "--round1", "--repeat", "--samples-per-bucket",
       "--profile"},
      set_option, run);
}
