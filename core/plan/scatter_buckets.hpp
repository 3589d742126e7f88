// Round 1 scattering into buckets (issue 44, design.md section 3, "Scattered rounds"): the
// buckets of an out-of-core job chosen before round 1 from a random sample of its input, each
// with a region of the round-1 buffer that holds it with the sample's error, and the places
// of every chunk's slices in those regions, given in chunk order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

namespace gpusort::detail {

/// How the scattered rounds cut a job. A bucket holds the keys of about q sample keys; its
/// region holds (c + z sqrt(c) + z^2) n / m elements for its c of the m sample keys: past it
/// only by an error of z standard deviations of the sample's count (1024 and 5: 1.18 times the
/// mean for a full bucket, one bucket in 3.5 million past its region on any input, which then
/// runs as two rounds of DSPS instead).
struct scatter_tuning {
  std::uint64_t samples_per_bucket{1024};  ///< q
  double z{5};
  /// Jobs of at least this many chunks on GPUs take the scattered rounds by default
  /// (GPUSORT_SCATTER=auto). One H200, 8 GiB, with aligned bounds (h200-20261201-s19): DSPS
  /// holds 1/8's rate up to 1/32 (149 chunks: u64 0.378 s against 0.380 at 1/8; f64.stable
  /// 0.516 against 0.531 s) and loses it by 1/128 (715 chunks: u64 0.561 s, 0.68 of 1/8;
  /// f64.stable 0.747 s, 0.71), where the scattered rounds took 0.431 s (call 4 and the call
  /// after it). At 1/8 (37 chunks) the two are even, 0.388 s scattered against DSPS's 0.380
  /// in the call before; at 1594 chunks they took 0.469 s (call 1) where DSPS had taken
  /// 0.551-0.609 s (s18). Between 149 and 715 chunks neither was measured: 512 takes them
  /// where DSPS's d^2 slices begin to cost and leaves DSPS, which needs no extra round-1 room
  /// (round1_elements), the jobs it runs at full speed.
  std::uint64_t min_chunks{512};
  /// Align the bounds to prefixes of the keys' top bits, so that round 1 sorts each chunk on
  /// those bits alone (scatter_buckets::sort_bits): a radix sort then passes over 8 to 24 bits
  /// of a 64-bit key where it passed over 64. Round 1's sort, at about twice its time alone
  /// beside the store's writes, bounded the scattered rounds (h200-20261201-s18). One H200,
  /// 8 GiB, same run (h200-20261201-s19 call 1), unaligned against aligned: u64 1/256 0.567
  /// against 0.469 s, smallest 0.723 against 0.681 s; u64.stable 0.537 / 0.457 and 0.742 /
  /// 0.673 s; f64 0.579 / 0.483 and 0.764 / 0.701 s; f64.stable 0.733 / 0.627 s.
  /// GPUSORT_SCATTER_PREFIX=0 turns it off.
  bool prefix_bounds{true};

  /// Sample keys a cut keeps together: q, or with prefix_bounds 15/16 of it, so that moving a
  /// bound down to a prefix's start leaves the bucket that gains keys within its region.
  [[nodiscard]] std::uint64_t cut_every() const noexcept;
  /// Buckets the sample's cuts make of keys without heavy duplicates (at most).
  [[nodiscard]] std::uint64_t cuts(std::uint64_t n, std::uint64_t capacity) const noexcept;

