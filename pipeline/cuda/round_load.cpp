// The copy-in stage of a GPU's ring: a slot's tasks from host memory into its buffers.
#include "pipeline/cuda/round_state.hpp"

#include "core/checks.hpp"
#include "core/cuda/run_codec.cuh"
#include "core/log.hpp"
#include "core/run_codec.hpp"
#include "pipeline/file_window.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

namespace gpusort::detail::gpu_ring {

namespace {

/// The offset from host to device addresses that holds for both ends of a range a kernel reads
/// (`low` and `high`, in mapped pinned memory), or nullopt where either is not mapped or they
/// map apart: round 2 translates the addresses of its encoded slices, up to d^2 per task, with
/// one lookup for each end instead of one each (they all lie in the round-1 buffer).
std::optional<std::uintptr_t> common_mapping(std::uintptr_t low, std::uintptr_t high) noexcept
{
  const char* d_low = mapped_address(reinterpret_cast<const void*>(low));
  const char* d_high = mapped_address(reinterpret_cast<const void*>(high));
  if (d_low == nullptr || d_high == nullptr) return std::nullopt;
  const std::uintptr_t shift = reinterpret_cast<std::uintptr_t>(d_low) - low;
  if (reinterpret_cast<std::uintptr_t>(d_high) - high != shift) return std::nullopt;
  return shift;
}

/// What the decode kernel reads of one encoded slice (core/cuda/run_codec/kernels.cuh): its
/// blocks' index entries and, of its stream, every block's words up to the slice's last key.
struct slice_reads {
  std::uint64_t blocks{};
  std::uint64_t stream_bytes{};
};

slice_reads reads_of(const codec::encoded_slice& e)
{
  if (e.last <= e.first) return {};
  const std::uint64_t first_block = e.first / codec::block_keys;
  const std::uint64_t blocks = (e.last - 1) / codec::block_keys - first_block + 1;
  const codec::run_block& last = e.index[blocks - 1];
  const auto keys_to = static_cast<std::uint32_t>(
      e.last - (first_block + blocks - 1) * codec::block_keys);  // in the last block
  return {blocks, last.byte_offset - e.index[0].byte_offset + codec::block_bytes(last.width,
                                                                                  keys_to)};
}

}  // namespace

void round_state::load(slot& s)
{
  // The slot's last chunk may have been encoded (the ring serves both rounds): only this
  // chunk's compute stage may say so of this one.
  s.ran = {};
  s.stage_bytes = {};
  s.outcome = {};
  s.encoded = false;
  s.index_bytes = 0;
  const cudaStream_t st = h2d.value();
  begin(s, gpu_stage::copy_in, st);
  std::uint64_t in_bytes = 0;
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const std::size_t end = i + 1 < s.tasks.size() ? s.entry_at[i + 1] : table_entries;
    in_bytes += load_task(s, *s.tasks[i], s.at[i], s.entry_at[i],
                          end > s.entry_at[i] ? end - s.entry_at[i] : 0);
  }
  end(s, gpu_stage::copy_in, st, in_bytes);
  s.loaded.record(st);
}

std::uint64_t round_state::load_task(slot& s, const chunk_task& t, std::uint64_t at,
                                     std::size_t entries, std::size_t room)
{
  const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
  const cudaStream_t st = h2d.value();
  std::uint64_t in_bytes = t.count * vb;
  // Every chunk stored raw (auto found nothing worth encoding): copied as without compression,
  // by the copy engines where the slices are long, rather than gathered by a kernel.
  const bool decode =
      std::any_of(t.encoded.begin(), t.encoded.end(),
                  [](const codec::encoded_slice& e) { return e.index != nullptr; });
  if (!decode) {
    load_array(t, false, kb, s.keys.data<char>() + at * kb,
               s.key_table_host.data<cuda::gather_slice>() + entries,
               static_cast<cuda::gather_slice*>(s.d_key_table) + entries, room);
    in_bytes += t.count * kb;
  } else {
    GPUSORT_EXPECTS(t.encoded.size() == t.slices.size(), "one encoded entry per slice");
    GPUSORT_EXPECTS(s.tasks.size() == 1, "a task that decodes has its slot to itself");
    begin(s, gpu_stage::decode, st);
    std::optional<std::uint64_t> read = load_encoded_keys(s, t);
    if (!read) read = load_decoded_on_host(s, t);
    end(s, gpu_stage::decode, st, *read);
    in_bytes += *read;
  }
  if (vb > 0)
    load_array(t, true, vb, s.values.data<char>() + at * vb,
               s.value_table_host.data<cuda::gather_slice>() + entries,
               static_cast<cuda::gather_slice*>(s.d_value_table) + entries, room);
  return in_bytes;
}

