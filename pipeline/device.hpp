// What the executor asks of a device (a GPU, or the host device that runs the same steps on the
// CPU): take chunk tasks from a shared queue until it is empty, each one "gather, sort, then
// deal or write back", within the device's memory budget.
#pragma once

#include "core/keys.hpp"
#include "core/plan/chunk_plan.hpp"
#include "core/plan/dealing.hpp"
#include "core/plan/scatter_buckets.hpp"
#include "core/run_codec.hpp"

#include <gpusort/gpusort.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace gpusort::detail {

struct element_layout {
  dtype type{dtype::u64};
  order direction{order::ascending};
  std::uint32_t key_bytes{8};
  std::uint32_t value_bytes{0};  ///< 0: keys alone
  float_order floats{float_order::total};
  bool canonical{false};  ///< key_order::canonical
  /// The values are the elements' input positions, made on the device (src_values unread):
  /// an argsort's. Only the resident GPU path takes it (pipeline/stable.hpp).
  bool positions{false};
  /// Sort stably: a GPU takes CUB's radix sort whatever its configured in-core sorter.
  bool stable{false};
  /// A GPU sorts the job's chunks with CUB's radix sort whatever its configured in-core
  /// sorter: the engine's choice where the radix sort's smaller scratch gives far fewer chunks
  /// (engine.cpp, route).
  bool radix_chunks{false};
  [[nodiscard]] std::uint64_t bytes() const noexcept { return key_bytes + value_bytes; }
  [[nodiscard]] key_order keys() const noexcept
  {
    return {.type = type, .dir = direction, .floats = floats, .canonical = canonical};
  }
};

/// Round 1 of a job whose runs are compressed (issue 21; core/run_codec.hpp's format): the
/// device encodes the task's dealt runs (ordered bits, `deal_bins` runs, their blocks numbered
/// one after another) and writes the chunk's index entries to `index` and its stream to
/// `stream` (dst_keys or just after it), in place of the keys. The stream never takes more than
/// count * key_bytes bytes (a delta has at most a key's bits and each block's first key lives in
/// the index), so the room dst_keys has for the raw keys holds it. A stream of more than
/// `raw_above` bytes does not pay for its decoding (or would not fit after the shift): the
/// device then writes the dealt keys raw to dst_keys, as without compression, and says so in
/// `result`. Values are never encoded.
struct encode_target {
  codec::run_block* index{};  ///< host: codec::dealt_blocks(count, deal_bins) entries
  /// Host: where the stream goes, 8-byte aligned (the format's words; round 2's decoder reads
  /// them as such): dst_keys, or 4 bytes after it for 4-byte keys of a chunk that starts at an
  /// odd element, with raw_above 4 bytes lower so that the stream still ends within the raw
  /// room. Null: dst_keys.
  std::byte* stream{};
  std::uint64_t raw_above{};  ///< stream bytes above which the keys are stored raw
  struct outcome {
    std::uint64_t stream_bytes{};  ///< bytes of stream written (0 when raw, or all keys equal)
    bool raw{};                    ///< the keys went raw to dst_keys; `index` is not written
  };
  outcome* result{};  ///< written by the device before its store of the task completes
};

/// One unit of device work: gather `slices` of the source, sort them, and either deal the sorted
/// elements into `deal_bins` runs (round 1) or write them in order (round 2, in-core sorts). A
/// compensated final chunk also carries the elements equal to its splitter, which go, unsorted,
/// behind the sorted ones with the splitter as key.
struct chunk_task {
  const void* src_keys{};
  const void* src_values{};
  bool src_ordered{};  ///< source holds ordered bits (round-1 output), else raw keys
  std::vector<run> slices;
  std::uint64_t count{};  ///< elements in `slices`
  void* dst_keys{};
  void* dst_values{};
  bool dst_ordered{};          ///< write ordered bits, else raw keys
  std::uint64_t deal_bins{1};  ///< > 1: deal into this many bins
  std::vector<run> equal_slices;
  std::uint64_t equal_count{};
  std::uint64_t splitter_bits{};  ///< ordered bits of the splitter the equal elements carry
  /// > 0: the ordered bits of the task's keys differ only in their low key_bits bits (round 2:
  /// every key lies between its chunk's two splitters, core/plan/splitters.hpp's
  /// differing_bits), so a radix sort need not pass over the others; 0: all may differ.
  unsigned key_bits{};
  /// > 0 (round 1 of a scattering job whose bounds are aligned, scatter_buckets::sort_bits):
  /// only the key bits from begin_bit up need to be in order, so a radix sort need not pass
  /// over the lower ones (keys equal in those bits keep their input order); 0: all of them.
  unsigned begin_bit{};
  /// Round 1 of a compressed job: encode the dealt runs (see encode_target); null: write keys.
  const encode_target* encode{};
  /// Round 1 of a scattering job (scatter_target): the sorted chunk's slice of each bucket goes
  /// to dst_keys and dst_values at the place the target gives it; null: written whole.
  const scatter_target* scatter{};
  /// Round 2 of a compressed job: the keys of slices[i] are encoded[i] (host addresses in the
  /// round-1 buffer; its dst_offset counts from the task's first element, as the gathered
  /// slices lie one after another). An entry whose index is null belongs to a chunk stored raw:
  /// its keys are read from src_keys at slices[i], as without compression. Values are always
  /// read at slices[i]. Empty: the job is not compressed.
  std::vector<codec::encoded_slice> encoded;
  /// The lean path's shifted rounds (pipeline/lean/): this task's destination overlaps the
  /// sources of earlier tasks of its round, so it writes only once tasks [0, write_after) of
  /// the round are written (task_queue::wait_to_write). 0: it writes whenever it is ready.
  std::uint64_t write_after{};
  /// The lean path's gathering round 2 (pipeline/lean/gather.hpp) reads a bucket where round 1
  /// and the evictions left it, in two parts of its space (the room and the array): slice i
  /// reads from alt_src_keys and alt_src_values where from_alt[i] is set. Empty: every slice
  /// reads from src_keys and src_values.
  const void* alt_src_keys{};
  const void* alt_src_values{};
  std::vector<std::uint8_t> from_alt;
  [[nodiscard]] std::uint64_t total() const noexcept { return count + equal_count; }
  /// Where slice i begins in its source: its keys, or (`values`) its values, of
  /// `element_bytes` each.
  [[nodiscard]] const char* slice_source(std::size_t i, bool values,
                                         std::uint64_t element_bytes) const noexcept
  {
    const bool alt = !from_alt.empty() && from_alt[i] != 0;
    const void* base = values ? (alt ? alt_src_values : src_values)
                              : (alt ? alt_src_keys : src_keys);
    return static_cast<const char*>(base) + slices[i].offset * element_bytes;
  }
};

