// Making a GPU's ring (round_state) and planning which tasks a slot takes.
#include "pipeline/cuda/round_state.hpp"

#include "core/checks.hpp"
#include "core/cuda/run_codec.cuh"
#include "core/switches.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpusort::detail::gpu_ring {

namespace {

gather_mode gather_mode_from_environment() noexcept
{
  const std::optional<std::string_view> s =
      switch_word("GPUSORT_GATHER", {"auto", "copy", "kernel", "host"});
  return s == "copy"     ? gather_mode::copy
         : s == "kernel" ? gather_mode::kernel
         : s == "host"   ? gather_mode::host
                         : gather_mode::automatic;
}

/// The gather kernels' tuning, for measuring one choice against another: GPUSORT_GATHER_BLOCKS
/// replaces both grid caps (the blocks that walk a table of short slices beside the sort),
/// GPUSORT_GATHER_THREADS the threads a block (32 to 1024; 8 blocks of 1024 keep as many loads
/// in flight as 32 of 256 on a quarter of the SMs, which a sort beside them then has whole),
/// and GPUSORT_GATHER_WARPS=0 sends short slices to the block-a-slice kernel as before.
cuda::gather_tuning gather_tuning_from_environment() noexcept
{
  cuda::gather_tuning tuning;
  if (const std::optional<std::uint64_t> blocks = switch_count("GPUSORT_GATHER_BLOCKS", 1, 65535))
    tuning.max_blocks = tuning.max_warp_blocks = static_cast<std::uint32_t>(*blocks);
  if (const std::optional<std::uint64_t> threads = switch_count("GPUSORT_GATHER_THREADS", 32, 1024))
    tuning.threads_per_block = static_cast<std::uint32_t>(*threads);
  if (!switch_flag("GPUSORT_GATHER_WARPS", true)) tuning.warp_slice_elements = 0;
  return tuning;
}

/// Blocks of a scattering store's kernel (cuda::scatter_lines), GPUSORT_SCATTER_BLOCKS for the
/// A/B: fewer leave the sort beside it faster and the copy-in fuller, too few starve the writes.
/// 8 GiB u64 on one H200 (h200-20261201-s18/call4), 4 / 8 / 16 / 32 blocks: 1/256 0.619 /
/// 0.533 / 0.532 / 0.549 s, the smallest budget 1.118 / 0.821 / 0.698 / 0.688 s.
unsigned scatter_blocks_from_environment() noexcept
{
  return static_cast<unsigned>(switch_count("GPUSORT_SCATTER_BLOCKS", 1, 1024).value_or(16));
}

/// How a scattering store's kernel gets its table of slices. Copied, the table crossed to
/// device memory on the copy engine that brings the next chunks in, behind them: each store
/// waited for a chunk's copy-in before its writes began, and round 1 ran at the pace of both
/// one after the other (issue 44). Mapped, the kernel reads its few KiB of entries from the
/// pinned table itself. GPUSORT_SCATTER_TABLE=copy for the A/B.
bool scatter_table_mapped_from_environment() noexcept
{
  return switch_word("GPUSORT_SCATTER_TABLE", {"mapped", "copy"}) != "copy";
}

}  // namespace

static_assert(table_entry_bytes == sizeof(codec::encoded_slice) + 2 * sizeof(cuda::gather_slice),
              "buffer_sizes.hpp counts a slice's table entries as round_state lays them out");

std::optional<cudaPointerAttributes> pinned_attributes(const void* p) noexcept
{
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  if (a.type != cudaMemoryTypeHost) return std::nullopt;
  return a;
}

const char* mapped_address(const void* host) noexcept
{
  const std::optional<cudaPointerAttributes> a = pinned_attributes(host);
  return a ? static_cast<const char*>(a->devicePointer) : nullptr;
}

std::uint64_t ring_scratch_bytes(const chunk_sorter& with, const element_layout& l,
                                 std::uint64_t c)
{
  return std::max<std::uint64_t>(
      with.scratch_bytes(c, l.key_bytes, l.value_bytes),
      cuda::run_codec_scratch_bytes(c, std::max<std::uint64_t>(codec::blocks_of(c), 1)));
}

unsigned sort_lanes_from_environment() noexcept
{
  return static_cast<unsigned>(
      switch_count("GPUSORT_SORT_LANES", 1, max_sort_lanes).value_or(max_sort_lanes));
}

