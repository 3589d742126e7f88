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

template <typename Bits, typename Op>
void launch(Bits* keys, std::uint64_t n, cudaStream_t stream, const transform_tuning& tuning,
            Op op)
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
                                       op);
  GPUSORT_CHECK_LAUNCH();
}

template <dtype Type, bool Forward>
void dispatch_order(void* d_keys, std::uint64_t n, order dir, cudaStream_t stream,
                    const transform_tuning& tuning)
{
  using bits = gpusort::detail::bits_t<size_of(Type)>;
  auto* const keys = static_cast<bits*>(d_keys);
  if (dir == order::ascending) {
    launch(keys, n, stream, tuning, detail::ordered_op<bits, Type, order::ascending, Forward>{});
  } else {
    launch(keys, n, stream, tuning, detail::ordered_op<bits, Type, order::descending, Forward>{});
  }
}

/// Checks the arguments; false when there is nothing to launch.
bool check_transform(const void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                     const transform_tuning& tuning)
{
  check_tuning(tuning);
  if (n == 0 || gpusort::detail::ordered_is_identity(k)) return false;
  if (d_keys == nullptr) throw invalid_argument{"ordered-key transform: null keys with n > 0"};
  if (reinterpret_cast<std::uintptr_t>(d_keys) % size_of(k.type) != 0)
    throw invalid_argument{"ordered-key transform: keys not aligned to their size"};
  return true;
}

template <bool Forward>
void transform(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
               const transform_tuning& tuning)
{
  if (!check_transform(d_keys, n, {.type = t, .dir = dir}, tuning)) return;

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

template <bool Forward>
void transform(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
               cudaStream_t stream, const transform_tuning& tuning)
{
  if (!k.numpy_floats()) return transform<Forward>(d_keys, n, k.type, k.dir, stream, tuning);
  if (!check_transform(d_keys, n, k, tuning)) return;
  if (size_of(k.type) == 4) {
    using bits = std::uint32_t;
    launch(static_cast<bits*>(d_keys), n, stream, tuning,
           detail::map_op<bits>{gpusort::detail::ordered_map<bits>(k, Forward)});
  } else {
    using bits = std::uint64_t;
    launch(static_cast<bits*>(d_keys), n, stream, tuning,
           detail::map_op<bits>{gpusort::detail::ordered_map<bits>(k, Forward)});
  }
}

}  // namespace

void to_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                cudaStream_t stream, const transform_tuning& tuning)
{
  transform<true>(d_keys, n, k, stream, tuning);
}

void from_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                  cudaStream_t stream, const transform_tuning& tuning)
{
  transform<false>(d_keys, n, k, stream, tuning);
}

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