void round_state::load_array(const chunk_task& t, bool values, std::uint64_t element_bytes,
                             char* d_out, cuda::gather_slice* entries, cuda::gather_slice* d_table,
                             std::size_t room)
{
  const void* src = values ? t.src_values : t.src_keys;
  const bool two_parts = !t.from_alt.empty();
  const char* mapped = t.src_ordered && !two_parts ? mapped_address(src) : nullptr;
  const bool short_slices = has_short_slices(t, element_bytes);
  if (takes_gather_kernel(mapped, short_slices) && t.slices.size() <= room) {
    gather_mapped(t.slices, mapped, element_bytes, d_out, entries, d_table);
    return;
  }
  // Packed on the host where the kernel would gather (short slices of memory: pack_in reads
  // no file window); long ones cross whole.
  const bool packed =
      gather == gather_mode::host && short_slices && !find_file_window(src).has_value();
  if (t.slices.size() > 1 && mapped != nullptr && !packed &&
      batch_copies(t, values, element_bytes, d_out))
    return;
  const bool pinned =
      is_pinned(src) && (!two_parts || is_pinned(values ? t.alt_src_values : t.alt_src_keys));
  // A pageable round-1 buffer (or GPUSORT_GATHER=host): packed pieces.
  if (t.slices.size() > 1 && (!pinned || packed)) {
    gather_runs.clear();
    for (std::size_t i = 0; i < t.slices.size(); ++i)
      if (t.slices[i].length > 0)
        gather_runs.push_back({.data = t.slice_source(i, values, element_bytes),
                               .bytes = t.slices[i].length * element_bytes});
    if (packed)
      in_staging.pack_in(d_out, gather_runs, h2d.value());
    else
      in_staging.gather_in(d_out, gather_runs, h2d.value());
    return;
  }
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    copy_to_device(d_out + at * element_bytes, t.slice_source(i, values, element_bytes),
                   t.slices[i].length * element_bytes, h2d.value(), in_staging);
    at += t.slices[i].length;
  }
}

void round_state::gather_table(const cuda::gather_slice* d_entries, std::size_t count,
                               std::uint64_t longest, std::uint64_t element_bytes, char* d_out,
                               cudaStream_t stream)
{
  for (std::size_t first = 0; first < count; first += max_slices_per_launch) {
    const auto group =
        static_cast<std::uint32_t>(std::min<std::size_t>(max_slices_per_launch, count - first));
    cuda::gather(d_entries + first, group, longest, d_out,
                 static_cast<unsigned>(element_bytes), stream, gather_tuning);
  }
}

void round_state::gather_mapped(const std::vector<run>& slices, const char* d_base,
                                std::uint64_t element_bytes, char* d_out,
                                cuda::gather_slice* entries, cuda::gather_slice* d_table)
{
  std::uint64_t at = 0, longest = 0;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    entries[i] = {d_base + slices[i].offset * element_bytes, slices[i].length, at};
    at += slices[i].length;
    longest = std::max(longest, slices[i].length);
  }
  GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_table, entries,
                                   slices.size() * sizeof(cuda::gather_slice),
                                   cudaMemcpyHostToDevice, h2d.value()));
  gather_table(d_table, slices.size(), longest, element_bytes, d_out, h2d.value());
}

