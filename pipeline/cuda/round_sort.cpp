// The compute stage of a GPU's ring: a slot's tasks sorted, dealt, encoded or counted.
#include "pipeline/cuda/round_state.hpp"

#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/merge_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "core/cuda/run_codec.cuh"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

namespace gpusort::detail::gpu_ring {

void round_state::sort(slot& s)
{
  const cudaStream_t st = compute.value();
  s.loaded.make_wait(st);
  begin(s, gpu_stage::sort, st);
  std::uint64_t bytes = 0;
  for (const chunk_task* t : s.tasks) bytes += t->count * layout.bytes();
  const std::size_t n = s.tasks.size();
  bool to_alt = false;
  if (n == 1) {
    to_alt = sort_task(s, *s.tasks.front(), 0, st, scratch.data(), sizes.scratch);
  } else {
    fork.record(st);
    const std::size_t part = lane_scratch_bytes(n);
    std::array<bool, max_sort_lanes> in_alt{};
    for (std::size_t i = 0; i < n; ++i) {
      const cudaStream_t lane = i == 0 ? st : lanes[i - 1].value();
      if (i > 0) fork.make_wait(lane);
      in_alt[i] = sort_task(s, *s.tasks[i], s.at[i], lane, scratch.data<char>() + i * part,
                            part);
      if (i > 0) joined[i - 1].record(lane);
    }
    for (std::size_t i = 1; i < n; ++i) joined[i - 1].make_wait(st);
    // The lanes' results lie where their sorts and deals left them: those in the minority
    // cross over in device memory (microseconds), so that one buffer holds them all.
    const auto alts = std::count(in_alt.begin(), in_alt.begin() + static_cast<std::ptrdiff_t>(n),
                                 true);
    to_alt = 2 * static_cast<std::size_t>(alts) > n;
    // Task i's elements of `width` bytes each, from its place in one of `mine` (the slot's)
    // and `alt` to its place in the other.
    const auto cross = [&](std::size_t i, const cuda::device_buffer& mine,
                           const cuda::device_buffer& alt, unsigned width) {
      const std::uint64_t from = s.at[i] * width, count = s.tasks[i]->count * width;
      char* const src = (to_alt ? mine : alt).data<char>() + from;
      char* const dst = (to_alt ? alt : mine).data<char>() + from;
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, st));
    };
    for (std::size_t i = 0; i < n; ++i) {
      if (in_alt[i] == to_alt) continue;
      cross(i, s.keys, alt_keys, layout.key_bytes);
      if (layout.value_bytes > 0) cross(i, s.values, alt_values, layout.value_bytes);
    }
  }
  if (to_alt) {
    std::swap(s.keys, alt_keys);
    std::swap(s.values, alt_values);
  }
  if (s.tasks.front()->scatter != nullptr) count_buckets(s, st);
  end(s, gpu_stage::sort, st, bytes);
  const chunk_task& first = *s.tasks.front();
  if (first.encode != nullptr) {
    encode(s, first);
    if (!s.encoded && !first.dst_ordered)
      cuda::from_ordered(s.keys.data(), first.count, layout.keys(), st);
  }
  s.computed.record(st);
}

bool round_state::sort_task(slot& s, const chunk_task& t, std::uint64_t at, cudaStream_t st,
                            void* d_scratch, std::size_t scratch_bytes)
{
  const unsigned kb = layout.key_bytes, vb = layout.value_bytes;
  char* keys[2] = {s.keys.data<char>() + at * kb, alt_keys.data<char>() + at * kb};
  char* values[2] = {vb > 0 ? s.values.data<char>() + at * vb : nullptr,
                     vb > 0 ? alt_values.data<char>() + at * vb : nullptr};
  int in = 0;  // where the task's elements lie: 0 the slot's buffers, 1 the alternates
  if (!t.src_ordered) cuda::to_ordered(keys[0], t.count, layout.keys(), st);
  // A scattering round whose bounds are aligned needs its chunks in order of their top bits
  // alone: CUB's radix sort on those, where its scratch fits (whatever the in-core sort).
  const bool top_bits =
      t.begin_bit > 0 && cuda::radix_sort_scratch_bytes(t.count, kb, vb) <= scratch_bytes;
  if (top_bits ? cuda::radix_sort(keys[0], keys[1], values[0], values[1], t.count, kb, vb,
                                  d_scratch, scratch_bytes, st, 0, t.begin_bit)
               : sorter.sort(keys[0], keys[1], values[0], values[1], t.count, kb, vb,
                             d_scratch, scratch_bytes, st, t.key_bits))
    in = 1;
  if (t.deal_bins > 1) {
    cuda::deal(keys[in], values[in], t.count, t.deal_bins, keys[1 - in], values[1 - in], kb,
               vb, st);
    in = 1 - in;
  }
  if (t.encode == nullptr && !t.dst_ordered)
    cuda::from_ordered(keys[in], t.count, layout.keys(), st);
  return in == 1;
}

