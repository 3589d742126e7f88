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
void launch(const Bits* src, Bits* dst, std::uint64_t n, cudaStream_t stream,
            const transform_tuning& tuning, Op op)
{
  using vector_t = detail::key_vector<Bits>;
  constexpr auto key_bytes = std::uint64_t{sizeof(Bits)};

  detail::transform_layout layout;
  layout.n = n;
  const auto misalignment = reinterpret_cast<std::uintptr_t>(src) % detail::vector_bytes;
  if (misalignment == reinterpret_cast<std::uintptr_t>(dst) % detail::vector_bytes) {
    layout.head = std::min<std::uint64_t>(
        n, misalignment == 0 ? 0 : (detail::vector_bytes - misalignment) / key_bytes);
    layout.vectors = (n - layout.head) / vector_t::size;
    layout.tail_begin = layout.head + layout.vectors * vector_t::size;
  } else {  // no 16-byte boundary falls at the same key in both: key by key
    layout.head = n;
    layout.tail_begin = n;
  }

  const std::uint64_t tile = std::uint64_t{tuning.threads_per_block} * tuning.items_per_thread;
  const std::uint64_t scalars = layout.head + (n - layout.tail_begin);
  // At least one block: the scalar ends need threads even when there is no whole vector.
  const std::uint64_t blocks = std::clamp<std::uint64_t>(
      (std::max(layout.vectors, scalars) + tile - 1) / tile, 1, tuning.max_blocks);

  detail::transform_kernel<<<static_cast<unsigned int>(blocks), tuning.threads_per_block, 0,
                             stream>>>(src, dst, layout, tuning.items_per_thread, op);
  GPUSORT_CHECK_LAUNCH();
}

template <dtype Type, bool Forward>
void dispatch_order(const void* d_src, void* d_dst, std::uint64_t n, order dir,
                    cudaStream_t stream, const transform_tuning& tuning)
{
  using bits = gpusort::detail::bits_t<size_of(Type)>;
  const auto* const src = static_cast<const bits*>(d_src);
  auto* const dst = static_cast<bits*>(d_dst);
  if (dir == order::ascending) {
    launch(src, dst, n, stream, tuning,
           detail::ordered_op<bits, Type, order::ascending, Forward>{});
  } else {
    launch(src, dst, n, stream, tuning,
           detail::ordered_op<bits, Type, order::descending, Forward>{});
  }
}

/// An order known only at run time (NumPy's float order): the map's few integer operations as
/// run-time constants.
template <typename Bits, bool Forward>
void launch_map(const void* d_src, void* d_dst, std::uint64_t n,
                const gpusort::detail::key_order& k, cudaStream_t stream,
                const transform_tuning& tuning)
{
  launch(static_cast<const Bits*>(d_src), static_cast<Bits*>(d_dst), n, stream, tuning,
         detail::map_op<Bits>{gpusort::detail::ordered_map<Bits>(k, Forward)});
}

/// Checks the arguments; false when there is nothing to do: no keys, or an identity map in
/// place.
bool check_transform(const void* d_src, const void* d_dst, std::uint64_t n,
                     const gpusort::detail::key_order& k, const transform_tuning& tuning)
{
  check_tuning(tuning);
  if (n == 0 || (d_src == d_dst && gpusort::detail::ordered_is_identity(k))) return false;
  if (d_src == nullptr || d_dst == nullptr)
    throw invalid_argument{"ordered-key transform: null keys with n > 0"};
  const auto key_bytes = std::uint64_t{size_of(k.type)};
  const auto src = reinterpret_cast<std::uintptr_t>(d_src);
  const auto dst = reinterpret_cast<std::uintptr_t>(d_dst);
  if (src % key_bytes != 0 || dst % key_bytes != 0)
    throw invalid_argument{"ordered-key transform: keys not aligned to their size"};
  // A partial overlap would make the result depend on the order in which threads run.
  const std::uint64_t bytes = n * key_bytes;
  if (src != dst && src < dst + bytes && dst < src + bytes)
    throw invalid_argument{"ordered-key transform: source and destination overlap without "
                           "being the same keys"};
  return true;
}

template <bool Forward>
void transform(const void* d_src, void* d_dst, std::uint64_t n,
               const gpusort::detail::key_order& k, cudaStream_t stream,
               const transform_tuning& tuning)
{
  if (!check_transform(d_src, d_dst, n, k, tuning)) return;
  if (gpusort::detail::ordered_is_identity(k)) {  // out of place: the keys as they are
    GPUSORT_CUDA_TRY(
        cudaMemcpyAsync(d_dst, d_src, n * size_of(k.type), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (k.numpy_floats()) {
    if (size_of(k.type) == 4)
      return launch_map<std::uint32_t, Forward>(d_src, d_dst, n, k, stream, tuning);
    return launch_map<std::uint64_t, Forward>(d_src, d_dst, n, k, stream, tuning);
  }
  const order dir = k.dir;
  switch (k.type) {
    case dtype::u32:
      return dispatch_order<dtype::u32, Forward>(d_src, d_dst, n, dir, stream, tuning);
    case dtype::i32:
      return dispatch_order<dtype::i32, Forward>(d_src, d_dst, n, dir, stream, tuning);
    case dtype::f32:
      return dispatch_order<dtype::f32, Forward>(d_src, d_dst, n, dir, stream, tuning);
    case dtype::u64:
      return dispatch_order<dtype::u64, Forward>(d_src, d_dst, n, dir, stream, tuning);
    case dtype::i64:
      return dispatch_order<dtype::i64, Forward>(d_src, d_dst, n, dir, stream, tuning);
    case dtype::f64:
      return dispatch_order<dtype::f64, Forward>(d_src, d_dst, n, dir, stream, tuning);
  }
  throw invalid_argument{"ordered-key transform: unknown dtype"};
}

}  // namespace

void to_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                cudaStream_t stream, const transform_tuning& tuning)
{
  transform<true>(d_keys, d_keys, n, k, stream, tuning);
}

void from_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                  cudaStream_t stream, const transform_tuning& tuning)
{
  transform<false>(d_keys, d_keys, n, k, stream, tuning);
}

void to_ordered(const void* d_src, void* d_dst, std::uint64_t n,
                const gpusort::detail::key_order& k, cudaStream_t stream,
                const transform_tuning& tuning)
{
  transform<true>(d_src, d_dst, n, k, stream, tuning);
}

void from_ordered(const void* d_src, void* d_dst, std::uint64_t n,
                  const gpusort::detail::key_order& k, cudaStream_t stream,
                  const transform_tuning& tuning)
{
  transform<false>(d_src, d_dst, n, k, stream, tuning);
}

void to_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                const transform_tuning& tuning)
{
  transform<true>(d_keys, d_keys, n, {.type = t, .dir = dir}, stream, tuning);
}

void from_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                  const transform_tuning& tuning)
{
  transform<false>(d_keys, d_keys, n, {.type = t, .dir = dir}, stream, tuning);
}

}  // namespace gpusort::cuda
