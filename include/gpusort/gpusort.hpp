// The embedded API: build an engine from a configuration and sort host arrays with it.
//
//   gpusort::engine engine{gpusort::config{}};
//   engine.sort(std::span{keys});                       // ascending, in place
//   engine.sort_pairs(std::span{keys}, std::span{vals}, {.direction = gpusort::order::descending});
#pragma once

#include <gpusort/config.hpp>
#include <gpusort/error.hpp>
#include <gpusort/types.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace gpusort {

/// Shared flag through which another thread cancels a sort; copies share the flag.
class cancel_token {
 public:
  cancel_token() : flag_{std::make_shared<std::atomic<bool>>(false)} {}
  void cancel() const noexcept { flag_->store(true, std::memory_order_relaxed); }
  [[nodiscard]] bool cancelled() const noexcept { return flag_->load(std::memory_order_relaxed); }

 private:
  std::shared_ptr<std::atomic<bool>> flag_;
};

struct sort_options {
  order direction{order::ascending};
  /// Equal keys keep their input order, and so do their values. Keys alone gain from it only
  /// in float_order::numpy, where keys of different bits compare equal.
  bool stable{false};
  float_order floats{float_order::total};
  progress_callback on_progress{};
  cancel_token cancel{};
  /// Fill sort_report::profile: where each device's time went, stage by stage. Costs a few
  /// timing events per chunk.
  bool profile{false};
  /// Host memory the job may take beyond its arrays, in bytes (staging, buffers, tables):
  /// where the fastest path needs more, the job runs on the lean path (in place, its memory
  /// independent of the array's size; sort_report::path says which ran), and where that
  /// needs more too, it is refused up front with a config_error naming the bytes it needs.
  /// nullopt: the engine's configuration (config::host_memory_budget).
  std::optional<std::uint64_t> host_memory_limit{};
};

/// A type-erased job: keys (and values) in, sorted in place or into separate outputs.
/// A separate output never writes the input. An in-place sort that fails or is cancelled leaves
/// the arrays holding a permutation of the original (key, value) pairs; the one exception is a
/// job that fits the GPUs and loses a GPU (a sticky CUDA error) or fails its copy-out three
/// times in a row while writing its result back, whose error says that the arrays are torn.
struct sort_job {
  key_array keys{};
  std::optional<value_array> values{};
  void* keys_out{};    ///< nullptr: in place
  void* values_out{};  ///< nullptr: in place (must be null exactly when keys_out is)
  /// An in-place sort of file_arrays on the lean path: an empty file, writable, on the same
  /// file system as the keys, that the job uses for its journal and its room (a few chunks).
  /// Given, the job runs lean whatever its size, so that a kill -9 at any moment leaves the
  /// journal from which restore_interrupted_sort puts every element back. -1: none (a lean
  /// job keeps its journal in memory: an error still restores the arrays, a kill does not).
  int journal_fd{-1};
};

/// An argsort: the permutation that sorts `keys`, stable by definition (equal keys by position):
/// keys[indices_out[i]] is the i-th key in order. The keys are never written; keys_out, when
/// set, receives the sorted keys. Indices are int64 (index_bytes 8) or uint32 (index_bytes 4,
/// only when keys.count < 2^32). The arrays may be file_array ranges.
struct argsort_job {
  key_array keys{};
  void* indices_out{};
  std::uint32_t index_bytes{8};
  void* keys_out{};
};

/// Host memory page-locked for every GPU of an engine for as long as this object lives, so that
/// sorts whose arrays lie in it copy straight to and from the GPUs instead of staging through
/// pinned slots. Registering costs about as much as copying the range once: do it once per
/// long-lived buffer (the daemon's shared buffers), not per job. Empty on a CPU engine. The
/// memory must outlive the registration and must not be registered twice.
class host_registration {
 public:
  host_registration() noexcept;
  ~host_registration();
  host_registration(host_registration&&) noexcept;
  host_registration& operator=(host_registration&&) noexcept;
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;

