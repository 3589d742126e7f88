#include "pipeline/host_device.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "core/plan/dealing.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

namespace gpusort::detail {

namespace {

/// The host device's memory for one round: chunk buffer A, and buffer B that holds the dealt
/// chunk (keys, then values from an 8-byte boundary: 4-byte keys of an odd count would
/// misalign 8-byte values) or, during the sort, the sorter's scratch.
template <typename K, typename V>
struct chunk_buffers {
  static constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  std::uint64_t elements;
  host_buffer a_keys, a_values, b;
  explicit chunk_buffers(std::uint64_t n)
      : elements{n},
        a_keys{n * sizeof(K)},
        a_values{n * value_size},
        b{values_offset(n) + n * value_size}
  {
    static_assert(cpu_sort_scratch_bytes<K, V>(1) <= sizeof(K) + value_size);
  }
  static constexpr std::uint64_t values_offset(std::uint64_t n) noexcept
  {
    return (n * sizeof(K) + 7) / 8 * 8;
  }
  [[nodiscard]] K* b_keys() const noexcept { return b.as<K>(); }
  [[nodiscard]] V* b_values() const noexcept
  {
    return reinterpret_cast<V*>(b.as<char>() + values_offset(elements));
  }
  [[nodiscard]] void* scratch() const noexcept { return b.data(); }
};

/// Whether slice i of a round-2 task arrives encoded (chunk_task::encoded).
bool encoded_slice_at(const chunk_task& task, std::size_t i) noexcept
{
  return !task.encoded.empty() && task.encoded[i].index != nullptr;
}

/// Copies the task's slices into A, turning raw keys into ordered bits on the way, and decodes
/// those that arrive encoded, in parallel (codec::decode checks each one's place in A).
template <typename K, typename V>
void gather(const chunk_task& task, const element_layout& layout, K* keys, V* values)
{
  std::uint64_t at = 0;
  for (std::size_t i = 0; i < task.slices.size(); ++i) {
    const run& sl = task.slices[i];
    const auto* src = reinterpret_cast<const K*>(task.slice_source(i, false, sizeof(K)));
    if (encoded_slice_at(task, i)) {
      // decoded below
    } else if (task.src_ordered) {
      host_read(keys + at, src, sl.length * sizeof(K));
    } else if (find_file_window(src)) {
      // The lean path's arrays in files (pipeline/lean/): read, then map in place.
      host_read(keys + at, src, sl.length * sizeof(K));
      to_ordered_bits<K>(keys + at, keys + at, sl.length, layout.keys());
    } else {
      to_ordered_bits<K>(src, keys + at, sl.length, layout.keys());
    }
    if constexpr (!std::is_same_v<V, no_value>)
      host_read(values + at, task.slice_source(i, true, sizeof(V)), sl.length * sizeof(V));
    at += sl.length;
  }
  if (task.encoded.empty()) return;
  const auto slices = static_cast<std::int64_t>(task.slices.size());
  // Round 2 gathers d slices per run set: small tasks decode on one thread rather than wake
  // a team per task for a few thousand keys.
#pragma omp parallel for schedule(dynamic) if (task.count >= (std::uint64_t{1} << 16))
  for (std::int64_t i = 0; i < slices; ++i) {
    const auto at_i = static_cast<std::size_t>(i);
    if (encoded_slice_at(task, at_i))
      codec::decode<K>(task.encoded[at_i], std::span<K>{keys, task.count});
  }
}

/// Round 1 of a compressed job: encodes the m dealt keys (d runs) into `stream` (8-byte aligned,
/// room for the m keys) and `index` (codec::dealt_blocks(m, d) entries), the runs' streams back
/// to back: a first parallel pass sizes every run, a second encodes each at its offset.
/// Returns the stream bytes.
template <typename K>
std::uint64_t encode_dealt(const K* dealt, std::uint64_t m, std::uint64_t d, std::byte* stream,
                           std::span<codec::run_block> index)
{
  const auto bins = static_cast<std::int64_t>(d);
  const auto run_keys = [&](std::uint64_t j) {
    return std::span<const K>{dealt + bin_offset(m, d, j), bin_size(m, d, j)};
  };
  std::vector<std::uint64_t> at(d + 1, 0);
  const bool parallel = m >= (std::uint64_t{1} << 16);
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t j = 0; j < bins; ++j) {
    const auto bin = static_cast<std::uint64_t>(j);
    at[bin + 1] = codec::encoded_bytes(run_keys(bin));
  }
  std::partial_sum(at.begin(), at.end(), at.begin());
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t j = 0; j < bins; ++j) {
    const auto bin = static_cast<std::uint64_t>(j);
    const std::span<codec::run_block> entries =
        index.subspan(codec::dealt_first_block(m, d, bin), codec::blocks_of(bin_size(m, d, bin)));
    codec::encode(run_keys(bin), entries, std::span{stream + at[bin], at[bin + 1] - at[bin]});
    // encode counts from the run's stream; the index counts from the chunk's.
    for (codec::run_block& e : entries) e.byte_offset += at[bin];
  }
  return at[d];
}

