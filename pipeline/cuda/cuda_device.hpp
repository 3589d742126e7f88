// A GPU as a device of the executor: three host threads feed three CUDA streams (copy in,
// compute, copy out) over a ring of chunk slots, so that chunk k+1 arrives while chunk k is
// sorted and chunk k-1 leaves, and both copy engines stay busy.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/cuda/buffer_sizes.hpp"
#include "pipeline/cuda/chunk_sorter.hpp"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/staging.hpp"
#include "pipeline/host_memory.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace gpusort::detail {

struct cuda_device_options {
  int id{0};
  /// How a chunk in GPU memory is sorted (config key incore_engine).
  incore_engine incore{incore_engine::automatic};
  /// Device memory for one job; nullopt: what the GPU has free less `reserve_bytes`.
  std::optional<std::uint64_t> budget;
  std::uint64_t reserve_bytes{std::uint64_t{1} << 30};
  /// Pinned staging for inputs and outputs in memory the engine did not pin.
  std::uint64_t staging_piece_bytes{std::uint64_t{32} << 20};
  unsigned staging_pieces{4};
  /// Round 2 gathers slices at least this long on average with the copy engines, shorter ones
  /// with a kernel reading mapped memory (a copy call costs a few microseconds).
  std::uint64_t gather_copy_min_bytes{std::uint64_t{256} << 10};
  /// How a job that fits is cut into pieces and output ranges (core/plan/tuning.hpp).
  resident_tuning resident{};
};

/// The buffers, streams and staging a GPU keeps between rounds and jobs.
struct cuda_device_state;

/// Pinned host memory a GPU uses whatever its jobs are: staging for each direction and the
/// mapped words of the resident sort's splits. Made at the GPU's first job and kept for the
/// engine's life, shared by the in-core and out-of-core buffers: 256 MiB of cudaHostAlloc
/// (about 100 ms on the H100 host) came again with every replacement of either, which a mix of
/// layouts made often.
struct gpu_pinned {
  explicit gpu_pinned(const cuda_device_options& options);

  staging in;
  staging out;
  /// Mapped pinned words the split kernels read and write (diagonals, probes, counts).
  cuda::pinned_buffer words;

  /// The pinned bytes of both stagings and the words.
  [[nodiscard]] std::uint64_t bytes() const noexcept
  {
    return in.bytes() + out.bytes() + words.size();
  }
};

/// What a GPU holds to sort a job that fits its memory in one round trip (pipeline/cuda/
/// resident.hpp): the runs (its share's keys and values), one work array (the piece sort's
/// alternate, then the ring of range buffers the last merges write), scratch for sorting a
/// piece or merging a range, its streams, and the GPU's pinned staging and mapped words.
struct resident_buffers {
  resident_buffers(const resident_sizes& sizes, const cuda_device_options& options,
                   const chunk_sorter& sorter, gpu_pinned& pinned);
  ~resident_buffers();
  resident_buffers(const resident_buffers&) = delete;
  resident_buffers& operator=(const resident_buffers&) = delete;

  /// The bytes of each buffer a share of `elements` needs on one of `gpus` GPUs.
  static resident_sizes needed(const element_layout& layout, std::uint64_t elements,
                               std::uint64_t gpus, const cuda_device_options& options,
                               const chunk_sorter& sorter);
  /// Scratch for sorting a piece of a share of `elements` or merging one of its ranges.
  static std::size_t scratch_bytes(const element_layout& layout, std::uint64_t elements,
                                   const cuda_device_options& options,
                                   const chunk_sorter& sorter);

  cuda_device_options tuning;
  chunk_sorter sorter;
  resident_sizes sizes;
  std::size_t scratch_capacity{};
  cuda::device_buffer keys, values;            ///< the runs
  cuda::device_buffer work_keys, work_values;  ///< the alternate, then the ring
  cuda::device_buffer scratch;
  cuda::cuda_stream h2d, compute, d2h;
  staging& in_staging;
  staging& out_staging;
  /// The GPU's mapped words (gpu_pinned::words), word_count of them: the probes of the
  /// ranges' splits and each run's counts below them.
  cuda::pinned_buffer& words;
  static constexpr std::size_t word_count = 32768;
};

class cuda_device final : public device {
 public:
  explicit cuda_device(cuda_device_options options);
  ~cuda_device() override;

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] device_capacity capacity(const element_layout& layout) const override;
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override;
  [[nodiscard]] std::uint64_t host_bytes(const element_layout& layout,
                                         std::uint64_t task_elements,
                                         std::uint64_t slices) const override;

  /// How the budget is counted: buffer_sizes.hpp (no CUDA there, so that a CPU-only build
  /// counts a described GPU alike). Where no budget is given, reserve_bytes (1 GiB) stays
  /// free on the GPU besides.
  static constexpr std::uint64_t budget_margin = gpu_budget_margin;
  static constexpr unsigned ring_slots = gpu_ring_slots;
  static constexpr unsigned buffers_per_element = gpu_ring_buffers_per_element;

  [[nodiscard]] int id() const noexcept { return options_.id; }
  [[nodiscard]] const cuda_device_options& options() const noexcept { return options_; }
  /// The in-core sort this GPU uses for `layout`.
  [[nodiscard]] chunk_sorter sorter(const element_layout& layout) const
  {
    return chunk_sorter{layout.stable || layout.radix_chunks ? incore_engine::radix
                                                              : options_.incore,
                        layout.key_bytes, layout.value_bytes, sm_major_};
  }

  /// Whether this GPU's budget holds the resident buffers of a share of `elements` of
  /// `layout`, one of `gpus` GPUs' shares.
  [[nodiscard]] bool resident_fits(const element_layout& layout, std::uint64_t elements,
                                   std::uint64_t gpus) const;
  /// The resident buffers for a share of `elements` on one of `gpus` GPUs, kept from an
  /// earlier job when they fit, else grown (buffer_sizes.hpp); frees the out-of-core ring
  /// first where the budget cannot hold both.
  resident_buffers& resident(const element_layout& layout, std::uint64_t elements,
                             std::uint64_t gpus);

  /// Lowers the budget after an allocation failed, so that the engine can plan smaller chunks,
  /// and frees what the device kept from earlier rounds.
  void shrink_budget() noexcept;

  /// Adds to `ctx`'s profile (as stages of `round`) what making this GPU's kept buffers cost
  /// since the last call: its pinned staging at its first job, device buffers where they grew.
  /// A one-shot command pays them in its only job, so its profile shows them.
  void profile_made_buffers(job_context& ctx, int round);

 private:
  /// The GPU's pinned staging and words, made at its first job.
  gpu_pinned& pinned();
  /// Budget bytes for one kind of kept buffers (the resident sort's, else the ring's) whose
  /// job needs `need` bytes of them and `tables` bytes of the ring's tables beside them:
  /// beside the other kind where both fit, else after freeing the other kind.
  std::uint64_t room_for(std::uint64_t need, bool for_resident, std::uint64_t tables);

  /// What making buffers cost since profile_made_buffers last took it: seconds and bytes.
  struct made {
    double seconds{};
    std::uint64_t bytes{};
  };
  made pinned_made_, device_made_;

  cuda_device_options options_;
  std::unique_ptr<cuda_device_state> state_;
  std::uint64_t budget_bytes_{};
  int sm_major_{};
  std::string name_;
};


}  // namespace gpusort::detail