/// Writes a compensated task's tail behind its `count` sorted elements: the splitter's key
/// `equal_count` times and the values of the equal elements, host to host. The tail never
/// needs sorting, so no device has to hold it: only the rest is bounded by the capacity.
void write_equal_tail(const chunk_task& task, const element_layout& layout);

/// Seconds from `start` to now on the steady clock: the host's times in profiles and reports.
[[nodiscard]] double seconds_since(std::chrono::steady_clock::time_point start) noexcept;

/// Cancellation and progress of one job, shared by its device workers.
class job_context {
 public:
  job_context(const sort_options& options, std::uint64_t bytes_per_element);
  /// Throws gpusort::cancelled once the job's token is cancelled or another worker failed.
  void check() const;
  void abort() noexcept { aborted_.store(true, std::memory_order_relaxed); }
  /// The job starts again from its first round on the same devices (the scattered rounds gave
  /// way to DSPS): the abort of the attempt that stopped every device is lifted, and progress
  /// counts from zero. The caller's cancellation stays.
  void restart();
  /// `rounds`: how many rounds the job takes in all (1 or 2), for progress over the whole job.
  void begin_round(int round, std::uint64_t elements, int rounds);
  void add_done(std::uint64_t elements);

  [[nodiscard]] bool profiling() const noexcept { return options_.profile; }
  [[nodiscard]] int round() const;
  /// Seconds since the job started: the clock of stage_profile::round_start.
  [[nodiscard]] double elapsed() const noexcept;
  void add_profile(stage_profile stage);
  /// When profiling: a stage of the host's in round `round`, `bytes` moved or worked on, from
  /// `from` to `to` seconds on the clock of its own work (the host's stages start at 0).
  void add_host_stage(int round, std::string stage, std::uint64_t chunks, std::uint64_t bytes,
                      double from, double to);
  /// The round as the host saw it: device "all", stage "round", `wall` seconds.
  void add_round_profile(int round, std::uint64_t chunks, std::uint64_t bytes, double wall);
  [[nodiscard]] std::vector<stage_profile> take_profile();

 private:
  /// Calls the progress callback with the state now (mutex_ held).
  void notify() const;

  const sort_options& options_;
  std::chrono::steady_clock::time_point start_{std::chrono::steady_clock::now()};
  std::vector<stage_profile> profile_;
  std::uint64_t bytes_per_element_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;
  int round_{};
  int rounds_{};
  std::uint64_t done_{};
  std::uint64_t earlier_{};  ///< elements done in the job's earlier rounds
  std::uint64_t total_{};
};

/// What a round's owner learns of and adds to its tasks as the devices take them (the lean
/// path's gathering round 2 builds each task's slices only when a device takes it, and lets it
/// write only once its place is cleared: pipeline/lean/gather.hpp).
struct task_hooks {
  /// Called once a task's destination holds its result, before the tasks that wait for it
  /// may write (the lean path journals it there: pipeline/lean/journal.hpp).
  std::function<void(std::size_t task)> written{};
  /// Called as a device takes a task, in task order, before it reads a byte: may fill in the
  /// task's slices (at most `most_slices` of them).
  std::function<void(std::size_t task, chunk_task& t)> prepare{};
  /// Called before a device writes a byte of a task's destination, after the tasks it waits
  /// for are written: returns once it may write (throws gpusort::cancelled to stop).
  std::function<void(std::size_t task)> ready{};
  /// Most slices `prepare` gives a task (0: the tasks hold their slices from the start).
  std::size_t most_slices{};
};

