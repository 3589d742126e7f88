#include "pipeline/executor.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "core/log.hpp"
#include "core/plan/compensation.hpp"
#include "core/plan/dealing.hpp"
#include "core/plan/run_source.hpp"
#include "core/plan/scatter_buckets.hpp"
#include "core/plan/slicing.hpp"
#include "core/plan/splitters.hpp"
#include "core/plan/tuning.hpp"
#include "core/switches.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/sample_behind.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <vector>

namespace gpusort::detail {

namespace {

/// The round-1 output (ordered bits, dealt runs): keys, then values, then a compressed job's
/// index, in the caller's scratch or in host memory allocated for this job.
template <typename K, typename V>
class round1_output {
 public:
  round1_output(const chunk_plan& plan, const element_layout& layout, bool compressed,
                const host_buffer* scratch)
      : round1_output{plan.n, round1_bytes(plan, layout, compressed), layout, scratch}
  {
    if (compressed)
      index_ = reinterpret_cast<codec::run_block*>(keys_ + round1_index_offset(plan.n, layout));
  }
  /// A scattering job's: `elements` of bucket regions, keys then values.
  round1_output(std::uint64_t elements, const element_layout& layout, const host_buffer* scratch)
      : round1_output{elements,
                      round1_values_offset(elements, layout) + elements * layout.value_bytes,
                      layout, scratch}
  {
  }
  [[nodiscard]] K* keys() const noexcept { return reinterpret_cast<K*>(keys_); }
  [[nodiscard]] void* values() const noexcept { return values_; }
  /// The index region; null when the job is not compressed.
  [[nodiscard]] codec::run_block* index() const noexcept { return index_; }

 private:
  round1_output(std::uint64_t elements, std::size_t bytes, const element_layout& layout,
                const host_buffer* scratch)
  {
    if (scratch == nullptr || scratch->size() < bytes) {
      owned_ = host_buffer{bytes};
      scratch = &owned_;
    }
    keys_ = scratch->as<char>();
    values_ = keys_ + round1_values_offset(elements, layout);
  }

  host_buffer owned_;
  char* keys_{};
  char* values_{};
  codec::run_block* index_{};
};

/// What a compressed job's round 1 asks of the devices and what they answer: one encode_target
/// and one outcome per chunk, for the whole job (the tasks point at them).
class round1_encoding {
 public:
  round1_encoding(const chunk_plan& plan, const element_layout& layout, run_compression mode,
                  codec::run_block* index, void* keys)
      : targets_(plan.d), outcomes_(plan.d, encode_target::outcome{.stream_bytes = unanswered})
  {
    for (std::uint64_t i = 0; i < plan.d; ++i) {
      // A stream starts on an 8-byte word: 4-byte keys of a chunk that starts at an odd
      // element put it 4 bytes into their raw room, which then holds 4 bytes less of it.
      auto* raw = static_cast<std::byte*>(keys) + plan.chunk_begin(i) * layout.key_bytes;
      const std::uint64_t shift = (8 - reinterpret_cast<std::uintptr_t>(raw) % 8) % 8;
      const std::uint64_t above = raw_above_for(mode, plan.chunk_size(i), layout);
      targets_[i] = encode_target{.index = index + round1_index_entry(plan, i),
                                  .stream = raw + shift,
                                  .raw_above = above > shift ? above - shift : 0,
                                  .result = &outcomes_[i]};
    }
  }
  [[nodiscard]] const encode_target* target(std::uint64_t i) const noexcept
  {
    return &targets_[i];
  }
  /// Throws gpusort::logic_error unless every device answered its target: one that ignored
  /// it left keys where round 2 would decode a stream.
  void check_answered() const
  {
    for (const encode_target::outcome& o : outcomes_)
      GPUSORT_EXPECTS(o.stream_bytes != unanswered, "a device did not answer its encode target");
  }
  [[nodiscard]] bool any_encoded() const noexcept
  {
    return std::any_of(outcomes_.begin(), outcomes_.end(),
                       [](const encode_target::outcome& o) { return !o.raw; });
  }
  /// Every chunk as round 1 stored it: its stream at its raw place in `keys`, or raw there.
  [[nodiscard]] std::vector<stored_chunk> stored(const chunk_plan& plan, const void* keys,
                                                 const element_layout& layout) const
  {
    std::vector<stored_chunk> chunks(plan.d);
    for (std::uint64_t i = 0; i < plan.d; ++i) {
      chunks[i].stream =
          static_cast<const std::byte*>(keys) + plan.chunk_begin(i) * layout.key_bytes;
      if (!outcomes_[i].raw) {
        chunks[i].index = targets_[i].index;
        chunks[i].stream = targets_[i].stream;
      }
    }
    return chunks;
  }
  /// What round 1 stored against the raw keys (execution_stats).
  void add_to(execution_stats& stats, const chunk_plan& plan, const element_layout& layout) const
  {
    stats.round1_key_bytes = plan.n * layout.key_bytes;
    for (std::uint64_t i = 0; i < plan.d; ++i) {
      const std::uint64_t m = plan.chunk_size(i);
      if (outcomes_[i].raw) {
        stats.round1_stored_bytes += m * layout.key_bytes;
        continue;
      }
      stats.round1_stored_bytes +=
          outcomes_[i].stream_bytes +
          codec::dealt_blocks(m, plan.runs_per_chunk()) * sizeof(codec::run_block);
      ++stats.encoded_chunks;
    }
  }

