// The host device: the GPU's steps (copy in, sort, deal or write, copy out) on the CPU, with its
// "device memory" limited by the configured budget, so that CI runs the real out-of-core path.
#pragma once

#include "pipeline/device.hpp"

#include <cstdint>
#include <optional>

namespace gpusort::detail {

class host_device final : public device {
 public:
  /// `budget`: bytes of "device memory"; nullopt: unlimited. `threads`: 0 for every core.
  host_device(std::optional<std::uint64_t> budget, unsigned threads, int index = 0);

  [[nodiscard]] std::string name() const override;
  [[nodiscard]] device_capacity capacity(const element_layout& layout) const override;
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override;
  [[nodiscard]] std::uint64_t host_bytes(const element_layout& layout,
                                         std::uint64_t task_elements,
                                         std::uint64_t slices) const override;

  /// Two buffers of keys and values: the chunk, and the sort's scratch / the dealt copy.
  static constexpr std::uint64_t buffers_per_chunk = 2;

 private:
  std::optional<std::uint64_t> budget_;
  unsigned threads_;
  int index_;
};

}  // namespace gpusort::detail
