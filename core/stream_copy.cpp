#include "core/stream_copy.hpp"

#include "core/switches.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpusort::detail {

bool stream_copy_streams() noexcept
{
#if defined(__SSE2__)
  // GPUSORT_COPY_NT=0: plain memcpy, for the A/B of the staging copies.
  static const bool on = switch_flag("GPUSORT_COPY_NT", true);
  return on;
#else
  return false;
#endif
}

void stream_copy(void* dst, const void* src, std::size_t bytes) noexcept
{
  if (bytes == 0) return;  // memcpy's pointers must be valid even then: an empty array's are null
#if defined(__SSE2__)
  if (bytes >= stream_copy_min_bytes && stream_copy_streams()) {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    // Streaming stores need 16-byte aligned addresses: the head up to one goes through memcpy.
    const std::size_t head = (16 - reinterpret_cast<std::uintptr_t>(d) % 16) % 16;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    // A line (64 bytes) per step: four loads, then four stores that fill one write-combining
    // buffer, which goes to memory whole without reading the line first.
    const std::size_t body = bytes / 64 * 64;
    for (std::size_t i = 0; i < body; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
    }
    // Streaming stores are weakly ordered: the fence makes them visible before whatever this
    // thread does next (a mutex release, an event that lets a copy engine read the piece).
    _mm_sfence();
    std::memcpy(d + body, s + body, bytes - body);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void copy_in_pieces(void* dst, const void* src, std::size_t bytes, piece_copy copy)
{
  constexpr std::size_t piece = std::size_t{1} << 20;
  if (bytes <= piece) {
    copy(dst, src, bytes);
    return;
  }
  const auto pieces = static_cast<std::int64_t>((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::size_t off = static_cast<std::size_t>(p) * piece;
    copy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
         std::min(piece, bytes - off));
  }
}

void parallel_stream_copy(void* dst, const void* src, std::size_t bytes)
{
  copy_in_pieces(dst, src, bytes, stream_copy);
}

}  // namespace gpusort::detail
