// Copies of staged bytes that no core reads again soon: into the pinned pieces the copy engines
// read, out of them into a user's array or a mapped output file.
#pragma once

#include <cstddef>

namespace gpusort::detail {

/// memcpy whose stores bypass the caches (non-temporal) from stream_copy_min_bytes up, where the
/// CPU has them (x86-64) and GPUSORT_COPY_NT is not "0".
///
/// Why: a plain store first reads the destination's line from memory (a read for ownership), so
/// a large memcpy moves three bytes for each one copied, and the lines it leaves in the cache
/// are evicted unread: the copy engine reads the piece, and a user's array is far larger than
/// the cache. The staging copies share host memory with the copy engines' own traffic (design.md,
/// section 1), so every byte they save goes to the link.
void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept;

/// A copy of one piece: memcpy or stream_copy.
using piece_copy = void (*)(void* dst, const void* src, std::size_t bytes) noexcept;

/// `copy` over pieces of 1 MiB spread across OpenMP's threads. 1 MiB: a 32 MiB staging piece
/// of the GPU pipeline spreads over all 16 cores of a GPU host (with 4 MiB, 8 pieces kept half
/// of them idle). At most one piece: on the calling thread alone.
void copy_in_pieces(void* dst, const void* src, std::size_t bytes, piece_copy copy);

/// stream_copy split over threads (copy_in_pieces; parallel_copy is memcpy's).
void parallel_stream_copy(void* dst, const void* src, std::size_t bytes);

/// Below this a copy is plain memcpy: it fits the cache, and the line at each end is shared.
inline constexpr std::size_t stream_copy_min_bytes = std::size_t{64} << 10;

/// Whether stream_copy streams (the CPU can, and GPUSORT_COPY_NT does not say "0").
bool stream_copy_streams() noexcept;

}  // namespace gpusort::detail
