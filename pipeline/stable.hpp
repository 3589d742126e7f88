// Argsort and the stable sort, built on the engine's sort of pairs.
//
// Neither round of DSPS is stable (round 1 deals each sorted chunk round robin into its runs, and
// the GPU sample sort is not stable either), so instead of a stable variant of every sorter the
// engine sorts (key, position) pairs with any sorter and then puts each run of equal keys in
// position order: the exact stable permutation. A stable sort of pairs gathers the values by it;
// keys that NumPy's order calls equal but whose bits differ (NaN payloads, -0.0) are sorted by a
// canonical code and get their own bits back from the input by the same permutation.
#pragma once

#include <gpusort/gpusort.hpp>

#include <functional>
#include <cstdint>
#include <optional>
#include <vector>

namespace gpusort::detail {

/// The engine's sort of one job: `canonical` asks for key_order::canonical codes.
using inner_sort =
    std::function<sort_report(const sort_job& job, const sort_options& options, bool canonical)>;

/// The engine's argsort in one round trip on its GPUs: the keys copied in, the positions made
/// there, a stable sort (radix sort and merges that take the earlier run first on ties), the
/// indices (and the sorted keys for keys_out) copied out: the copies of a plain sort, no pass
/// on the host. nullopt when the engine has no GPU or the job does not fit them.
using resident_argsort = std::function<std::optional<sort_report>(
    const argsort_job& job, const sort_options& options, bool canonical)>;

/// engine::argsort: the resident argsort where it applies, else positions sorted as pairs.
sort_report run_argsort(const argsort_job& job, const sort_options& options,
                        const inner_sort& sort, const resident_argsort& resident);

/// engine::sort with options.stable where it matters: pairs, and keys alone in NumPy's float
/// order. (Keys alone in any other order are equal only when their bits are, so any sort is
/// stable for them.)
sort_report run_stable_sort(const sort_job& job, const sort_options& options,
                            const inner_sort& sort);

/// Whether engine::sort must take run_stable_sort for this job.
bool needs_stable_path(const sort_job& job, const sort_options& options) noexcept;

/// The keys NumPy's order calls equal although their bits differ, as the input has them: its
/// zeros and its NaNs in input order, and how many keys sort before the zeros. A sort by
/// canonical codes that is stable (or sorts keys alone) writes them over its zero and NaN runs
/// afterwards: the stable result.
template <typename K>
struct distinct_equals {
  std::vector<K> zeros;
  std::vector<K> nans;
  std::uint64_t below_zero{};  ///< keys before the zeros in the job's direction
};

/// One pass over the input (memory, or a file read in pieces), every core scanning its part
/// of each piece; the parts' lists are joined in input order. K: the keys' bits.
template <typename K>
distinct_equals<K> scan_distinct_equals(const void* input, std::uint64_t n, order dir);

/// An argsort by canonical codes (NumPy's float order): the zero and NaN runs of its sorted
/// keys get their bits back from `input` by the permutation `indices`. Any of the three may be
/// memory or a file window; runs are read and written a piece at a time.
void restore_canonical_keys(void* sorted, const void* indices, std::uint32_t index_bytes,
                            std::uint64_t n, dtype type, const sort_options& options,
                            const void* input);

}  // namespace gpusort::detail
