// Ordered-bits transforms on the device, the dispatch layer: validates, lays the array out
// into scalar ends and 16-byte vectors, picks the kernel instance for (dtype, order, direction)
// and launches it. Never allocates and never synchronizes.
#include "core/checks.hpp"
#include "core/cuda/ordered_keys.cuh"
#include "core/cuda/ordered_keys_kernel.cuh"

#include <gpusort/error.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace gpusort::cuda {
namespace {

void check_tuning(const transform_tuning& tuning)
{
  const auto tpb = tuning.threads_per_block;
  if (tpb < 32 || tpb > 1024 || tpb % 32 != 0)
    throw invalid_argument{"transform_tuning: threads_per_block must be a multiple of 32 in "
                           "[32, 1024], got " + std::to_string(tpb)};
  if (tuning.items_per_thread == 0 || tuning.max_blocks == 0)
    throw invalid_argument{"transform_tuning: items_per_thread and max_blocks must be positive"};
}

template <typename Bits, dtype Type, order Dir, bool Forward>
void launch(Bits* keys, std::uint64_t n, cudaStream_t stream, const transform_tuning& tuning)
{
  using vector_t = detail::key_vector<Bits>;
  constexpr auto key_bytes = std::uint64_t{sizeof(Bits)};

  detail::transform_layout layout;
  layout.n = n;
  const auto misalignment = reinterpret_cast<std::uintptr_t>(keys) % detail::vector_bytes;
  layout.head =
      std::min<std::uint64_t>(n, misalignment == 0 ? 0 : (detail::vector_bytes - misalignment) /
                                                             key_bytes);
  layout.vectors = (n - layout.head) / vector_t::size;
  layout.tail_begin = layout.head + layout.vectors * vector_t::size;

  const std::uint64_t tile = std::uint64_t{tuning.threads_per_block} * tuning.items_per_thread;
  // At least one block: the scalar ends need threads even when there is no whole vector.
  const std::uint64_t blocks =
      std::clamp<std::uint64_t>((layout.vectors + tile - 1) / tile, 1, tuning.max_blocks);

  detail::transform_kernel<<<static_cast<unsigned int>(blocks), tuning.threads_per_block, 0,
                             stream>>>(keys, layout, tuning.items_per_thread,
                                       detail::ordered_op<Bits, Type, Dir, Forward>{});
  GPUSORT_CHECK_LAUNCH();
}

template <dtype Type, bool Forward>
void dispatch_order(void* d_keys, std::uint64_t n, order dir, cudaStream_t stream,
                    const transform_tuning& tuning)
{
  using bits = gpusort::detail::bits_t<size_of(Type)>;
  auto* const keys = static_cast<bits*>(d_keys);
  if (dir == order::ascending) {
    launch<bits, Type, order::ascending, Forward>(keys, n, stream, tuning);
  } else {
    launch<bits, Type, order::descending, Forward>(keys, n, stream, tuning);
  }
}

template <bool Forward>
void transform(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
               const transform_tuning& tuning)
{
  check_tuning(tuning);
  if (n == 0 || gpusort::detail::ordered_is_identity(t, dir)) return;
  if (d_keys == nullptr) throw invalid_argument{"ordered-key transform: null keys with n > 0"};
  if (reinterpret_cast<std::uintptr_t>(d_keys) % size_of(t) != 0)
    throw invalid_argument{"ordered-key transform: keys not aligned to their size"};

  switch (t) {
    case dtype::u32: return dispatch_order<dtype::u32, Forward>(d_keys, n, dir, stream, tuning);
    case dtype::i32: return dispatch_order<dtype::i32, Forward>(d_keys, n, dir, stream, tuning);
    case dtype::f32: return dispatch_order<dtype::f32, Forward>(d_keys, n, dir, stream, tuning);
    case dtype::u64: return dispatch_order<dtype::u64, Forward>(d_keys, n, dir, stream, tuning);
    case dtype::i64: return dispatch_order<dtype::i64, Forward>(d_keys, n, dir, stream, tuning);
    case dtype::f64: return dispatch_order<dtype::f64, Forward>(d_keys, n, dir, stream, tuning);
  }
  throw invalid_argument{"ordered-key transform: unknown dtype"};
}

}  // namespace

void to_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                const transform_tuning& tuning)
{
  transform<true>(d_keys, n, t, dir, stream, tuning);
}

void from_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                  const transform_tuning& tuning)
{
  transform<false>(d_keys, n, t, dir, stream, tuning);
}

}  // namespace gpusort::cuda
