// The shifted space of a lean job (plan.hpp): positions x in [0, room) are the room, positions
// in [room, room + n) the array; keys and values lie in two such spaces at the same positions.
// Each part is memory or a file window (pipeline/file_window.hpp), so the same moves serve an
// array in memory, in tmpfs and on a disk.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace gpusort::detail::lean {

struct space {
  char* room_keys{};
  char* room_values{};  ///< null when the job has no values
  char* keys{};         ///< the array the job sorts (in place, or the separate output)
  char* values{};
  std::uint64_t room{};
  std::uint64_t n{};
  std::uint32_t key_bytes{};
  std::uint32_t value_bytes{};

  [[nodiscard]] std::uint64_t size() const noexcept { return room + n; }
  [[nodiscard]] char* key_at(std::uint64_t x) const noexcept
  {
    return x < room ? room_keys + x * key_bytes : keys + (x - room) * key_bytes;
  }
  [[nodiscard]] char* value_at(std::uint64_t x) const noexcept
  {
    return x < room ? room_values + x * value_bytes : values + (x - room) * value_bytes;
  }
  /// The base of the part that holds x, and x's element offset from it: what a device task
  /// takes (chunk_task's src and slices). A range never spans the two parts (plan.hpp).
  [[nodiscard]] std::uint64_t offset_in_part(std::uint64_t x) const noexcept
  {
    return x < room ? x : x - room;
  }
  [[nodiscard]] char* key_part(std::uint64_t x) const noexcept
  {
    return x < room ? room_keys : keys;
  }
  [[nodiscard]] char* value_part(std::uint64_t x) const noexcept
  {
    return value_bytes == 0 ? nullptr : x < room ? room_values : values;
  }
};

/// A mover's buffer for copies that pass through the host between file windows: at most
/// bounce_bytes, counted in the plan's host memory.
using bounce_buffer = std::vector<char>;
inline constexpr std::uint64_t bounce_bytes = std::uint64_t{256} << 10;

/// Copies `length` elements (keys and values) from position `from` to position `to` of the
/// space. The two ranges do not overlap, and each lies within the room or within the array.
/// Between files it asks the kernel to copy (copy_file_range), else it reads and writes
/// through `bounce`. Throws io_error where a file cannot be read or written.
void copy_elements(const space& s, std::uint64_t to, std::uint64_t from, std::uint64_t length,
                   bounce_buffer& bounce);

/// Raw key bits at position x (memory, or one positioned read of a file).
template <typename K>
K read_key(const space& s, std::uint64_t x);

}  // namespace gpusort::detail::lean
