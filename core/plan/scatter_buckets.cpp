#include "core/plan/scatter_buckets.hpp"

#include "core/checks.hpp"
#include "core/counter_rng.hpp"
#include "core/switches.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <string>
#include <cmath>
#include <limits>

namespace gpusort::detail {

std::uint64_t scatter_tuning::region(std::uint64_t c, std::uint64_t n,
                                     std::uint64_t m) const noexcept
{
  if (m == 0) return n;
  const double cd = static_cast<double>(c);
  const double share = (cd + z * std::sqrt(cd) + z * z) / static_cast<double>(m);
  return std::min(n, static_cast<std::uint64_t>(std::ceil(share * static_cast<double>(n))));
}

std::uint64_t scatter_tuning::mean_bucket(std::uint64_t capacity) const noexcept
{
  const double q = static_cast<double>(std::max<std::uint64_t>(samples_per_bucket, 1));
  const double grown = 1 + z / std::sqrt(q) + z * z / q;
  // One element less than the exact figure: region() rounds up.
  const double mean = static_cast<double>(capacity) / grown - 1;
  return mean < 1 ? 1 : static_cast<std::uint64_t>(mean);
}

std::uint64_t scatter_tuning::buckets(std::uint64_t n, std::uint64_t capacity) const noexcept
{
  const std::uint64_t mean = mean_bucket(capacity);
  return std::max<std::uint64_t>((n + mean - 1) / mean, 1);
}

std::uint64_t scatter_tuning::samples(std::uint64_t n, std::uint64_t capacity) const noexcept
{
  return buckets(n, capacity) * std::max<std::uint64_t>(samples_per_bucket, 1);
}

std::uint64_t scatter_tuning::cut_every() const noexcept
{
  const std::uint64_t q = std::max<std::uint64_t>(samples_per_bucket, 2);
  return prefix_bounds ? q - q / 16 : q;
}

std::uint64_t scatter_tuning::cuts(std::uint64_t n, std::uint64_t capacity) const noexcept
{
  const std::uint64_t every = cut_every();
  return std::max<std::uint64_t>((samples(n, capacity) + every - 1) / every, 1);
}

std::uint64_t scatter_tuning::round1_elements(std::uint64_t n,
                                              std::uint64_t capacity) const noexcept
{
  const std::uint64_t m = samples(n, capacity);
  // Every bucket full, one more for the cut's rounding. Aligned bounds (prefix_bounds) move
  // sample keys between buckets but keep their number and the buckets': regions, concave in
  // a bucket's keys, then sum to no more than as many full ones.
  const std::uint64_t full = region(cut_every(), n, m);
  return std::max(n, (cuts(n, capacity) + 1) * full);
}

scatter_tuning scatter_tuning_from_environment() noexcept
{
  scatter_tuning t;
  t.prefix_bounds = switch_flag("GPUSORT_SCATTER_PREFIX", t.prefix_bounds);
  return t;
}

unsigned scatter_buckets::differing_bits(std::uint64_t b, unsigned key_bits) const noexcept
{
  const std::uint64_t top =
      key_bits >= 64 ? std::numeric_limits<std::uint64_t>::max() : (std::uint64_t{1} << key_bits) - 1;
  const std::uint64_t lo = lower[b];
  // The bucket's greatest key: one below the next bound, else the type's greatest.
  const std::uint64_t hi = b + 1 < lower.size() ? lower[b + 1] - 1 : top;
  return static_cast<unsigned>(std::bit_width(lo ^ hi));
}

scatter_buckets make_scatter_buckets(std::span<const std::uint64_t> sorted_sample, std::uint64_t n,
                                     std::uint64_t capacity, unsigned key_bits,
                                     const scatter_tuning& tuning)
{
  GPUSORT_EXPECTS(key_bits == 32 || key_bits == 64, "keys of 32 or 64 bits");
  const std::uint64_t greatest = key_bits == 64 ? std::numeric_limits<std::uint64_t>::max()
                                                : (std::uint64_t{1} << key_bits) - 1;
  const std::uint64_t m = sorted_sample.size();
  GPUSORT_EXPECTS(m > 0, "scattered rounds need a sample");
  GPUSORT_EXPECTS(std::is_sorted(sorted_sample.begin(), sorted_sample.end()),
                  "the sample is sorted");
  const std::uint64_t q = std::max<std::uint64_t>(tuning.samples_per_bucket, 2);
  const std::uint64_t every = tuning.cut_every();
  scatter_buckets out;
  // Opens a bucket at sample position i whose keys start at `lower`; closes it at `end`.
  std::vector<std::uint64_t> counts;
  const auto add = [&](std::uint64_t lower, bool equal, std::uint64_t samples) {
    out.lower.push_back(lower);
    out.equal.push_back(equal ? 1 : 0);
    counts.push_back(samples);
  };
  std::uint64_t i = 0;
  std::uint64_t lower = 0;  // the first bucket takes every key from the least
  while (i < m) {
    const std::uint64_t j = std::min(i + every, m);
    if (j == m || sorted_sample[j - 1] != sorted_sample[j]) {
      add(lower, false, j - i);
      i = j;
      if (i < m) lower = sorted_sample[i];
      continue;
    }
    // The cut falls inside a run of equal keys v: [a, e) of the sample.
    const std::uint64_t v = sorted_sample[j];
    const auto a = static_cast<std::uint64_t>(
        std::lower_bound(sorted_sample.begin(), sorted_sample.end(), v) - sorted_sample.begin());
    const auto e = static_cast<std::uint64_t>(
        std::upper_bound(sorted_sample.begin(), sorted_sample.end(), v) - sorted_sample.begin());
    if (e - a < q / 2) {
      // A light run: the cut moves back to its start (a > i, as the run is shorter than q).
      add(lower, false, a - i);
      i = a;
      lower = v;
      continue;
    }
    // A heavy key: the keys before it close the bucket, the key gets a bucket of its own.
    // Keys from the bucket's lower bound up to v need a bucket even where the sample holds none
    // of them (a heavy key first in the sample, or right after another heavy key).
    if (a > i || lower < v) add(lower, false, a - i);
    add(v, true, e - a);
    i = e;
    if (v == greatest) break;  // no key lies above it
    lower = v + 1;
    if (i == m) add(lower, false, 0);  // keys above the sample's greatest
  }
  out.sort_bits = key_bits;
  const bool any_equal = std::find(out.equal.begin(), out.equal.end(), 1) != out.equal.end();
  if (tuning.prefix_bounds && !any_equal) {
    // The fewest top bits whose aligned buckets still fit: each bucket's sample keys counted
    // anew between its moved bounds.
    for (unsigned t = 8; t < key_bits; t += 8) {
      const std::uint64_t low = (std::uint64_t{1} << (key_bits - t)) - 1;
      std::vector<std::uint64_t> bounds{0};
      for (std::size_t b = 1; b < out.lower.size(); ++b)
        if ((out.lower[b] & ~low) != bounds.back()) bounds.push_back(out.lower[b] & ~low);
      std::vector<std::uint64_t> aligned_counts(bounds.size());
      bool fits = true;
      // bounds[0] is 0: bucket b's keys run from the previous bucket's end to its next bound.
      auto from = sorted_sample.begin();
      for (std::size_t b = 0; b < bounds.size() && fits; ++b) {
        const auto to = b + 1 < bounds.size()
                            ? std::lower_bound(from, sorted_sample.end(), bounds[b + 1])
                            : sorted_sample.end();
        aligned_counts[b] = static_cast<std::uint64_t>(to - from);
        fits = tuning.region(aligned_counts[b], n, m) <= capacity;
        from = to;
      }
      if (!fits) continue;
      out.lower = std::move(bounds);
      out.equal.assign(out.lower.size(), 0);
      counts = std::move(aligned_counts);
      out.sort_bits = t;
      break;
    }
  }
  out.region.resize(out.lower.size() + 1, 0);
  for (std::size_t b = 0; b < out.lower.size(); ++b) {
    const std::uint64_t room = tuning.region(counts[b], n, m);
    // Only an equal bucket's keys may exceed a round-2 task: they are never sorted.
    GPUSORT_EXPECTS(out.equal[b] != 0 || room <= capacity,
                    "a sample of too few keys for the capacity (scatter_tuning::samples)");
    out.region[b + 1] = out.region[b] + room;
  }
  return out;
}

std::uint64_t scatter_sample_position(std::uint64_t n, std::uint64_t i) noexcept
{
  enum class stream : std::uint8_t { scatter_sample = 7 };
  return n == 0 ? 0 : counter_rng{n, stream::scatter_sample}(i) % n;
}

scatter_places::scatter_places(const scatter_buckets& buckets, std::uint64_t chunks)
    : buckets_{buckets}, chunks_{chunks}, filled_(buckets.count(), 0)
{
}

void scatter_places::place(std::uint64_t chunk, std::span<const std::uint64_t> counts,
                           std::span<std::uint64_t> at, const std::function<void()>& check)
{
  const std::uint64_t buckets = buckets_.count();
  GPUSORT_EXPECTS(chunk < chunks_, "a chunk of the job");
  GPUSORT_EXPECTS(counts.size() == buckets && at.size() == buckets, "a count of every bucket");
  std::unique_lock lock{mutex_};
  // A device that failed or a cancelled job wakes nobody: look again every few milliseconds.
  while (next_ != chunk && !overflowed_) {
    lock.unlock();
    check();
    lock.lock();
    if (next_ == chunk || overflowed_) break;
    turn_.wait_for(lock, std::chrono::milliseconds{5});
  }
  if (overflowed_) throw scatter_overflow{"a bucket outgrew its region"};
  for (std::uint64_t b = 0; b < buckets; ++b) {
    const std::uint64_t room = buckets_.region[b + 1] - buckets_.region[b];
    if (counts[b] > room - filled_[b]) {
      overflowed_ = true;
      turn_.notify_all();
      throw scatter_overflow{"bucket " + std::to_string(b) + " outgrew its region of " +
                             std::to_string(room) + " elements"};
    }
  }
  for (std::uint64_t b = 0; b < buckets; ++b) {
    at[b] = buckets_.region[b] + filled_[b];
    filled_[b] += counts[b];
  }
  ++next_;
  turn_.notify_all();
}

template <typename K>
void bucket_counts(std::span<const K> sorted, const scatter_buckets& buckets,
                   std::span<std::uint64_t> counts)
{
  GPUSORT_EXPECTS(counts.size() == buckets.count(), "a count of every bucket");
  std::uint64_t from = 0;
  for (std::uint64_t b = 0; b < buckets.count(); ++b) {
    std::uint64_t to = sorted.size();
    if (b + 1 < buckets.count()) {
      const std::uint64_t bound = buckets.lower[b + 1];
      to = static_cast<std::uint64_t>(
          std::partition_point(sorted.begin() + static_cast<std::ptrdiff_t>(from), sorted.end(),
                               [bound](K k) { return std::uint64_t{k} < bound; }) -
          sorted.begin());
    }
    counts[b] = to - from;
    from = to;
  }
}

template void bucket_counts<std::uint32_t>(std::span<const std::uint32_t>, const scatter_buckets&,
                                           std::span<std::uint64_t>);
template void bucket_counts<std::uint64_t>(std::span<const std::uint64_t>, const scatter_buckets&,
                                           std::span<std::uint64_t>);

}  // namespace gpusort::detail