 private:
  /// An outcome no device writes (a stream is never that long): not answered yet.
  static constexpr std::uint64_t unanswered = ~std::uint64_t{0};
  std::vector<encode_target> targets_;
  std::vector<encode_target::outcome> outcomes_;
};

template <typename K, typename V>
std::vector<chunk_task> round1_tasks(const job_arrays& a, const chunk_plan& plan,
                                     const round1_output<K, V>& out,
                                     const round1_encoding* encoding)
{
  constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  std::vector<chunk_task> tasks(plan.d);
  for (std::uint64_t i = 0; i < plan.d; ++i) {
    const std::uint64_t begin = plan.chunk_begin(i);
    const std::uint64_t m = plan.chunk_size(i);
    chunk_task& t = tasks[i];
    t.src_keys = a.src_keys;
    t.src_values = a.src_values;
    t.slices = {run{begin, m}};
    t.count = m;
    t.dst_keys = out.keys() + begin;
    t.dst_values = static_cast<char*>(out.values()) + begin * value_size;
    t.dst_ordered = true;
    t.deal_bins = plan.runs_per_chunk();
    if (encoding != nullptr) t.encode = encoding->target(i);
  }
  return tasks;
}

/// The round-1 output's runs and a source to read them (core/plan/run_source.hpp): raw, or as
/// a compressed job's round 1 stored them.
template <typename K, typename V, typename Source>
std::vector<chunk_task> round2_tasks(const job_arrays& a, const chunk_plan& plan,
                                     const round1_output<K, V>& in, const Source& source,
                                     std::vector<final_chunk>& finals,
                                     const splitter_set<K>& splitters, execution_stats& stats)
{
  constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  std::vector<chunk_task> tasks;
  tasks.reserve(finals.size());
  for (const std::uint64_t k : largest_first(finals)) {
    final_chunk& fc = finals[k];
    if (fc.size == 0) continue;
    chunk_task t;
    t.src_keys = in.keys();
    t.src_values = in.values();
    t.src_ordered = true;
    // At d = 1594, about 10 high bits are the same in every key of a final chunk: a radix pass
    // over such a digit moved every key for nothing (issue 44: round 2's sort took twice round
    // 1's for chunks of the same size).
    t.key_bits = std::max(differing_bits(splitters, k), 1U);
    t.dst_keys = static_cast<char*>(a.dst_keys) + fc.out_offset * sizeof(K);
    t.dst_values = static_cast<char*>(a.dst_values) + fc.out_offset * value_size;
    if (needs_compensation(fc, plan.capacity)) {
      // The equal elements need no decoding: write_equal_tail writes the splitter's key and
      // reads only their values, which round 1 never encodes.
      compensation_split split = split_equal(source, fc, splitters, plan.capacity);
      t.slices = std::move(split.rest);
      t.count = split.rest_count;
      t.equal_slices = std::move(split.equal);
      t.equal_count = split.equal_count;
      t.splitter_bits = splitters.values[k];
      ++stats.compensated_chunks;
    } else {
      t.slices = std::move(fc.slices);  // d * g slices: moved, not copied (issue 44)
      t.count = fc.size;
    }
    if constexpr (std::is_same_v<Source, encoded_runs<K>>) {
      t.encoded.reserve(t.slices.size());
      std::uint64_t at = 0;
      for (const run& sl : t.slices) {
        t.encoded.push_back(source.slice_of(sl, at));
        at += sl.length;
      }
    }
    tasks.push_back(std::move(t));
  }
  return tasks;
}

/// An in-place job whose round 2 failed has overwritten part of its input; the round-1 output
/// is a permutation of the input, so copying it back restores the original elements (a
/// compressed job's keys decoded on the way, chunk pieces in parallel).
/// An input in a file is written back through a bounded buffer; when that fails too (the disk
/// that failed round 2), the error says so and the original failure is the one reported.
template <typename K, typename V, typename Source>
void restore_input(const job_arrays& a, const element_layout& layout,
                   const round1_output<K, V>& r1, const Source& source) noexcept
{
  try {
    produce_into(static_cast<K*>(a.src_keys), a.n,
                 [&](K* out, std::uint64_t first, std::uint64_t count) {
                   const K* ordered = r1.keys() + first;
                   if constexpr (std::is_same_v<Source, encoded_runs<K>>) {
                     source.decode_range(first, count, out);
                     ordered = out;
                   }
                   from_ordered_bits<K>(ordered, out, count, layout.keys());
                 });
    if constexpr (!std::is_same_v<V, no_value>)
      host_write(a.src_values, r1.values(), a.n * sizeof(V));
  } catch (const std::exception& e) {
    log(log_level::error, "an in-place sort failed and its input could not be restored: {}",
        e.what());
  }
}

/// Between the rounds and round 2 (design.md section 2), reading the runs through `source`:
/// splitters from the runs of one new chunk (sampled_chunk_runs), every run cut by
/// binary search, each final chunk sorted into its place, compensating the chunks that
/// splitter-equal keys made too large. `behind`: the first sample as round 1 read it, or null.
template <typename K, typename V, typename Source>
void sort_round2(const job_arrays& a, const element_layout& layout, const chunk_plan& plan,
                 const std::vector<device*>& devices, job_context& ctx,
                 const round1_output<K, V>& r1, const Source& source, sample_behind<K>* behind,
                 execution_stats& stats)
{
  const auto between = std::chrono::steady_clock::now();
  std::vector<K> first_candidates;
  double sampled_behind = 0;
  if (behind != nullptr) {
    first_candidates = behind->take();
    sampled_behind = seconds_since(between);
    stats.sample_runs_behind = behind->read_behind();
    log(log_level::debug, "round 2's sample: {} of {} runs read behind round 1",
        stats.sample_runs_behind, plan.d);
  }
  const std::vector<run> runs = make_run_table(plan);
  const std::vector<run> sampled = sampled_chunk_runs(plan);
  const double tabled = seconds_since(between);
  round2_cuts<K> cuts = cut_runs(source, plan, runs, sampled, std::move(first_candidates));
  ctx.check();
  stats.splitter_candidates = cuts.s * plan.d;
  std::vector<chunk_task> tasks =
      round2_tasks(a, plan, r1, source, cuts.finals, cuts.splitters, stats);
  if (ctx.profiling()) {
    // The whole plan, then its parts on the same clock: at d in the thousands the plan is a
    // quarter of the job on a GPU (issue 44), and which part grows is what decides the fix.
    const double spent = seconds_since(between);
    const double dropped = tabled + cuts.dropped_seconds;
    const double chosen = dropped + cuts.splitters_seconds;
    const double cut = chosen + cuts.cuts_seconds;
    const auto host_stage = [&](const char* name, double from, double to) {
      ctx.add_host_stage(2, name, tasks.size(), 0, from, to);
    };
    host_stage("plan", 0, spent);
    // What round 1 left of the sample it read behind it (the last chunks' runs, mostly).
    if (behind != nullptr) host_stage("plan: sample left", 0, sampled_behind);
    // The usual sample's splitters, cut and dropped because a final chunk broke the bound.
    if (cuts.dropped_seconds > 0) host_stage("plan: first sample", sampled_behind, dropped);
    host_stage("plan: splitters", cuts.dropped_seconds > 0 ? dropped : sampled_behind, chosen);
    host_stage("plan: cuts", chosen, cut);
    host_stage("plan: tasks", cut, spent);
  }
  try {
    run_round(2, 2, std::move(tasks), layout, devices, ctx, ring_reserve(plan));
  } catch (...) {
    if (a.in_place()) restore_input(a, layout, r1, source);
    throw;
  }
}

/// The scattered rounds (issue 44; core/plan/scatter_buckets.hpp): buckets from a sample of the
/// input first, then round 1 sorts each chunk and writes its slice of every bucket behind the
/// earlier chunks' in the bucket's region, and round 2 sorts each bucket, one slice long, into
/// its place. Nothing is planned between the rounds, and round 2 reads whole regions (the
/// copy engines' work) where DSPS's gathered d slices a final chunk.
template <typename K, typename V>
class scattered_rounds {
 public:
  static constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);

