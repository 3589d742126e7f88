// Splitters (design.md section 2): s equidistant candidates from each run of one new chunk,
// sorted; d-1 splitters at regular ranks, and for each the number of candidates equal to it
// (Est in GPUMemSort section 4.3).
#pragma once

#include "core/plan/dealing.hpp"
#include "core/plan/run_source.hpp"

#include <bit>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

namespace gpusort::detail {

template <typename K>
struct splitter_set {
  std::vector<K> values;           ///< d - 1 splitters in ordered bits, non-decreasing
  std::vector<std::uint64_t> est;  ///< candidates equal to each splitter
};

/// The low bits in which the ordered bits of final chunk k's keys can differ: every key of the
/// chunk lies between its two splitters (the type's least and greatest value at the ends), so
/// above the highest bit in which those two differ, all its keys agree. 0: all its keys are equal.
template <typename K>
[[nodiscard]] constexpr unsigned differing_bits(const splitter_set<K>& s, std::uint64_t k) noexcept
{
  static_assert(std::is_unsigned_v<K>, "splitters are ordered bits");
  const K lo = k == 0 ? K{0} : s.values[k - 1];
  const K hi = k < s.values.size() ? s.values[k] : static_cast<K>(~K{0});
  return static_cast<unsigned>(std::bit_width(static_cast<K>(lo ^ hi)));
}

/// Position of candidate x (0 <= x < s) in a run of length len >= s: the ((x+1)*len/s)-th.
constexpr std::uint64_t candidate_position(std::uint64_t x, std::uint64_t s,
                                           std::uint64_t len) noexcept
{
  return static_cast<std::uint64_t>((static_cast<uint128>(x + 1) * len) / s) - 1;
}

/// Position of candidate x at a random place of its 1/s of the run (`draw`: a random word for
/// this run and candidate). Where s is below d, candidates at the pieces' ends (or middles)
/// of runs of alike keys fall on alike values, run after run, so a splitter rank lands between
/// two such clusters or inside one, and the final chunks between them came out from a tenth of
/// the mean to 2.3 times it (at d = 1634 and s = 641, uniform keys); at random places the
/// candidates of all runs interleave, and each final chunk errs by about the mean over the
/// square root of the candidates between its splitters (4% there).
constexpr std::uint64_t random_candidate_position(std::uint64_t x, std::uint64_t s,
                                                  std::uint64_t len, std::uint64_t draw) noexcept
{
  const auto begin = static_cast<std::uint64_t>((static_cast<uint128>(x) * len) / s);
  const auto end = static_cast<std::uint64_t>((static_cast<uint128>(x + 1) * len) / s);
  return begin + draw % (end - begin);
}

/// Where a run's candidates lie: at the ends of its s pieces (candidate_position, which the
/// plan's bound counts on) or at random places in them (random_candidate_position).
enum class candidate_places : std::uint8_t { piece_ends, random };

/// Candidates first .. first + count - 1 of the s of sorted run `r` (read through `source`),
/// placed as `places` says, into out[0, count): increasing positions, so an encoded run decodes
/// each of its blocks once. Random places are reproducible: the same run gives the same
/// candidates whichever thread reads them, and whenever.
template <typename Source>
void read_candidates(const Source& source, const run& r, std::uint64_t s, candidate_places places,
                     std::uint64_t first, std::uint64_t count, typename Source::key_type* out);

/// Candidates read a group at a time (read_sample, sample_behind): a few thousand reads, short
/// enough for a reader to stop between groups, long enough to share out among threads.
inline constexpr std::uint64_t candidate_group = 4096;

/// The candidates of every run sampled_runs[i] from its first_unread[i]-th on (0: all s of
/// them, s: none), into out + i * s: on every core, in groups of increasing positions
/// (read_candidates).
template <typename Source>
void read_sample(const Source& source, std::span<const run> sampled_runs, std::uint64_t s,
                 candidate_places places, std::span<const std::uint64_t> first_unread,
                 typename Source::key_type* out);

/// The d-1 splitters of `candidates`: d runs of s each, each sorted (every sampled run is, and
/// its candidates lie at increasing places), the k-th splitter the candidate of rank (k+1)s-1
/// of them all. Taken by selection where that is cheaper than sorting them (few chunks, long
/// runs: splitters_by_selection), else by sorting them, in place. GPUSORT_SPLITTER_SELECT=0
/// always sorts.
template <typename K>
splitter_set<K> splitters_of(std::span<K> candidates, std::uint64_t d);

/// Whether splitters_of selects rather than sorts for d runs of s candidates: a selection is
/// d - 1 binary searches over the keys' values, each step d binary searches of a run (about
/// (d-1) d log2(s) key bits' worth of steps); the radix sort moves every candidate once a byte.
[[nodiscard]] bool splitters_by_selection_pays(std::uint64_t d, std::uint64_t s) noexcept;

/// splitters_of by selection: for each k, the least key value v with at least (k+1)s candidates
/// at most v (counted by a binary search in each run), and the candidates equal to it.
template <typename K>
splitter_set<K> splitters_by_selection(std::span<const K> candidates, std::uint64_t d);

/// Candidates from `sampled_runs` (sorted runs read through `source`: raw_runs or encoded_runs,
/// run_source.hpp) and the d-1 splitters they give.
template <typename Source>
splitter_set<typename Source::key_type> choose_splitters(
    const Source& source, std::span<const run> sampled_runs, std::uint64_t s, std::uint64_t d,
    candidate_places places = candidate_places::piece_ends);

}  // namespace gpusort::detail