bool round_state::batch_copies(const chunk_task& t, bool values, std::uint64_t element_bytes,
                               char* d_out)
{
  if (!batch_supported) return false;
  batch_dst.clear();
  batch_src.clear();
  batch_size.clear();
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const std::uint64_t length = t.slices[i].length;
    if (length == 0) continue;
    batch_dst.push_back(d_out + at * element_bytes);
    batch_src.push_back(t.slice_source(i, values, element_bytes));
    batch_size.push_back(length * element_bytes);
    at += length;
  }
  if (batch_dst.empty()) return true;
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t first_index = 0;
  const cudaError_t e = GPUSORT_CUDA_CALL(
      copy, cudaMemcpyBatchAsync(batch_dst.data(), batch_src.data(), batch_size.data(),
                                 batch_dst.size(), &attributes, &first_index, 1, h2d.value()));
  if (e == cudaErrorNotSupported || e == cudaErrorCallRequiresNewerDriver) {
    cudaGetLastError();
    batch_supported = false;
    return false;
  }
  GPUSORT_CUDA_TRY(e);
  return true;
}

std::optional<std::uint64_t> round_state::load_encoded_keys(slot& s, const chunk_task& t)
{
  const std::uint64_t kb = layout.key_bytes;
  // The lowest and highest addresses the kernels read, of each kind, to translate them all
  // with one lookup per end.
  std::uintptr_t index_low = UINTPTR_MAX, index_high = 0, stream_low = UINTPTR_MAX,
                 stream_high = 0;
  std::uint64_t most_blocks = 0, read_bytes = 0, longest_raw = 0;
  std::size_t encoded_count = 0, raw_count = 0;
  // The kernel reads the index and the stream as 8-byte words (the format's alignment, which
  // both codecs' encoders demand of a stream): anything else is decoded on the host.
  bool aligned = true;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const codec::encoded_slice& e = t.encoded[i];
    if (e.index == nullptr) {
      ++raw_count;
      longest_raw = std::max(longest_raw, t.slices[i].length);
      read_bytes += t.slices[i].length * kb;
      continue;
    }
    GPUSORT_EXPECTS(e.last - e.first == t.slices[i].length,
                    "an encoded slice covers as many keys as its slice");
    const slice_reads r = reads_of(e);
    if (r.blocks == 0) continue;
    ++encoded_count;
    most_blocks = std::max(most_blocks, r.blocks);
    read_bytes += r.blocks * sizeof(codec::run_block) + r.stream_bytes;
    const auto index_at = reinterpret_cast<std::uintptr_t>(e.index);
    const auto stream_at = reinterpret_cast<std::uintptr_t>(e.stream);
    index_low = std::min(index_low, index_at);
    index_high = std::max(index_high, index_at + r.blocks * sizeof(codec::run_block) - 1);
    aligned = aligned && index_at % 8 == 0;
    // A stream of no bytes (equal keys) is never read, wherever it points.
    if (r.stream_bytes == 0) continue;
    aligned = aligned && stream_at % 8 == 0;
    stream_low = std::min(stream_low, stream_at);
    stream_high = std::max(stream_high, stream_at + r.stream_bytes - 1);
  }
  std::optional<std::uintptr_t> index_shift{0}, stream_shift{0};
  if (encoded_count > 0) index_shift = common_mapping(index_low, index_high);
  if (stream_high > 0) stream_shift = common_mapping(stream_low, stream_high);
  const char* d_src = raw_count > 0 ? mapped_address(t.src_keys) : nullptr;
  if (!aligned || !index_shift || !stream_shift || (raw_count > 0 && d_src == nullptr))
    return std::nullopt;

  auto* decode_host = s.key_table_host.data<codec::encoded_slice>();
  auto* gather_host = reinterpret_cast<cuda::gather_slice*>(s.key_table_host.data<char>() +
                                                            decode_table_bytes());
  std::size_t next_encoded = 0, next_raw = 0;
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const codec::encoded_slice& e = t.encoded[i];
    const std::uint64_t length = t.slices[i].length;
    if (e.index == nullptr) {
      gather_host[next_raw++] = {d_src + t.slices[i].offset * kb, length, at};
    } else if (length > 0) {
      GPUSORT_EXPECTS(e.dst_offset == at,
                      "an encoded slice's dst_offset is where its keys lie in the task");
      decode_host[next_encoded++] = {
          reinterpret_cast<const codec::run_block*>(reinterpret_cast<std::uintptr_t>(e.index) +
                                                    *index_shift),
          reinterpret_cast<const std::byte*>(reinterpret_cast<std::uintptr_t>(e.stream) +
                                             *stream_shift),
          e.first, e.last, at};
    }
    at += length;
  }
  char* d_out = s.keys.data<char>();
  const cudaStream_t st = h2d.value();
  if (encoded_count > 0) {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(s.d_key_table, decode_host,
                                     encoded_count * sizeof(codec::encoded_slice),
                                     cudaMemcpyHostToDevice, st));
    const auto* d_decode = static_cast<const codec::encoded_slice*>(s.d_key_table);
    for (std::size_t first = 0; first < encoded_count; first += max_slices_per_launch) {
      const auto group = static_cast<std::uint32_t>(
          std::min<std::size_t>(max_slices_per_launch, encoded_count - first));
      cuda::decode_slices(d_decode + first, group, most_blocks, d_out,
                          static_cast<unsigned>(kb), st);
    }
  }
  if (raw_count > 0) {
    auto* d_gather = reinterpret_cast<cuda::gather_slice*>(static_cast<char*>(s.d_key_table) +
                                                           decode_table_bytes());
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_gather, gather_host,
                                     raw_count * sizeof(cuda::gather_slice),
                                     cudaMemcpyHostToDevice, st));
    gather_table(d_gather, raw_count, longest_raw, kb, d_out, h2d.value());
  }
  return read_bytes;
}