  scattered_rounds(const job_arrays& a, const element_layout& layout, const chunk_plan& plan,
                   const std::vector<device*>& devices, job_context& ctx)
      : a_{a}, layout_{layout}, plan_{plan}, devices_{devices}, ctx_{ctx}
  {
  }

  /// Buckets from a sample of the input; false where their regions would need more than the
  /// plan's round-1 buffer (heavy keys the sample found many of) or the GPUs' tables hold, for
  /// DSPS to take the job.
  bool choose_buckets()
  {
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t m = tuning_.samples(plan_.n, task_elements());
    std::vector<std::uint64_t> sample = sample_input(m);
    buckets_ = make_scatter_buckets(sample, plan_.n, task_elements(), 8 * sizeof(K), tuning_);
    ctx_.add_host_stage(1, "sample", buckets_.count(), 0, 0, seconds_since(start));
    log(log_level::debug, "scattered rounds: {} buckets from {} sample keys, round 1 in order of "
        "the keys' top {} of {} bits", buckets_.count(), m, buckets_.sort_bits, 8 * sizeof(K));
    // A GPU's tables keep a bound and a slice a bucket for as many as DSPS's slices.
    return buckets_.region_elements() <= plan_.scatter_elements &&
           buckets_.count() <= plan_tuning::max_chunks;
  }