  /// True when the range is page-locked (a GPU engine and a non-empty range).
  [[nodiscard]] bool pinned() const noexcept;

 private:
  friend class engine;
  struct state;
  std::unique_ptr<state> state_;
};

/// A range of an open file standing in for an array: pass data() wherever a sort_job takes an
/// array (keys, values, an output) and the engine reads and writes the file with positioned I/O,
/// moving its bytes straight between the file and the pinned memory the GPUs copy from. Inputs
/// are never mapped: no page faults on the way, no SIGBUS when someone truncates the file. An
/// output in tmpfs opened for reading and writing is the exception: the engine maps it for the
/// job and makes its pages ahead with fallocate (a new tmpfs file's pages cost four times as
/// much written), and turns a SIGBUS in its own copies (the file cut meanwhile) into an error.
/// A file that ends early or a write that fails (a full disk, a full tmpfs) is an io_error.
///
/// data() is an address reserved for this file and never mapped: only the engine may use it (a
/// dereference faults). The descriptor stays the caller's and must stay open while this object
/// lives; an output's descriptor must be open for writing. `name` appears in error messages.
class file_array {
 public:
  file_array(int fd, std::uint64_t offset, std::uint64_t bytes, std::string name = "file");
  ~file_array();
  file_array(file_array&& other) noexcept;
  file_array& operator=(file_array&& other) noexcept;
  file_array(const file_array&) = delete;
  file_array& operator=(const file_array&) = delete;

  [[nodiscard]] void* data() const noexcept { return base_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return bytes_; }

  /// Starts making the pages of an output in tmpfs now, before a job writes it, instead of when
  /// the job starts: a new tmpfs file's pages are made one at a time under the file's lock
  /// (about 1 s for 8 GiB on the H100 host, whatever the threads), so a caller that creates
  /// its output before it starts an engine (the CLI: CUDA's start takes 0.1-0.3 s) should call
  /// this first. The job then writes behind the pages made. Returns false, and does nothing,
  /// where the window is not such an output (not tmpfs, not open for reading and writing, or
  /// mapped already); the job then writes as it would have. Not for an input: its pages exist.
  bool prepare_output();

 private:
  void release() noexcept;
  void* base_{};
  std::uint64_t bytes_{};
};

/// Host memory a job would take beyond its arrays on each path, before it runs.
struct memory_estimate {
  std::uint64_t fast_bytes{};  ///< the fastest path's (round-1 buffer, scratch, staging)
  /// The lean path's least (its room, tables and staging at the smallest workable chunks);
  /// 0 where the job cannot run lean, and `lean_refusal` says why.
  std::uint64_t lean_bytes{};
  std::string lean_refusal;
};

/// The rates a time prediction (engine::plan) rests on: one machine's devices, links and host
/// memory. Rates in GB/s (1e9 bytes a second), times in seconds. The named machines' numbers
/// were measured on such hosts (bench/results; core/plan/time_model.cpp says where each comes
/// from); a caller with its own measurements (gpu_bench --model) sets them.
struct machine_model {
  std::string name;
  /// GPUs the job may take; 0: the CPU engine's host device (sort and copies on the cores).
  std::uint32_t gpus{1};
  double link_in{};    ///< per GPU, host to device, alone, from pinned memory
  double link_out{};   ///< per GPU, device to host, alone
  double link_both{};  ///< per GPU, each way, both directions at once
  /// The host memory's copy rate from every core (memcpy, bytes copied a second): the host
  /// device's copies, the values' gather.
  double host_copy{};
  /// The host memory's bytes read plus written a second for the GPUs' copy engines, the
  /// staging's copies and the lean path's moves together; 0: twice host_copy.
  double host_dma{};
  double peer{};           ///< per GPU, each way, GPU to GPU (the resident path's exchange)
  double sort_rate{};      ///< per device, in-core sort, element bytes a second
  double device_memory_rate{};  ///< per GPU, a merge pass (bytes read plus written a second)
  double gather_rate{};    ///< round 2's gather kernel over mapped memory (slices below 256 KiB)
  double chunk_seconds{};  ///< fixed cost of one chunk on a device, each round
  double slice_seconds{};  ///< fixed cost of one of round 2's slices
  double candidate_seconds{};  ///< the host's planning between the rounds, per sample candidate
  double cut_seconds{};        ///< and per cut of a run at a splitter
  double exchange_seconds{};   ///< fixed cost of the resident path's exchange between GPUs
  /// Round 1 of the scattered rounds (a chunk sorted and its buckets' slices written to host
  /// memory by a kernel beside the next chunk's sort): per chunk a fixed cost and its bytes at
  /// this rate; 0 (the host device): as DSPS's round 1.
  double scatter_seconds{};
  double scatter_rate{};
  /// Round 2 of the scattered rounds: the fixed cost of a bucket's stage beside its sort (one
  /// slice through the copy engines); 0: chunk_seconds, as a DSPS chunk.
  double bucket_seconds{};
  /// The arrays are page-locked (registered, the daemon's shared buffers); false: pageable,
  /// staged through pinned pieces by the cores.
  bool pinned{true};
  /// Device memory per GPU (bytes), for a hypothetical machine's plan: a job fits the GPUs
  /// when its resident buffers do; 0: as large as the budget says.
  std::uint64_t device_memory{};