round_state::round_state(const buffer_sizes& s, std::size_t entries,
                         const cuda_device_options& o, const chunk_sorter& with,
                         gpu_pinned& pinned)
    // In whole pages: the budget counts each buffer so (buffer_sizes.hpp), and the slack
    // lets a slot take one more small task and a lane's share of the scratch fit.
    : sizes{.keys = device_pages(s.keys),
            .values = device_pages(s.values),
            .scratch = device_pages(s.scratch)},
      table_entries{std::max<std::size_t>(entries, 1)},
      in_staging{pinned.in},
      out_staging{pinned.out},
      sorter{with},
      gather{gather_mode_from_environment()},
      gather_tuning{gather_tuning_from_environment()},
      scatter_blocks{scatter_blocks_from_environment()},
      gather_copy_min_bytes{o.gather_copy_min_bytes},
      sort_lanes{sort_lanes_from_environment()},
      scatter_table_mapped{scatter_table_mapped_from_environment()}
{
  for (unsigned i = 1; i < sort_lanes; ++i) {
    lanes.emplace_back();
    joined.emplace_back();
  }
  for (unsigned i = 0; i < cuda_device::ring_slots; ++i) {
    slot& sl = slots.emplace_back();
    sl.keys = cuda::device_buffer{sizes.keys};
    sl.values = cuda::device_buffer{sizes.values};
  }
  grow_tables(table_entries);
  alt_keys = cuda::device_buffer{sizes.keys};
  alt_values = cuda::device_buffer{sizes.values};
  scratch = cuda::device_buffer{sizes.scratch};
}

void round_state::grow_tables(std::size_t entries)
{
  table_entries = std::max<std::size_t>(entries, 1);
  const std::size_t table_bytes = table_entries * sizeof(cuda::gather_slice);
  const std::size_t key_bytes = decode_table_bytes() + table_bytes;
  tables = cuda::device_buffer{};  // first, so that its pages are free for the new one
  tables = cuda::device_buffer{slots.size() * (key_bytes + table_bytes) +
                               table_bounds_bytes(table_entries)};
  char* d_at = tables.data<char>();
  d_bounds = reinterpret_cast<std::uint64_t*>(d_at + slots.size() * (key_bytes + table_bytes));
  scatter_source = nullptr;  // the bounds' copy went with the old tables
  for (slot& sl : slots) {
    sl.key_table_host = cuda::pinned_buffer{key_bytes};
    sl.value_table_host = cuda::pinned_buffer{table_bytes};
    sl.d_key_table = d_at;
    sl.d_value_table = d_at + key_bytes;
    d_at += key_bytes + table_bytes;
  }
}

round_state::~round_state()
{
  // No buffer may go while a copy or kernel still uses it.
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(h2d.value()));
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(compute.value()));
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(d2h.value()));
  for (const cuda::cuda_stream& lane : lanes)
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(lane.value()));
}

std::size_t round_state::gather_entries(const chunk_task& t) const
{
  // A scattering chunk's store tables a slice a bucket.
  if (t.scatter != nullptr) return t.scatter->buckets->count();
  if (!t.src_ordered || !t.from_alt.empty()) return 0;
  const auto kernel = [&](const void* src, std::uint64_t element_bytes) {
    return element_bytes > 0 &&
           takes_gather_kernel(mapped_address(src), has_short_slices(t, element_bytes));
  };
  return kernel(t.src_keys, layout.key_bytes) || kernel(t.src_values, layout.value_bytes)
             ? t.slices.size()
             : 0;
}

bool round_state::batch_fits(const slot& s, const chunk_task& t,
                             std::size_t entries) const
{
  const auto plain = [](const chunk_task& c) {
    return c.encode == nullptr && c.encoded.empty() && c.from_alt.empty() &&
           c.write_after == 0;
  };
  const std::size_t n = s.tasks.size() + 1;
  if (n > sort_lanes || !plain(t) || !plain(*s.tasks.front())) return false;
  const std::uint64_t end = next_at(s) + t.count;
  if (end * layout.key_bytes > sizes.keys || end * layout.value_bytes > sizes.values)
    return false;
  if (s.entry_end + entries > table_entries) return false;
  const std::size_t part = lane_scratch_bytes(n);
  const auto scratch_fits = [&](const chunk_task& c) {
    return sorter.scratch_bytes(c.count, layout.key_bytes, layout.value_bytes) <= part;
  };
  return scratch_fits(t) && std::ranges::all_of(s.tasks, [&](const chunk_task* c) {
           return scratch_fits(*c);
         });
}

}  // namespace gpusort::detail::gpu_ring