  execution_stats sort(const host_buffer* scratch)
  {
    const round1_output<K, V> r1{plan_.scatter_elements, layout_, scratch};
    // Round 1: every chunk sorted and scattered into its buckets' regions. The chunks are the
    // plan's (a GPU's ring slot takes two where they fit, sorting them side by side).
    const chunk_plan& cut = plan_;
    const std::uint64_t chunks = plan_.d;
    scatter_places places{buckets_, chunks};
    std::vector<scatter_target> targets(chunks);
    std::vector<chunk_task> tasks(chunks);
    for (std::uint64_t i = 0; i < chunks; ++i) {
      targets[i] = {.buckets = &buckets_, .places = &places, .chunk = i};
      chunk_task& t = tasks[i];
      t.src_keys = a_.src_keys;
      t.src_values = a_.src_values;
      t.slices = {run{cut.chunk_begin(i), cut.chunk_size(i)}};
      t.count = cut.chunk_size(i);
      t.dst_keys = r1.keys();
      t.dst_values = r1.values();
      t.dst_ordered = true;
      t.begin_bit = 8 * sizeof(K) - buckets_.sort_bits;
      t.scatter = &targets[i];
    }
    run_round(1, 2, std::move(tasks), layout_, devices_, ctx_, task_elements());

    // Round 2: every bucket into its place; a bucket of one key needs no sort.
    const auto between = std::chrono::steady_clock::now();
    std::vector<chunk_task> sorts;
    std::vector<chunk_task> equal;
    std::uint64_t out = 0;
    for (std::uint64_t b = 0; b < buckets_.count(); ++b) {
      const std::uint64_t filled = places.filled(b);
      if (filled == 0) continue;
      chunk_task t;
      t.src_keys = r1.keys();
      t.src_values = r1.values();
      t.src_ordered = true;
      t.dst_keys = static_cast<char*>(a_.dst_keys) + out * sizeof(K);
      t.dst_values = static_cast<char*>(a_.dst_values) + out * value_size;
      const run region{buckets_.region[b], filled};
      if (buckets_.equal[b] != 0) {
        t.equal_slices = {region};
        t.equal_count = filled;
        t.splitter_bits = buckets_.lower[b];
        equal.push_back(std::move(t));
      } else {
        t.slices = {region};
        t.count = filled;
        t.key_bits = std::max(buckets_.differing_bits(b, 8 * sizeof(K)), 1U);
        sorts.push_back(std::move(t));
      }
      out += filled;
    }
    GPUSORT_EXPECTS(out == plan_.n, "round 1 placed every element in a bucket");
    ctx_.add_host_stage(2, "plan", sorts.size(), 0, 0, seconds_since(between));
    try {
      for (const chunk_task& t : equal) write_equal_tail(t, layout_);
      run_round(2, 2, std::move(sorts), layout_, devices_, ctx_, task_elements());
    } catch (...) {
      if (a_.in_place()) restore(r1, places);
      throw;
    }
    return execution_stats{.chunks = chunks,
                           .rounds = 2,
                           .scatter_buckets = buckets_.count(),
                           .equal_buckets = static_cast<std::uint64_t>(std::count(
                               buckets_.equal.begin(), buckets_.equal.end(), 1))};
  }