  /// The H200 hosts of bench/results (issue 40's and 44's measurements), with `gpus` GPUs.
  [[nodiscard]] static machine_model h200(std::uint32_t gpus = 1);
  /// The CPU engine's host device on `threads` cores (0: this machine's). Rough: calibrated
  /// on a 2-core VM and a 16-core host, scaled by the cores.
  [[nodiscard]] static machine_model host(unsigned threads = 0);
};

/// A phase of a predicted job and its seconds.
struct plan_phase {
  std::string name;
  double seconds{};
};

/// What a job would do and take, said before it runs (engine::plan): the same decisions as
/// engine::sort, and the time model's prediction on a machine_model.
struct job_plan {
  /// As sort_report::path: "in core", "resident", "two rounds", "direct", "lean"; "none"
  /// where no plan exists within the device budget (`smallest_budget` says what works) or the
  /// host memory limit (`refusal` says why).
  std::string path;
  std::string refusal;         ///< why the path is "none"; empty otherwise
  std::uint64_t elements{};
  std::uint64_t bytes{};       ///< keys and values
  std::uint64_t chunks{};      ///< d (1: one in-core sort)
  std::uint64_t bins{};        ///< g: runs round 1 deals each chunk into (0: no second round)
  int rounds{};
  /// Sample candidates the planning between the rounds reads: where the plan's bound needs
  /// more than the usual sample (2^20 at most), round 2 cuts with the usual one first and keeps
  /// it where its final chunks keep the bound, as they do on keys that are not adversarial
  /// (others read the bound's sample besides).
  std::uint64_t candidates{};
  std::uint64_t slices{};      ///< round 2's slices, d * d * g (scattered: round 1's, d * buckets)
  /// The scattered rounds' buckets (buckets chosen from a sample before round 1, round 2 a
  /// bucket a task; `candidates` is then the sample): 0 for DSPS's rounds and other paths.
  std::uint64_t buckets{};
  std::uint32_t devices{};     ///< devices the job takes (resident: the GPUs it fits on)
  /// Device budget per device this plan assumes (0: unlimited) and the least with which a plan
  /// exists for the job (0: none is needed: the job fits any budget the device grants).
  std::uint64_t device_budget{};
  std::uint64_t smallest_budget{};
  /// Beyond the arrays (estimate_memory's); zero for a hypothetical machine of other devices,
  /// whose host this engine cannot know (nor whether its job would run lean).
  memory_estimate host_memory{};
  std::uint64_t host_memory_limit{};
  double seconds{};                ///< predicted, the sum of the phases
  std::vector<plan_phase> phases;  ///< in order: round 1, planning, round 2 (or the resident's)
  machine_model machine;           ///< the rates the prediction used
};

