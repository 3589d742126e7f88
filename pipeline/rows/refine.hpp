// The stable permutation that sorts rows by their words (core/rows/row_words.hpp): the engine
// argsorts every row's first word, and the rows still tied are put in order by their next
// words, group by group: small groups on the host's cores, large ones by the engine again.
// Random keys tie rarely past their first word, so a sort of rows costs about one argsort of
// 64-bit keys; rows that tie word after word cost one argsort of their rows per word.
#pragma once

#include "core/rows/row_words.hpp"

#include <gpusort/gpusort.hpp>

#include <cstdint>

namespace gpusort::detail {

struct rows_tuning {
  /// Tied groups of at least this many rows go to the engine, one after another; smaller ones
  /// are sorted on the host's cores side by side (about 0.1 s for 2^20 pairs on one core).
  std::uint64_t engine_group_rows{std::uint64_t{1} << 20};
};

/// perm receives the stable sorting permutation of words' rows [0, count). Index: uint32_t
/// (count < 2^32) or uint64_t. options.host_memory_limit, when set, bounds the host memory of
/// the words, their sorted copies and the engine's sorts together (a config_error where the
/// words alone need more). Returns the report of the engine's sort of the first words.
template <typename Index>
sort_report argsort_words(engine& engine, const row_words& words, std::uint64_t count,
                          Index* perm, const sort_options& options,
                          const rows_tuning& tuning = {});

}  // namespace gpusort::detail
