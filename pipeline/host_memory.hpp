// Host memory the pipeline owns: uninitialised, page-aligned, and an allocation failure is a
// gpusort::out_of_memory that names the size, not a std::bad_alloc from deep inside a sort.
#pragma once

#include <gpusort/config.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace gpusort::detail {

/// Chunks smaller than this make round1_memory::by_job register the round-1 buffer. Through the
/// staging, each chunk's runs cost hand-offs of their own: 8 GiB at a 32 MiB device budget
/// (1594 chunks of 5 MiB) sorted by `gpusort sort --local` in 3.07-3.30 s pinned against
/// 4.02-4.32 s pageable, and at 1 GiB (41 chunks of 200 MiB) pageable was ahead in 5 of 7 pairs
/// by 0.17-0.23 s (bench/results/h200x2-20261130-s11/call2, h200-20261128-c0add10-e2e-16Gi-
/// mover-ab.txt). A fit of those two points puts the break-even near chunks of 29 MB.
inline constexpr std::uint64_t round1_pin_below_chunk_bytes = std::uint64_t{32} << 20;

/// Whether a job whose chunks hold `chunk_bytes` each registers the round-1 buffer under `how`
/// (automatic: as an engine that runs many jobs, which repays the registration).
[[nodiscard]] constexpr bool pins_round1(round1_memory how, std::uint64_t chunk_bytes) noexcept
{
  switch (how) {
    case round1_memory::pageable: return false;
    case round1_memory::by_job: return chunk_bytes < round1_pin_below_chunk_bytes;
    case round1_memory::automatic:
    case round1_memory::pinned: break;
  }
  return true;
}

/// Half of the physical memory: the host memory budget's "auto" (1 GiB where the system
/// does not say).
std::uint64_t physical_memory_half() noexcept;

class host_buffer {
 public:
  host_buffer() = default;
  explicit host_buffer(std::size_t bytes);
  ~host_buffer();
  host_buffer(host_buffer&& other) noexcept;
  host_buffer& operator=(host_buffer&& other) noexcept;
  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  template <typename T>
  [[nodiscard]] T* as() const noexcept
  {
    return static_cast<T*>(data_);
  }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

  /// Makes every page now, from every core. A buffer about to be pinned needs it: registering
  /// untouched memory makes its pages on one thread inside the driver (H100 host, 8 GiB: 1.18 s
  /// against 0.14 s here plus 0.28 s to register; bench/results/h100-20261125-f90a3d0-mem.json).
  void populate();

  /// Runs before the memory is unmapped: how a GPU pipeline unpins memory it registered.
  void set_release_hook(std::function<void(void*, std::size_t)> hook) { release_ = std::move(hook); }

 private:
  void release() noexcept;

  void* data_{};
  std::size_t bytes_{};
  std::function<void(void*, std::size_t)> release_;
};

/// What the pages to fault in hold: `fresh` memory (zeros, nobody's data yet) may be faulted in
/// by writing where the kernel cannot fault without writing; `data` is never written.
enum class page_contents { fresh, data };

/// Faults every page of [data, data + bytes) in (made or, for a file's pages that exist, mapped)
/// from every core: what host_buffer::populate does, for memory the caller mapped. Any address
/// and length: the pages that hold them are faulted in.
void populate_pages(void* data, std::size_t bytes, page_contents contents);

}  // namespace gpusort::detail