template <typename V>
void write_values(const chunk_task& task, const V* values, std::uint64_t n)
{
  if constexpr (!std::is_same_v<V, no_value>) host_write(task.dst_values, values, n * sizeof(V));
}

/// Writes n sorted elements to the task's destination (memory or a file window), raw or
/// ordered. A raw file destination's keys are mapped back in the buffer, which the task no
/// longer needs, and written from there.
template <typename K, typename V>
void write_out(const chunk_task& task, const element_layout& layout, K* keys, const V* values,
               std::uint64_t n)
{
  K* dst = static_cast<K*>(task.dst_keys);
  if (task.dst_ordered) {
    host_write(dst, keys, n * sizeof(K));
  } else if (find_file_window(dst)) {
    from_ordered_bits<K>(keys, keys, n, layout.keys());
    host_write(dst, keys, n * sizeof(K));
  } else {
    from_ordered_bits<K>(keys, dst, n, layout.keys());
  }
  write_values(task, values, n);
}

/// Writes the dealt elements of a compressed job's round-1 task (encode_target's contract):
/// the stream to the target's stream (dst_keys when null) and the index to the target, or the
/// keys raw when the stream is above raw_above; the values raw either way. `free_keys`: room for
/// the task's keys (buffer A, whose sorted keys the deal has copied), where the stream is made
/// before it is known to pay.
template <typename K, typename V>
void write_encoded(const chunk_task& task, const element_layout& layout, K* dealt,
                   const V* values, K* free_keys)
{
  const encode_target& target = *task.encode;
  GPUSORT_EXPECTS(
      target.stream == nullptr || reinterpret_cast<std::uintptr_t>(target.stream) % 8 == 0,
      "an encode target's stream starts on an 8-byte word");
  std::vector<codec::run_block> index(codec::dealt_blocks(task.count, task.deal_bins));
  auto* stream = reinterpret_cast<std::byte*>(free_keys);
  const std::uint64_t bytes = encode_dealt(dealt, task.count, task.deal_bins, stream, index);
  encode_target::outcome result{};
  if (bytes > target.raw_above) {
    write_out<K, V>(task, layout, dealt, values, task.count);
    result.raw = true;
  } else {
    parallel_copy(target.stream != nullptr ? target.stream : task.dst_keys, stream, bytes);
    parallel_copy(target.index, index.data(), index.size() * sizeof(codec::run_block));
    write_values(task, values, task.count);
    result.stream_bytes = bytes;
  }
  *target.result = result;
}

