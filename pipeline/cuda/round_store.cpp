// The copy-out stage of a GPU's ring: a slot's sorted tasks back to host memory.
#include "pipeline/cuda/round_state.hpp"

#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "pipeline/device.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace gpusort::detail::gpu_ring {

void round_state::store(slot& s)
{
  const cudaStream_t st = d2h.value();
  s.computed.make_wait(st);
  begin(s, gpu_stage::copy_out, st);
  const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
  const chunk_task& first = *s.tasks.front();
  std::vector<std::uint64_t>* const behind =
      first.encode == nullptr && staging::writes_behind() ? &s.behind : nullptr;
  std::uint64_t out_bytes = 0;
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const chunk_task& t = *s.tasks[i];
    const std::uint64_t at = s.at[i];
    out_bytes += t.count * vb;
    if (s.encoded) {
      copy_to_host(t.encode->index, s.keys.data<char>(), s.index_bytes, st, out_staging);
      void* const stream = t.encode->stream != nullptr ? t.encode->stream : t.dst_keys;
      copy_to_host(stream, s.keys.data<char>() + s.index_bytes, s.outcome.stream_bytes, st,
                   out_staging);
      out_bytes += s.index_bytes + s.outcome.stream_bytes;
    } else {
      copy_to_host(t.dst_keys, s.keys.data<char>() + at * kb, t.count * kb, st, out_staging,
                   behind);
      out_bytes += t.count * kb;
    }
    if (vb > 0)
      copy_to_host(t.dst_values, s.values.data<char>() + at * vb, t.count * vb, st,
                   out_staging, behind);
  }
  end(s, gpu_stage::copy_out, st, out_bytes);
  for (const chunk_task* t : s.tasks) write_equal_tail(*t, layout);  // overlaps the copies
  s.stored.record(st);
  if (behind != nullptr) return;
  // Nothing is left behind: the releaser's finish_store then only marks the slot done.
  s.stored.synchronize();
  if (first.encode != nullptr) *first.encode->result = s.outcome;
}

void round_state::store_scattered(slot& s, const std::function<void()>& check)
{
  const cudaStream_t st = d2h.value();
  GPUSORT_CUDA_TRY(cudaEventSynchronize(s.computed.value()));
  if (profiling) s.host_marks[0] = std::chrono::steady_clock::now();
  begin(s, gpu_stage::copy_out, st);
  const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
  std::uint64_t out_bytes = 0;
  const auto* counts = s.scatter_counts.data<std::uint64_t>();
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const chunk_task& t = *s.tasks[i];
    const scatter_target& target = *t.scatter;
    const std::uint64_t buckets = target.buckets->count();
    const std::uint64_t bounds = buckets - 1;
    const std::uint64_t* below = counts + i * 2 * bounds;
    scatter_lengths.resize(buckets);
    scatter_places_at.resize(buckets);
    std::uint64_t from = 0;
    for (std::uint64_t b = 0; b < buckets; ++b) {
      const std::uint64_t to = b < bounds ? below[b] : t.count;
      GPUSORT_EXPECTS(to >= from && to <= t.count, "a bucket's count within its chunk");
      scatter_lengths[b] = to - from;
      from = to;
    }
    target.places->place(target.chunk, scatter_lengths, scatter_places_at, check);
    if (profiling) s.host_marks[1] = std::chrono::steady_clock::now();
    out_bytes += t.count * layout.bytes();
    const char* d_keys = s.keys.data<char>() + s.at[i] * kb;
    const char* d_values = vb > 0 ? s.values.data<char>() + s.at[i] * vb : nullptr;
    scatter_array(t, d_keys, t.dst_keys, kb, s.key_table_host.data<cuda::gather_slice>() +
                  s.entry_at[i], static_cast<cuda::gather_slice*>(s.d_key_table) + s.entry_at[i]);
    if (vb > 0)
      scatter_array(t, d_values, t.dst_values, vb,
                    s.value_table_host.data<cuda::gather_slice>() + s.entry_at[i],
                    static_cast<cuda::gather_slice*>(s.d_value_table) + s.entry_at[i]);
  }
  end(s, gpu_stage::copy_out, st, out_bytes);
  s.stored.record(st);
  if (profiling) s.host_marks[2] = std::chrono::steady_clock::now();
}

void round_state::scatter_array(const chunk_task& t, const char* d_src, void* dst,
                                std::uint64_t element_bytes, cuda::gather_slice* entries,
                                cuda::gather_slice* d_table)
{
  const cudaStream_t st = d2h.value();
  const char* mapped = mapped_address(dst);
  std::uint64_t from = 0;
  std::size_t used = 0;
  for (std::size_t b = 0; b < scatter_lengths.size(); ++b) {
    const std::uint64_t length = scatter_lengths[b];
    if (length > 0 && mapped != nullptr) {
      // scatter_lines reads each slice from the sorted chunk and writes it to the round-1
      // buffer at its place.
      entries[used++] = {d_src + from * element_bytes, length, scatter_places_at[b]};
    } else if (length > 0) {
      copy_to_host(static_cast<char*>(dst) + scatter_places_at[b] * element_bytes,
                   d_src + from * element_bytes, length * element_bytes, st, out_staging);
    }
    from += length;
  }
  GPUSORT_EXPECTS(from == t.count, "a task's buckets hold its keys");
  if (used == 0) return;
  const auto* d_entries =
      scatter_table_mapped
          ? reinterpret_cast<const cuda::gather_slice*>(mapped_address(entries))
          : nullptr;
  if (d_entries == nullptr) {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_table, entries, used * sizeof(cuda::gather_slice),
                                     cudaMemcpyHostToDevice, st));
    d_entries = d_table;
  }
  for (std::size_t first = 0; first < used; first += max_slices_per_launch)
    cuda::scatter_lines(d_entries + first,
                        static_cast<std::uint32_t>(
                            std::min<std::size_t>(max_slices_per_launch, used - first)),
                        const_cast<char*>(mapped), static_cast<unsigned>(element_bytes),
                        scatter_blocks, st);
}

void round_state::finish_store(slot& s)
{
  s.stored.synchronize();
  for (const std::uint64_t ticket : s.behind) out_staging.finish(ticket);
  s.behind.clear();
  // Only a scattering store marks its host times (store_scattered): a plain store's trace line
  // has no host part, where one mark among three unset ones read as times before the round.
  if (profiling && s.host_marks[0] != std::chrono::steady_clock::time_point{})
    s.host_marks[3] = std::chrono::steady_clock::now();
}

}  // namespace gpusort::detail::gpu_ring
