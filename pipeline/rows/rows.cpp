// The public entry points of include/gpusort/rows.hpp: the keys checked and encoded as words,
// their permutation found (refine.cpp), the records moved by it (move_records.cpp).
#include "core/rows/row_words.hpp"
#include "core/stream_copy.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/rows/move_records.hpp"
#include "pipeline/rows/refine.hpp"

#include <gpusort/error.hpp>
#include <gpusort/rows.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

namespace gpusort {

namespace {

constexpr std::uint64_t index32_rows = std::uint64_t{1} << 32;

/// Host memory an in-place move of records keeps for its breakpoints' records when it may
/// not take a second copy of them: more cuts the cycles into more, shorter walks.
constexpr std::uint64_t in_place_saved_bytes = std::uint64_t{64} << 20;

void check_options(const sort_options& options)
{
  if (options.direction != order::ascending)
    throw invalid_argument{"a sort of rows takes each key's order from its key, not "
                           "sort_options::direction"};
}

/// The host memory limit of a job (sort_options::host_memory_limit, else the engine's
/// configuration, else half of the physical memory) less `held`, what the job holds itself.
sort_options within_limit(const engine& engine, sort_options options, std::uint64_t held,
                          std::uint64_t rows)
{
  const std::uint64_t limit = options.host_memory_limit.value_or(
      engine.configuration().host_memory_budget.value_or(detail::physical_memory_half()));
  if (held > limit)
    throw config_error{"host_memory_limit: the order of " + std::to_string(rows) +
                       " rows needs " + format_bytes(held) + " of host memory, more than the " +
                       "limit of " + format_bytes(limit)};
  options.host_memory_limit = limit - held;
  return options;
}

/// The report of the whole job: the engine's sort of the first words, with the job's rows,
/// bytes and time.
sort_report job_report(sort_report words, std::uint64_t rows, std::uint64_t bytes,
                       std::chrono::steady_clock::time_point start)
{
  words.elements = rows;
  words.bytes = bytes;
  words.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return words;
}

/// Calls f.template operator()<Index>() with the narrowest index type of `rows`.
template <typename F>
decltype(auto) with_index(std::uint64_t rows, F&& f)
{
  if (rows < index32_rows) return std::forward<F>(f).template operator()<std::uint32_t>();
  return std::forward<F>(f).template operator()<std::uint64_t>();
}

}  // namespace

sort_report argsort_rows(engine& engine, const row_keys& keys, void* indices_out,
                         std::uint32_t index_bytes, const sort_options& options)
{
  const auto start = std::chrono::steady_clock::now();
  check_options(options);
  if (index_bytes != 4 && index_bytes != 8)
    throw invalid_argument{"index_bytes is 4 (uint32) or 8 (int64)"};
  if (index_bytes == 4 && keys.count >= index32_rows)
    throw invalid_argument{"uint32 indices for 2^32 rows or more: take index_bytes 8"};
  if (keys.count > 0 && indices_out == nullptr) throw invalid_argument{"indices_out is null"};
  const detail::row_words words{keys, options.floats};
  const sort_options o = within_limit(engine, options, 0, keys.count);
  detail::host_stages stages{options.profile};
  sort_report report =
      index_bytes == 4
          ? detail::argsort_words(engine, words, keys.count,
                                  static_cast<std::uint32_t*>(indices_out), o, {}, &stages)
          : detail::argsort_words(engine, words, keys.count,
                                  static_cast<std::uint64_t*>(indices_out), o, {}, &stages);
  stages.append_to(report);
  return job_report(std::move(report), keys.count, keys.count * words.key_bytes(), start);
}

sort_report sort_records(engine& engine, const record_array& records,
                         std::span<const key_field> fields, void* records_out,
                         const sort_options& options)
{
  const auto start = std::chrono::steady_clock::now();
  check_options(options);
  const row_keys keys = record_keys(records, fields);
  const std::uint64_t bytes = records.count * records.record_bytes;
  auto* data = static_cast<unsigned char*>(const_cast<void*>(records.data));
  auto* out = static_cast<unsigned char*>(records_out);
  if (out != nullptr && out != data && out < data + bytes && data < out + bytes)
    throw invalid_argument{"records_out overlaps the records (pass null to sort in place)"};
  if (out == data) out = nullptr;
  const detail::row_words words{keys, options.floats};
  return with_index(records.count, [&]<typename Index>() {
    const std::uint64_t perm_bytes = records.count * sizeof(Index);
    const sort_options o = within_limit(engine, options, perm_bytes, records.count);
    detail::host_buffer perm{perm_bytes};
    detail::host_stages stages{options.profile};
    // As refine.cpp's sorted words: the engine writes it whole.
    stages.run("rows: fresh pages of the order", perm_bytes, [&] { perm.populate(); });
    sort_report report =
        detail::argsort_words(engine, words, records.count, perm.as<Index>(), o, {}, &stages);
    if (options.cancel.cancelled()) throw cancelled{"the sort was cancelled"};
    const std::uint32_t r = records.record_bytes;
    if (records.count == 0) {
      // Nothing to move: the arrays may be null (memcpy's arguments must not be, even for 0).
    } else if (out != nullptr) {
      stages.run("rows: gather", bytes, [&] {
        detail::gather_records(data, records.count, r, perm.as<Index>(), out);
      });
    } else {
      // In place: a gather into a second copy and a copy back run at the memory's speed; the
      // cycles' walk waits on random reads, many at a time. The copy where the limit has room.
      // The words and the engine's memory are given back by now: the permutation stays.
      if (bytes <= *o.host_memory_limit) {
        detail::host_buffer copy{bytes};
        // Its pages made on every core first (the kernel zeroes each): inside the gather, every
        // fault stalled a thread's stream of prefetched reads (2 GiB on the 2-core VM: the
        // gather 1.70 s with the faults, 0.39 s after 1.2 s of them).
        stages.run("rows: fresh pages of the copy", bytes, [&] { copy.populate(); });
        stages.run("rows: gather", bytes, [&] {
          detail::gather_records(data, records.count, r, perm.as<Index>(),
                                 copy.as<unsigned char>());
        });
        stages.run("rows: copy back", bytes,
                   [&] { detail::parallel_stream_copy(data, copy.data(), bytes); });
      } else {
        // The walk's byte of state per record counts in the limit, and its breakpoints' records
        // take what is left of it, up to in_place_saved_bytes. The words took 16 bytes a row
        // within the same limit, so the state fits where the job came this far.
        const std::uint64_t left = *o.host_memory_limit - std::min(*o.host_memory_limit,
                                                                   records.count);
        stages.run("rows: permute", bytes, [&] {
          detail::permute_records(data, records.count, r, perm.as<Index>(),
                                  std::min(in_place_saved_bytes, left));
        });
      }
    }
    stages.append_to(report);
    return job_report(std::move(report), records.count, bytes, start);
  });
}

}  // namespace gpusort
