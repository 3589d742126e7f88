// The lean path's outline: round 1, buckets, permutation, round 2 (lean.hpp).
#include "pipeline/lean/lean.hpp"

#include "core/checks.hpp"
#include "core/log.hpp"
#include "core/sys_io.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/lean/buckets.hpp"
#include "pipeline/lean/gather.hpp"
#include "pipeline/lean/permute.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <chrono>
#include <optional>

namespace gpusort::detail::lean {

namespace {

/// Round 1: chunk j, read from the array (or the separate input) at j * chunk, sorted into x
/// = j * chunk of the space, moved down by the room. In place, that overwrites the chunks
/// whose sources lie there: the task writes only once they are written.
std::vector<chunk_task> round1_tasks(const job_arrays& a, const plan& p, const space& s)
{
  std::vector<chunk_task> tasks(p.chunks);
  for (std::uint64_t j = 0; j < p.chunks; ++j) {
    const std::uint64_t x = p.chunk_begin(j);
    const std::uint64_t m = p.chunk_size(j);
    chunk_task& t = tasks[j];
    t.src_keys = a.src_keys;
    t.src_values = a.src_values;
    t.slices = {run{x, m}};
    t.count = m;
    t.dst_keys = s.key_part(x) + s.offset_in_part(x) * s.key_bytes;
    t.dst_values = s.value_bytes == 0
                       ? nullptr
                       : s.value_part(x) + s.offset_in_part(x) * s.value_bytes;
    if (a.in_place() && x + m > p.room) {
      // The chunks whose sources [room + i * chunk, ...) meet [x, x + m).
      const std::uint64_t last = (x + m - p.room - 1) / p.chunk;
      GPUSORT_EXPECTS(last < j, "a chunk would overwrite its own source");
      t.write_after = last + 1;
    }
  }
  return tasks;
}

/// Round 2, the buckets from the last to the first: bucket k gathered from its place (in input
/// order for a stable job: `parts`), sorted into the array at its offset, once every bucket
/// whose place that overwrites is written. `order[t]` is task t's bucket.
std::vector<chunk_task> round2_tasks(const space& s, const std::vector<bucket>& buckets,
                                     const std::vector<std::vector<placed>>* parts,
                                     std::vector<std::uint64_t>& order)
{
  const std::size_t count = buckets.size();
  std::vector<chunk_task> tasks;
  tasks.reserve(count);
  order.clear();
  for (std::size_t q = 0; q < count; ++q) {
    const std::size_t k = count - 1 - q;
    const bucket& b = buckets[k];
    chunk_task t;
    t.src_keys = s.key_part(b.source);
    t.src_values = s.value_part(b.source);
    if (parts != nullptr) {
      for (const placed& pl : (*parts)[k])
        t.slices.push_back(run{s.offset_in_part(pl.x), pl.length});
    } else {
      t.slices = {run{s.offset_in_part(b.source), b.size}};
    }
    t.count = b.size;
    t.dst_keys = s.keys + b.out * s.key_bytes;
    t.dst_values = s.value_bytes == 0 ? nullptr : s.values + b.out * s.value_bytes;
    // The places its output meets: buckets after k (their tasks came earlier).
    const std::uint64_t begin = s.room + b.out;
    const std::uint64_t end = begin + b.size;
    std::uint64_t latest = 0;
    bool any = false;
    for (std::size_t o = k + 1; o < count && buckets[o].source < end; ++o) {
      if (buckets[o].source + buckets[o].size <= begin) continue;
      latest = std::max<std::uint64_t>(latest, count - 1 - o);
      any = true;
    }
    for (std::size_t o = 0; o <= k; ++o)
      GPUSORT_EXPECTS(buckets[o].source >= end || buckets[o].source + buckets[o].size <= begin,
                      "a bucket would overwrite a place not yet read");
    if (any) t.write_after = latest + 1;
    tasks.push_back(std::move(t));
    order.push_back(k);
  }
  return tasks;
}

/// restore() for a failed job: the array holds its input's elements again, or the error says
/// where they are.
void restore_after_failure(journal& j, const space& s) noexcept
{
  try {
    restore(j, s);
  } catch (const std::exception& e) {
    log(log_level::error,
        "a lean in-place sort failed and its array could not be restored ({}); its journal "
        "keeps where every element is",
        e.what());
  }
}

}  // namespace

std::optional<file_identity> identity_of(const void* address)
{
  const std::optional<file_place> place = find_file_window(address);
  if (!place) return std::nullopt;
  struct stat st{};
  if (sys::fstat(place->fd, &st) != 0)
    throw io_error{"cannot stat " + place->name + ": " + std::strerror(errno)};
  return file_identity{.dev = static_cast<std::uint64_t>(st.st_dev),
                       .ino = static_cast<std::uint64_t>(st.st_ino),
                       .offset = place->offset};
}

lean_stats sort_lean(const job_arrays& a, const element_layout& layout, const plan& p,
                     const std::vector<device*>& devices, job_context& ctx,
                     const journal_file* file, unsigned movers, host_buffer* room)
{
  GPUSORT_EXPECTS(p.n == a.n && p.n > p.room, "a lean plan for another job");
  const auto made = std::chrono::steady_clock::now();
  journal j = file != nullptr ? journal{file->fd,  file->name,   p, layout.key_bytes,
                                        layout.value_bytes, file->keys, file->values}
                              : journal{p, layout.key_bytes, layout.value_bytes, room};
  const space s{.room_keys = j.room_keys(),
                .room_values = layout.value_bytes > 0 ? j.room_values() : nullptr,
                .keys = static_cast<char*>(a.dst_keys),
                .values = static_cast<char*>(a.dst_values),
                .room = p.room,
                .n = p.n,
                .key_bytes = layout.key_bytes,
                .value_bytes = layout.value_bytes};
  const std::uint64_t reserve = std::max(p.chunk, p.bucket_limit);
  lean_stats stats{.shape = p};
  // The host's own stages, in the profile beside the devices' rounds.
  const auto host_stage = [&](int round, const char* stage, std::uint64_t count,
                              std::uint64_t bytes, double seconds) {
    ctx.add_host_stage(round, stage, count, bytes, 0, seconds);
  };
  host_stage(1, "journal and room", 1, p.room * layout.bytes(), seconds_since(made));
  try {
    // Round 1: every chunk sorted into its place moved down by the room.
    const int rounds = p.gather ? 2 : 3;
    j.set_phase(phase::round1);
    run_round(1, rounds, round1_tasks(a, p, s), layout, devices, ctx, reserve,
              task_hooks{.written = [&j](std::size_t t) { j.chunk_written(t); }});

    // The buckets from regular samples, and where round 2 will read each.
    const auto cut = std::chrono::steady_clock::now();
    std::vector<bucket> buckets = visit_layout(layout.key_bytes, 0, [&]<typename K, typename>() {
      return make_buckets<K>(p, s, layout.keys());
    });
    const std::uint64_t storage = p.gather ? 0 : layout_buckets(p, buckets);
    j.set_buckets(places_of(buckets));
    stats.buckets = buckets.size();
    host_stage(2, "buckets", buckets.size(), 0, seconds_since(cut));
    ctx.check();

    if (p.gather) {
      // Round 2 where round 1 left every bucket, the places cleared just ahead of the devices.
      const gather_stats g = gather_round(p, s, buckets, j, layout, devices, ctx, reserve, movers);
      stats.block = p.block;
      stats.moves = g.moved_blocks;
      stats.permutation_seconds = g.move_seconds;
      host_stage(2, "evictions", g.moved_blocks, g.moved_elements * layout.bytes(),
                 g.move_seconds);
      host_stage(2, "eviction waits", g.moved_blocks, 0, g.wait_seconds);
    } else {
      // The permutation: every bucket into its place.
      ctx.begin_round(2, p.n, 3);
      std::vector<std::vector<placed>> parts;
      const permutation_stats moved =
          permute(p, s, buckets, storage, j, ctx, movers, layout.stable ? &parts : nullptr);
      stats.block = moved.block;
      stats.moves = moved.moves;
      stats.parked = moved.parked;
      stats.evacuated = moved.evacuated;
      stats.permutation_seconds = moved.seconds;
      host_stage(2, "evacuation", 1, moved.evacuated * layout.bytes(), moved.evacuate_seconds);
      host_stage(2, "block moves", moved.moves, moved.moves * moved.block * layout.bytes(),
                 moved.permute_seconds);
      host_stage(2, "cleanup", buckets.size(), moved.evacuated * layout.bytes(),
                 moved.cleanup_seconds);

      // Round 2: every bucket sorted into the array, the last first.
      std::vector<std::uint64_t> order;
      std::vector<chunk_task> tasks =
          round2_tasks(s, buckets, layout.stable ? &parts : nullptr, order);
      run_round(3, 3, std::move(tasks), layout, devices, ctx, reserve,
                task_hooks{.written = [&j, &order](std::size_t t) { j.bucket_written(order[t]); }});
    }
    j.set_phase(phase::finished);
  } catch (...) {
    if (a.in_place()) restore_after_failure(j, s);
    throw;
  }
  return stats;
}

}  // namespace gpusort::detail::lean