std::uint64_t round_state::load_decoded_on_host(slot& s, const chunk_task& t)
{
  log(log_level::debug,
      "round 2 decodes {} slices ({} keys) on the host: the round-1 buffer or its index is "
      "not mapped pinned memory, or a stream is not 8-byte aligned",
      t.slices.size(), t.count);
  const std::uint64_t kb = layout.key_bytes;
  // Checked here: the decoding below runs in parallel, where nothing may throw.
  slice_at.resize(t.slices.size());
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const codec::encoded_slice& e = t.encoded[i];
    const std::uint64_t length = t.slices[i].length;
    GPUSORT_EXPECTS(at + length <= t.count, "a task's slices hold `count` elements");
    GPUSORT_EXPECTS(e.index == nullptr || length == 0 ||
                        (e.dst_offset == at && e.last - e.first == length),
                    "an encoded slice matches its slice");
    slice_at[i] = at;
    at += length;
  }
  decoded.resize((t.count * kb + 7) / 8);
  auto decode_all = [&]<typename K>() {
    const std::span<K> out{reinterpret_cast<K*>(decoded.data()), t.count};
    const auto slices = static_cast<std::int64_t>(t.slices.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (std::int64_t i = 0; i < slices; ++i) {
      const codec::encoded_slice& e = t.encoded[static_cast<std::size_t>(i)];
      const run& sl = t.slices[static_cast<std::size_t>(i)];
      if (sl.length == 0) continue;
      if (e.index == nullptr)
        std::memcpy(out.data() + slice_at[static_cast<std::size_t>(i)],
                    static_cast<const char*>(t.src_keys) + sl.offset * kb, sl.length * kb);
      else
        codec::decode<K>(e, out);
    }
  };
  if (kb == 4) decode_all.template operator()<std::uint32_t>();
  else decode_all.template operator()<std::uint64_t>();
  copy_to_device(s.keys.data<char>(), decoded.data(), t.count * kb, h2d.value(), in_staging);
  return t.count * kb;
}

}  // namespace gpusort::detail::gpu_ring