 private:
  /// The largest task of either round, which the devices keep their buffers for: DSPS's
  /// (ring_reserve), so that a job cut small by chunk_bytes does not take a GPU's whole
  /// capacity in buffers, and a bucket's region within it.
  [[nodiscard]] std::uint64_t task_elements() const noexcept { return ring_reserve(plan_); }

  /// m keys at random places of the input, as ordered bits, sorted. The reads miss cache and
  /// TLB alike: every core takes a share.
  std::vector<std::uint64_t> sample_input(std::uint64_t m) const
  {
    const K* src = static_cast<const K*>(a_.src_keys);
    std::vector<std::uint64_t> sample(m);
    const auto count = static_cast<std::int64_t>(m);
    const key_order order = layout_.keys();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      const std::uint64_t at = scatter_sample_position(plan_.n, static_cast<std::uint64_t>(i));
      sample[static_cast<std::size_t>(i)] = to_ordered<K>(src[at], order);
    }
    std::vector<std::uint64_t> scratch(cpu_sort_scratch_bytes<std::uint64_t, no_value>(m) / 8 + 1);
    cpu_sort<std::uint64_t, no_value>(sample.data(), nullptr, m, scratch.data(), 0);
    return sample;
  }

  /// An in-place job whose round 2 failed: the regions hold a permutation of the input.
  void restore(const round1_output<K, V>& r1, const scatter_places& places) const noexcept
  {
    try {
      std::uint64_t at = 0;
      for (std::uint64_t b = 0; b < buckets_.count(); ++b) {
        const std::uint64_t filled = places.filled(b);
        const K* from = r1.keys() + buckets_.region[b];
        produce_into(static_cast<K*>(a_.src_keys) + at, filled,
                     [&](K* dst, std::uint64_t first, std::uint64_t count) {
                       from_ordered_bits<K>(from + first, dst, count, layout_.keys());
                     });
        if constexpr (value_size > 0)
          host_write(static_cast<V*>(a_.src_values) + at,
                     static_cast<const V*>(r1.values()) + buckets_.region[b], filled * sizeof(V));
        at += filled;
      }
    } catch (const std::exception& e) {
      log(log_level::error, "an in-place sort failed and its input could not be restored: {}",
          e.what());
    }
  }

  const job_arrays& a_;
  const element_layout& layout_;
  const chunk_plan& plan_;
  const std::vector<device*>& devices_;
  job_context& ctx_;
  scatter_tuning tuning_{scatter_tuning_from_environment()};
  scatter_buckets buckets_;
};