/// Puts back every element of a file that a lean in-place sort was sorting when it was killed,
/// from the journal it left (sort_job::journal_fd): afterwards the file holds the elements it
/// held before that sort (in another order). The journal names the files it belongs to; a
/// journal of other files, or a damaged one, is an io_error and nothing is written. Runs on
/// the host alone; a restore that is itself killed can run again. `values`: the values file's
/// descriptor for a sort of pairs, else -1. Returns once the journal may be removed.
void restore_interrupted_sort(int journal_fd, const std::string& journal_name, int keys_fd,
                              int values_fd = -1);

/// Thread-safe: several threads may sort on one engine at once. GPU jobs take every GPU of the
/// engine and run one after another (each alone keeps the PCIe links busy); CPU jobs run side by
/// side.
class engine {
 public:
  explicit engine(config cfg);
  ~engine();
  engine(engine&&) noexcept;
  engine& operator=(engine&&) noexcept;
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  sort_report sort(const sort_job& job, const sort_options& options = {});

  /// The stable sorting permutation of job.keys (argsort_job); options.stable is implied.
  sort_report argsort(const argsort_job& job, const sort_options& options = {});

  template <typename K>
  sort_report sort(std::span<K> keys, const sort_options& options = {})
  {
    return sort(sort_job{.keys = {keys.data(), keys.size(), dtype_of_v<std::remove_cv_t<K>>}},
                options);
  }

  template <typename K, typename V>
  sort_report sort_pairs(std::span<K> keys, std::span<V> values, const sort_options& options = {})
  {
    static_assert(sizeof(V) == 4 || sizeof(V) == 8, "values must be 4 or 8 bytes");
    static_assert(std::is_trivially_copyable_v<V>);
    return sort(sort_job{.keys = {keys.data(), keys.size(), dtype_of_v<std::remove_cv_t<K>>},
                         .values = value_array{values.data(), values.size(), sizeof(V)}},
                options);
  }

  /// Host memory `job` would take on the fast and the lean path (sort_options::host_memory_limit).
  [[nodiscard]] memory_estimate estimate_memory(const sort_job& job,
                                                const sort_options& options = {}) const;
  [[nodiscard]] memory_estimate estimate_memory(const argsort_job& job,
                                                const sort_options& options = {}) const;

  /// What `job` would do on this engine, without touching its arrays (their pointers may be
  /// null): the path engine::sort would take, its chunks and the smallest device budget that
  /// works, the host memory, and the predicted seconds on `machine()`. Never throws for a
  /// budget or limit too small: the path is then "none". Throws invalid_argument for a job
  /// sort() would refuse as malformed (values of another count or width).
  [[nodiscard]] job_plan plan(const sort_job& job, const sort_options& options = {}) const;
  [[nodiscard]] job_plan plan(const argsort_job& job, const sort_options& options = {}) const;
  /// The same job on `machine`: with this engine's devices (as many GPUs, or the CPU for
  /// gpus 0) the engine's own plan at the machine's rates; otherwise a hypothetical machine's
  /// GPUs (capacity from the configuration's device_memory_budget, else
  /// machine.device_memory, less what only a real GPU can size: its sort's scratch).
  [[nodiscard]] job_plan plan(const sort_job& job, const sort_options& options,
                              const machine_model& machine) const;
  [[nodiscard]] job_plan plan(const argsort_job& job, const sort_options& options,
                              const machine_model& machine) const;
  /// The rates this engine's predictions use: machine_model::h200 with its GPU count (the
  /// engine measures no rates of its own), or machine_model::host on the CPU.
  [[nodiscard]] machine_model machine() const;

  /// Page-locks [data, data + bytes) for every GPU of the engine (see host_registration).
  /// Throws cuda_error when the driver refuses (memory already registered, limits).
  [[nodiscard]] host_registration register_host(void* data, std::size_t bytes);

  /// The devices this engine sorts on ("cpu", "cuda:0", ...).
  [[nodiscard]] std::vector<std::string> devices() const;
  [[nodiscard]] const config& configuration() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace gpusort
