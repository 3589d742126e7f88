#include "pipeline/direct.hpp"

#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "pipeline/host_memory.hpp"

#include <type_traits>

namespace gpusort::detail {

execution_stats sort_direct(const job_arrays& arrays, const element_layout& layout,
                            unsigned threads, job_context& ctx)
{
  ctx.check();
  if (arrays.n == 0) return execution_stats{.chunks = 0, .rounds = 0};
  ctx.begin_round(0, arrays.n, 1);
  visit_layout(layout.key_bytes, layout.value_bytes, [&]<typename K, typename V>() {
    K* keys = static_cast<K*>(arrays.dst_keys);
    V* values = static_cast<V*>(arrays.dst_values);
    const bool identity = ordered_is_identity(layout.keys());
    // Allocated before the input is touched, so that running out of memory changes nothing.
    // cpu_sort's scratch (a copy of the data) serves the small-job radix sort too.
    constexpr bool keys_alone = std::is_same_v<V, no_value>;
    const host_buffer scratch{cpu_sort_scratch_bytes<K, V>(arrays.n)};
    if (!arrays.in_place()) {
      // One pass either way: the transform doubles as the copy.
      if (identity)
        parallel_copy(keys, arrays.src_keys, arrays.n * sizeof(K));
      else
        to_ordered_bits<K>(static_cast<const K*>(arrays.src_keys), keys, arrays.n,
                           layout.keys());
      if constexpr (!keys_alone) parallel_copy(values, arrays.src_values, arrays.n * sizeof(V));
    }
    // Between the passes, while the input is still as it was: the sort itself cannot stop part
    // way (its first and last passes map the keys to and from ordered bits in place).
    ctx.check();
    const bool ordered = identity || !arrays.in_place();
    if (keys_alone && small_radix_scratch_bytes<K>(arrays.n) != 0) {
      // Small jobs, in cache: the maps' passes cost little there.
      if (!ordered) to_ordered_bits<K>(keys, keys, arrays.n, layout.keys());
      small_radix_sort<K>(keys, arrays.n, scratch.data());
      if (!identity) from_ordered_bits<K>(keys, keys, arrays.n, layout.keys());
    } else {
      // The maps to and from ordered bits ride along with the sort's first and last passes.
      cpu_sort<K, V>(keys, values, arrays.n, scratch.data(), threads, layout.keys(), ordered);
    }
  });
  ctx.add_done(arrays.n);
  return execution_stats{.chunks = 1, .rounds = 1};
}

}  // namespace gpusort::detail