  /// Region elements, for n elements and m sample keys, of a bucket of c of them.
  [[nodiscard]] std::uint64_t region(std::uint64_t c, std::uint64_t n,
                                     std::uint64_t m) const noexcept;
  /// Mean bucket (elements) whose full region (c = q) stays within `capacity`.
  [[nodiscard]] std::uint64_t mean_bucket(std::uint64_t capacity) const noexcept;
  /// Buckets of keys without heavy duplicates for n elements with round-2 tasks of at most
  /// `capacity`, at mean_bucket each (at least one).
  [[nodiscard]] std::uint64_t buckets(std::uint64_t n, std::uint64_t capacity) const noexcept;
  /// Sample keys for those buckets: q a bucket.
  [[nodiscard]] std::uint64_t samples(std::uint64_t n, std::uint64_t capacity) const noexcept;
  /// Elements of the round-1 buffer a job of n keys may take in regions: their sum where every
  /// bucket is full (the buckets of keys without heavy duplicates), with a bucket's rounding.
  /// A sample whose regions need more (many heavy keys) runs as DSPS.
  [[nodiscard]] std::uint64_t round1_elements(std::uint64_t n,
                                              std::uint64_t capacity) const noexcept;
};

/// The tuning with GPUSORT_SCATTER_PREFIX's prefix_bounds (a measurement switch, on unset).
[[nodiscard]] scatter_tuning scatter_tuning_from_environment() noexcept;

/// Buckets of ordered bits: bucket b holds the keys k with lower[b] <= k < lower[b + 1] (the
/// last one up to the greatest key); an `equal` bucket holds a single key, one the sample found
/// so often that no bucket could hold it with others (its keys need no sort, and its region
/// may exceed the capacity). Regions lie one after another: bucket b's is [region[b],
/// region[b + 1]) of the round-1 buffer, in elements.
struct scatter_buckets {
  std::vector<std::uint64_t> lower;
  std::vector<std::uint8_t> equal;
  std::vector<std::uint64_t> region;
  /// Round 1 may sort a chunk on the top sort_bits bits of its keys alone: every bound past the
  /// first is a multiple of 2^(width - sort_bits), so a chunk in order of those bits is cut
  /// exactly at the bounds by a binary search of them (keys below a bound are those whose top
  /// bits are below its own). The keys' width where the bounds are not aligned.
  unsigned sort_bits{};
  [[nodiscard]] std::uint64_t count() const noexcept { return lower.size(); }
  [[nodiscard]] std::uint64_t region_elements() const noexcept
  {
    return region.empty() ? 0 : region.back();
  }
  /// The lower bounds past the first, as search probes: count() - 1 of them.
  [[nodiscard]] std::span<const std::uint64_t> probes() const noexcept
  {
    return lower.empty() ? std::span<const std::uint64_t>{}
                         : std::span<const std::uint64_t>{lower}.subspan(1);
  }
  /// The low bits in which the keys of bucket b may differ (as differing_bits does for final
  /// chunks); `key_bits`: the keys' width.
  [[nodiscard]] unsigned differing_bits(std::uint64_t b, unsigned key_bits) const noexcept;
};

/// Buckets from a sorted sample of m ordered keys of `key_bits` bits (widened to 64 bits) for n
/// keys and round-2 tasks of at most `capacity` elements: the sample cut every q keys, never
/// inside a run of equal keys (the cut moves back to the run's start), a run of q/2 or more its
/// own equal bucket. Every bucket but an equal one then has at most q sample keys and a region
/// within the capacity; every lower bound is a key of that width. With
/// tuning.prefix_bounds and no equal bucket, the bounds are then moved down to multiples of
/// 2^(key_bits - t) for the fewest top bits t (8, 16, ...) whose buckets' regions all stay
/// within the capacity (bounds that meet merge their buckets); sort_bits says which t.
scatter_buckets make_scatter_buckets(std::span<const std::uint64_t> sorted_sample, std::uint64_t n,
                                     std::uint64_t capacity, unsigned key_bits,
                                     const scatter_tuning& tuning = {});

/// Where the i-th key of the sample of a job of n keys lies: a random place, the same in every
/// run of a job of n (the generators' counter_rng, seeded by n), so that runs repeat and a test
/// can make an input the sample misses.
[[nodiscard]] std::uint64_t scatter_sample_position(std::uint64_t n, std::uint64_t i) noexcept;

/// A bucket outgrew its region: the job runs as DSPS instead (nothing of its input was written).
class scatter_overflow : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where each chunk's slices go: chunk i's slice of bucket b behind the slices of chunks
/// 0..i-1 in b's region, so that a bucket holds its keys in input order (a stable chunk sort
/// and a stable round 2 then sort stably) and the layout does not depend on which device took
/// which chunk. Thread-safe: every device's store asks for its chunks' places.
class scatter_places {
 public:
  scatter_places(const scatter_buckets& buckets, std::uint64_t chunks);
  /// Once chunks 0..chunk-1 are placed: the element offsets in the round-1 buffer of the
  /// chunk's `counts[b]` keys of each bucket, into `at`. Throws scatter_overflow when a bucket
  /// would outgrow its region (and every later place() throws it too); calls `check` while it
  /// waits (a job's check: it throws once the job is cancelled or a device failed).
  void place(std::uint64_t chunk, std::span<const std::uint64_t> counts,
             std::span<std::uint64_t> at, const std::function<void()>& check);
  /// Keys placed in bucket b so far (after round 1: the bucket's keys).
  [[nodiscard]] std::uint64_t filled(std::uint64_t b) const noexcept { return filled_[b]; }

 private:
  const scatter_buckets& buckets_;
  std::uint64_t chunks_;
  std::mutex mutex_;
  std::condition_variable turn_;
  std::uint64_t next_{};  ///< the chunk whose turn it is
  bool overflowed_{};
  std::vector<std::uint64_t> filled_;
};

/// What a round-1 task of a scattering job asks of its device (chunk_task::scatter): after its
/// sort, cut the chunk at the buckets' lower bounds, ask `places` where each slice goes, and
/// write each there (ordered bits to the task's dst_keys, values to its dst_values, both
/// indexed by the places' element offsets).
struct scatter_target {
  const scatter_buckets* buckets{};
  scatter_places* places{};
  std::uint64_t chunk{};
};

/// The slice of each bucket in a sorted chunk of ordered keys: counts[b] keys of bucket b,
/// found by binary search (the host device's cut; a GPU's is cuda::count_below_runs).
template <typename K>
void bucket_counts(std::span<const K> sorted, const scatter_buckets& buckets,
                   std::span<std::uint64_t> counts);

}  // namespace gpusort::detail