/// Round 1 of a scattering job (scatter_target): the sorted chunk's slice of each bucket to the
/// place the target gives it, once the chunks before it are placed.
template <typename K, typename V>
void write_scattered(const chunk_task& task, const K* keys, const V* values,
                     const job_context& ctx)
{
  const scatter_target& target = *task.scatter;
  const std::uint64_t buckets = target.buckets->count();
  std::vector<std::uint64_t> counts(buckets), at(buckets);
  bucket_counts<K>({keys, task.count}, *target.buckets, counts);
  target.places->place(target.chunk, counts, at, [&] { ctx.check(); });
  std::uint64_t from = 0;
  for (std::uint64_t b = 0; b < buckets; ++b) {
    if (counts[b] == 0) continue;
    std::memcpy(static_cast<K*>(task.dst_keys) + at[b], keys + from, counts[b] * sizeof(K));
    if constexpr (!std::is_same_v<V, no_value>)
      std::memcpy(static_cast<V*>(task.dst_values) + at[b], values + from,
                  counts[b] * sizeof(V));
    from += counts[b];
  }
}

template <typename K, typename V>
void run_task(const chunk_task& task, const element_layout& layout, chunk_buffers<K, V>& buf,
              unsigned threads, task_queue& queue, const job_context& ctx)
{
  K* a_keys = buf.a_keys.template as<K>();
  V* a_values = buf.a_values.template as<V>();
  gather<K, V>(task, layout, a_keys, a_values);
  // The host device stands in for a GPU where there is none (CI): its sort step is a seam of
  // the launch class, so that fault sweeps reach the executor's device-failure paths, and a
  // sticky error there (device lost) the daemon's, without a GPU.
  if (fault::hit(fault::site::launch)) fault::throw_device_fault(fault::site::launch, "cpu");
  cpu_sort<K, V>(a_keys, a_values, task.count, buf.scratch(), threads);
  if (task.scatter != nullptr) {
    write_scattered<K, V>(task, a_keys, a_values, ctx);
    return;
  }
  queue.wait_to_write(task, ctx);
  // The sorted (and dealt) elements, and a free buffer of keys for a stream.
  K* keys = a_keys;
  V* values = a_values;
  K* free_keys = buf.b_keys();
  if (task.deal_bins > 1) {
    deal<K, V>(a_keys, a_values, task.count, task.deal_bins, buf.b_keys(), buf.b_values());
    keys = buf.b_keys();
    values = buf.b_values();
    free_keys = a_keys;
  }
  // Round 1 of a compressed job encodes its runs, dealt or not (a plan of many chunks deals
  // into one bin: chunk_plan::bins).
  if (task.encode != nullptr)
    write_encoded<K, V>(task, layout, keys, values, free_keys);
  else
    write_out<K, V>(task, layout, keys, values, task.count);
  write_equal_tail(task, layout);
}

}  // namespace

host_device::host_device(std::optional<std::uint64_t> budget, unsigned threads, int index)
    : budget_{budget}, threads_{threads}, index_{index}
{
}

std::string host_device::name() const
{
  return index_ == 0 ? std::string{"cpu"} : "cpu:" + std::to_string(index_);
}

device_capacity host_device::capacity(const element_layout& layout) const
{
  const std::uint64_t per_element = buffers_per_chunk * layout.bytes();
  if (!budget_) return device_capacity{.bytes_per_element = per_element};
  return device_capacity{.elements = *budget_ / per_element, .bytes_per_element = per_element};
}

std::uint64_t host_device::host_bytes(const element_layout& layout, std::uint64_t task_elements,
                                      std::uint64_t) const
{
  // chunk_buffers: A and B, and B's 8-byte alignment of the values.
  return buffers_per_chunk * task_elements * layout.bytes() + 8;
}

void host_device::process(const element_layout& layout, task_queue& queue, job_context& ctx)
{
  visit_layout(layout.key_bytes, layout.value_bytes, [&]<typename K, typename V>() {
    std::uint64_t largest = queue.largest();
    GPUSORT_EXPECTS(largest <= capacity(layout).elements, "a task exceeds the device capacity");
    chunk_buffers<K, V> buffers{largest};
    while (const chunk_task* task = queue.pop()) {
      ctx.check();
      run_task<K, V>(*task, layout, buffers, threads_, queue, ctx);
      queue.written(*task);
      ctx.add_done(task->total());
    }
  });
}

}  // namespace gpusort::detail