void round_state::encode(slot& s, const chunk_task& t)
{
  const encode_target& target = *t.encode;
  GPUSORT_EXPECTS(target.index != nullptr && target.result != nullptr,
                  "an encode target has an index and a result");
  s.outcome = {.stream_bytes = 0, .raw = t.count > 0};
  s.encoded = false;
  s.index_bytes = 0;
  if (t.count == 0) return;  // no blocks: an empty stream and index
  const cudaStream_t st = compute.value();
  const unsigned kb = layout.key_bytes;
  const std::uint64_t runs = std::max<std::uint64_t>(t.deal_bins, 1);
  const std::size_t need = cuda::run_codec_scratch_bytes(t.count, runs);
  if (need > sizes.scratch) {
    // More runs than ring_scratch_bytes planned for: rare, and only between chunks.
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
    scratch = cuda::device_buffer{};
    scratch = cuda::device_buffer{need};
    sizes.scratch = need;
  }
  begin(s, gpu_stage::encode, st);
  auto* measured = s.measured.data<std::uint64_t>();
  cuda::encoded_size(s.keys.data(), t.count, runs, kb, measured, scratch.data(), sizes.scratch,
                     st);
  GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
  const std::uint64_t stream_bytes = *measured;
  const std::uint64_t index_bytes =
      codec::dealt_blocks(t.count, runs) * sizeof(codec::run_block);
  // A stream that does not fit beside its index is one of keys that barely compress (its
  // index is 0.3% of u32 keys): not worth decoding whatever the target says.
  const bool fits = index_bytes <= sizes.keys && stream_bytes <= sizes.keys - index_bytes;
  if (stream_bytes <= target.raw_above && fits) {
    char* base = alt_keys.data<char>();
    cuda::encode_runs(s.keys.data(), t.count, runs, kb,
                      reinterpret_cast<codec::run_block*>(base), base + index_bytes,
                      sizes.keys - index_bytes, nullptr, scratch.data(), sizes.scratch, st);
    std::swap(s.keys, alt_keys);
    s.outcome = {.stream_bytes = stream_bytes, .raw = false};
    s.encoded = true;
    s.index_bytes = index_bytes;
  }
  end(s, gpu_stage::encode, st, t.count * kb);
}

void round_state::count_buckets(slot& s, cudaStream_t st)
{
  const scatter_buckets& buckets = *s.tasks.front()->scatter->buckets;
  const std::span<const std::uint64_t> probes = buckets.probes();
  if (probes.empty()) return;  // one bucket: the whole chunk
  GPUSORT_EXPECTS(probes.size() <= table_entries, "the tables hold a bound a bucket");
  if (scatter_source != &buckets) {
    // Once a round, in stream order before the first count: the count kernel's reads of
    // mapped host memory waited behind the link's copies (issue 44).
    if (scatter_probes.size() < probes.size_bytes())
      scatter_probes = cuda::pinned_buffer{probes.size_bytes()};
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));  // the staging's last copy is done
    std::memcpy(scatter_probes.data(), probes.data(), probes.size_bytes());
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_bounds, scatter_probes.data(), probes.size_bytes(),
                                     cudaMemcpyHostToDevice, st));
    scatter_source = &buckets;
  }
  const std::uint64_t per_task = 2 * probes.size();
  const std::uint64_t need = per_task * s.tasks.size() * sizeof(std::uint64_t);
  if (s.scatter_counts.size() < need)
    s.scatter_counts = cuda::pinned_buffer{need, cudaHostAllocPortable | cudaHostAllocMapped};
  auto* d_counts = reinterpret_cast<std::uint64_t*>(
      const_cast<char*>(mapped_address(s.scatter_counts.data())));
  GPUSORT_EXPECTS(d_counts != nullptr, "the scatter's counts are mapped pinned memory");
  if (profiling) s.count_marks[0].record(st);
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const cuda::key_run r{s.keys.data<char>() + s.at[i] * layout.key_bytes, s.tasks[i]->count};
    cuda::count_below_runs({&r, 1}, layout.key_bytes, d_bounds, d_counts + i * per_task,
                           per_task, static_cast<std::uint32_t>(probes.size()), st);
  }
  if (profiling) s.count_marks[1].record(st);
  s.counted = profiling;
}

}  // namespace gpusort::detail::gpu_ring
