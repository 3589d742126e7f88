// A GPU as a device of the executor: three host threads feed three CUDA streams (copy in,
// compute, copy out) over a ring of chunk slots, so that chunk k+1 arrives while chunk k is
// sorted and chunk k-1 leaves, and both copy engines stay busy.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/host_memory.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gpusort::detail {

struct cuda_device_options {
  int id{0};
  /// Device memory for one job; nullopt: what the GPU has free less `reserve_bytes`.
  std::optional<std::uint64_t> budget;
  std::uint64_t reserve_bytes{std::uint64_t{1} << 30};
  /// Pinned staging for inputs and outputs in memory the engine did not pin.
  std::uint64_t staging_piece_bytes{std::uint64_t{32} << 20};
  unsigned staging_pieces{4};
};

class cuda_device final : public device {
 public:
  explicit cuda_device(cuda_device_options options);
  ~cuda_device() override;

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] device_capacity capacity(const element_layout& layout) const override;
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override;

  /// Chunk slots in the ring: one copying in, one sorting, one copying out.
  static constexpr unsigned ring_slots = 3;
  /// Budget bytes per element of capacity: the ring slots plus the sort's alternate buffer.
  static constexpr unsigned buffers_per_element = ring_slots + 1;

  /// Lowers the budget after an allocation failed, so that the engine can plan smaller chunks.
  void shrink_budget() noexcept;

 private:
  struct impl;
  cuda_device_options options_;
  std::uint64_t budget_bytes_{};
  std::string name_;
};

/// Host memory allocated and registered with every GPU (portable, mapped), so that copies run
/// at full speed and kernels can read it directly. Unregistered when the buffer goes.
host_buffer pinned_host_buffer(std::size_t bytes);

/// Whether `p` lies in page-locked memory that the GPUs can copy from directly.
bool is_pinned(const void* p) noexcept;

}  // namespace gpusort::detail