/// Tasks of one round, pulled by every device's worker.
class task_queue {
 public:
  /// `reserve`: the largest task of any round of the job (the plan's capacity), so that a
  /// device sizes its buffers once for both rounds.
  explicit task_queue(std::vector<chunk_task> tasks, std::uint64_t reserve = 0,
                      task_hooks hooks = {})
      : tasks_{std::move(tasks)},
        reserve_{reserve},
        hooks_{std::move(hooks)},
        written_(tasks_.size(), false)
  {
  }
  /// The next task, or nullptr when the round is done.
  const chunk_task* pop();
  /// The next task where `fits` accepts it, else nullptr (it stays for the next pop): how a
  /// GPU takes several small tasks into one ring slot (round_state::batch_fits). Never with
  /// hooks: a task they prepare is taken only by pop(), one at a time, in order. The task
  /// returned is the one `fits` was last called with, so that what it judged can serve the
  /// caller.
  template <typename Fits>
  const chunk_task* pop_if(Fits&& fits)
  {
    if (hooks_.prepare || hooks_.ready || hooks_.written) return nullptr;
    std::size_t i = next_.load(std::memory_order_relaxed);
    // Another device may take it meanwhile: then this one looks at the task after it.
    while (i < tasks_.size() && fits(tasks_[i]))
      if (next_.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) return &tasks_[i];
    return nullptr;
  }
  /// Largest task, so that devices size their buffers for this round only.
  [[nodiscard]] std::uint64_t largest() const noexcept;
  /// Most slices to gather for one task, for sizing gather tables (equal slices are written by
  /// the host: see write_equal_tail).
  [[nodiscard]] std::size_t most_slices() const noexcept;
  /// Most buckets a task scatters into (chunk_task::scatter; 0: none scatters).
  [[nodiscard]] std::size_t most_buckets() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return tasks_.size(); }
  /// Elements a device should make room for: largest(), or more for the job's other round.
  [[nodiscard]] std::uint64_t reserve() const noexcept { return std::max(largest(), reserve_); }

  /// Before a device writes any byte of `task`'s destination: returns once tasks [0,
  /// task.write_after) are written (at once when write_after is 0) and hooks.ready allows it.
  /// Tasks are taken in order and each waits only for earlier ones, so the earliest unwritten
  /// task never waits. Throws gpusort::cancelled when `ctx` is cancelled or another device
  /// failed meanwhile.
  void wait_to_write(const chunk_task& task, const job_context& ctx);
  /// After `task`'s destination holds its result: calls hooks.written, then releases the tasks
  /// that wait for it.
  void written(const chunk_task& task);

 private:
  [[nodiscard]] std::size_t index_of(const chunk_task& task) const;

  std::vector<chunk_task> tasks_;
  std::uint64_t reserve_{};
  std::atomic<std::size_t> next_{0};
  task_hooks hooks_;
  std::mutex pop_mutex_;               ///< orders hooks.prepare with the taking of tasks
  std::mutex written_mutex_;
  std::condition_variable written_changed_;
  std::vector<bool> written_;          ///< under written_mutex_
  std::uint64_t written_prefix_{};     ///< under written_mutex_: tasks [0, this) are written
};

class device {
 public:
  device() = default;
  virtual ~device() = default;
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  [[nodiscard]] virtual std::string name() const = 0;
  /// Elements of `layout` one task may hold, and the budget bytes that capacity costs.
  [[nodiscard]] virtual device_capacity capacity(const element_layout& layout) const = 0;
  /// Runs tasks from `queue` until it is empty; checks `ctx` between tasks.
  virtual void process(const element_layout& layout, task_queue& queue, job_context& ctx) = 0;
  /// Host memory this device takes for a job's tasks of at most `task_elements` elements and
  /// `slices` slices each (its staging, or the host device's whole working memory): what a
  /// host memory limit must leave it (pipeline/lean/plan.hpp).
  [[nodiscard]] virtual std::uint64_t host_bytes(const element_layout& layout,
                                                 std::uint64_t task_elements,
                                                 std::uint64_t slices) const = 0;
};

/// Runs work(i) for every i < n, each on a thread of its own (one alone on the caller's), and
/// once every one has returned rethrows the first failure; `on_failure` runs on a failing
/// thread as it fails (a round's workers stop the others with it). Several devices' work side
/// by side: a worker that blocks (a staged copy) then holds up no other device.
template <typename Work, typename OnFailure>
void run_side_by_side(std::size_t n, Work&& work, OnFailure&& on_failure)
{
  if (n == 1) {
    work(std::size_t{0});
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  {
    std::vector<std::jthread> threads;
    threads.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          work(i);
        } catch (...) {
          {
            const std::lock_guard lock{failure_mutex};
            if (!failure) failure = std::current_exception();
          }
          on_failure();
        }
      });
  }  // joined here, before the failure is looked at
  if (failure) std::rethrow_exception(failure);
}

}  // namespace gpusort::detail