/// DSPS in two rounds (design.md section 2), round 1's runs compressed when `mode` says so.
template <typename K, typename V>
execution_stats sort_out_of_core(const job_arrays& a, const element_layout& layout,
                                 const chunk_plan& plan, const std::vector<device*>& devices,
                                 job_context& ctx, const host_buffer* scratch,
                                 run_compression mode)
{
  const bool compressed = compresses(mode, plan);
  // The scattered rounds read the input at random places before round 1 (a file's would be a
  // read each) and write no runs to compress.
  if (plan.scatter_elements > 0 && !compressed && !find_file_window(a.src_keys)) {
    scattered_rounds<K, V> scattered{a, layout, plan, devices, ctx};
    if (scattered.choose_buckets()) {
      try {
        return scattered.sort(scratch);
      } catch (const scatter_overflow& e) {
        // Round 1 wrote only the round-1 buffer: DSPS starts afresh. The overflow stopped every
        // device through the job's abort, which DSPS's rounds must not inherit.
        log(log_level::info, "the scattered rounds gave way to DSPS: {}", e.what());
        ctx.restart();
      }
    } else {
      log(log_level::debug, "the sample's buckets need more than the round-1 buffer: DSPS");
    }
  }
  execution_stats stats{.chunks = plan.d, .rounds = 2};
  const round1_output<K, V> r1{plan, layout, compressed, scratch};
  std::optional<round1_encoding> encoding;
  if (compressed) encoding.emplace(plan, layout, mode, r1.index(), r1.keys());

  // Round 2's first sample, read chunk by chunk as round 1 stores them where the runs stay
  // raw (sample_behind.hpp): the copy engines then wait less between the rounds.
  std::optional<sample_behind<K>> sample;
  task_hooks hooks;
  if (!compressed && sample_behind_enabled()) {
    sample.emplace(plan, r1.keys());
    hooks.written = [&sample](std::size_t chunk) { sample->written(chunk); };
  }

  // Round 1: sort every chunk and deal it into d sorted runs (encoded, for a compressed job).
  run_round(1, 2, round1_tasks<K, V>(a, plan, r1, encoding ? &*encoding : nullptr), layout,
            devices, ctx, ring_reserve(plan), std::move(hooks));

  // A job whose every chunk went raw (keys that do not compress) runs round 2 as without
  // compression: no device decodes, no search decodes.
  if (encoding) encoding->check_answered();
  if (encoding && encoding->any_encoded()) {
    encoding->add_to(stats, plan, layout);
    const encoded_runs<K> source{plan, r1.keys(), encoding->stored(plan, r1.keys(), layout)};
    sort_round2(a, layout, plan, devices, ctx, r1, source, static_cast<sample_behind<K>*>(nullptr),
                stats);
  } else {
    if (encoding) encoding->add_to(stats, plan, layout);
    sort_round2(a, layout, plan, devices, ctx, r1, raw_runs<K>{r1.keys()},
                sample ? &*sample : nullptr, stats);
  }
  return stats;
}

/// Fits one device: a single round trip.
execution_stats sort_in_core(const job_arrays& a, const element_layout& layout,
                             const std::vector<device*>& devices, job_context& ctx)
{
  chunk_task t;
  t.src_keys = a.src_keys;
  t.src_values = a.src_values;
  t.slices = {run{0, a.n}};
  t.count = a.n;
  t.dst_keys = a.dst_keys;
  t.dst_values = a.dst_values;
  std::vector<chunk_task> tasks;
  tasks.push_back(std::move(t));
  run_round(1, 1, std::move(tasks), layout, {devices.front()}, ctx);
  return execution_stats{.chunks = 1, .rounds = 1};
}

}  // namespace

void run_round(int round, int rounds, std::vector<chunk_task> tasks,
               const element_layout& layout, const std::vector<device*>& devices,
               job_context& ctx, std::uint64_t reserve, task_hooks hooks)
{
  std::uint64_t elements = 0;
  for (const chunk_task& t : tasks) elements += t.total();
  ctx.begin_round(round, elements, rounds);
  const std::size_t chunks = tasks.size();
  task_queue queue{std::move(tasks), reserve, std::move(hooks)};
  const auto start = std::chrono::steady_clock::now();
  const auto profile_round = [&] {
    if (!ctx.profiling()) return;
    ctx.add_round_profile(round, chunks, elements * layout.bytes(), seconds_since(start));
  };
  run_side_by_side(
      devices.size(), [&](std::size_t i) { devices[i]->process(layout, queue, ctx); },
      [&] { ctx.abort(); });
  profile_round();
}

device_capacity common_capacity(const std::vector<device*>& devices,
                                const element_layout& layout)
{
  GPUSORT_EXPECTS(!devices.empty(), "a job needs at least one device");
  device_capacity cap = devices.front()->capacity(layout);
  for (const device* dev : devices) {
    const device_capacity c = dev->capacity(layout);
    if (c.elements < cap.elements) cap = c;
  }
  return cap;
}

std::uint64_t round1_index_entry(const chunk_plan& plan, std::uint64_t i) noexcept
{
  // Chunks take two sizes, the larger ones first (chunk_plan::chunk_size).
  const std::uint64_t larger = std::min(i, plan.n % plan.d);
  const std::uint64_t g = plan.runs_per_chunk();
  return larger * codec::dealt_blocks(plan.n / plan.d + 1, g) +
         (i - larger) * codec::dealt_blocks(plan.n / plan.d, g);
}

std::uint64_t round1_bytes(const chunk_plan& plan, const element_layout& layout, bool compressed)
{
  if (!compressed) {
    // The scattered rounds' regions, or DSPS's runs where the job runs as DSPS after all.
    const std::uint64_t n = std::max(plan.n, plan.scatter_elements);
    return round1_values_offset(n, layout) + n * layout.value_bytes;
  }
  return round1_index_offset(plan.n, layout) +
         round1_index_entry(plan, plan.d) * sizeof(codec::run_block);
}

std::uint64_t ring_reserve(const chunk_plan& plan) noexcept
{
  return std::min(plan.capacity, std::max(plan.chunk_size(0), plan.final_bound()));
}

std::uint64_t planning_bytes(const chunk_plan& plan, const element_layout& layout) noexcept
{
  if (plan.in_core()) return 0;
  if (plan.scatter_elements > 0) {
    // The sample and its sort's scratch, and a bucket's bound, region and count.
    const std::uint64_t m = scatter_tuning_from_environment().samples(plan.n, ring_reserve(plan));
    chunk_plan as_dsps = plan;
    as_dsps.scatter_elements = 0;
    const std::uint64_t dsps = planning_bytes(as_dsps, layout);
    // A job the sample sends back to DSPS plans as DSPS.
    return std::max(dsps, 2 * m * sizeof(std::uint64_t) + m / 4 * sizeof(std::uint64_t));
  }
  const std::uint64_t candidates = plan.d * plan.s;
  const std::uint64_t pieces = plan.d * plan.runs_per_chunk() * plan.d;
  return 2 * candidates * layout.key_bytes +
         pieces * (sizeof(std::uint64_t) + 2 * sizeof(slice));
}

namespace {
thread_local bool dsps_only = false;
}  // namespace

dsps_only_scope::dsps_only_scope() noexcept : was_{dsps_only} { dsps_only = true; }
dsps_only_scope::~dsps_only_scope() { dsps_only = was_; }
bool dsps_only_scope::active() noexcept { return dsps_only; }

std::uint64_t scatter_elements_for(const chunk_plan& plan, bool gpus)
{
  if (plan.in_core() || dsps_only) return 0;
  const std::optional<std::string_view> mode =
      switch_word("GPUSORT_SCATTER", {"auto", "on", "off"});
  const scatter_tuning tuning = scatter_tuning_from_environment();
  // A GPU's tables keep a bound and a slice a bucket for at most max_chunks buckets: more
  // (a job of thousands of times the budget) takes DSPS.
  const bool take = tuning.cuts(plan.n, ring_reserve(plan)) <= plan_tuning::max_chunks &&
                    (mode == "on" || (mode != "off" && gpus && plan.d >= tuning.min_chunks));
  return take ? tuning.round1_elements(plan.n, ring_reserve(plan)) : 0;
}

execution_stats execute(const job_arrays& arrays, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devices,
                        job_context& ctx, const host_buffer* round1_scratch,
                        run_compression compress_runs)
{
  ctx.check();
  if (arrays.n == 0) return execution_stats{.chunks = 0, .rounds = 0};
  if (plan.in_core()) return sort_in_core(arrays, layout, devices, ctx);
  return visit_layout(layout.key_bytes, layout.value_bytes, [&]<typename K, typename V>() {
    return sort_out_of_core<K, V>(arrays, layout, plan, devices, ctx, round1_scratch,
                                  compress_runs);
  });
}

}  // namespace gpusort::detail
