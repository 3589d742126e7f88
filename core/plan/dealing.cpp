#include "core/plan/dealing.hpp"

#include "core/checks.hpp"
#include "core/keys.hpp"

#include <gpusort/error.hpp>

namespace gpusort::detail {

std::vector<run> make_run_table(const chunk_plan& plan)
{
  const std::uint64_t d = plan.d;
  const std::uint64_t g = plan.runs_per_chunk();
  std::vector<run> table(d * g);
  for (std::uint64_t i = 0; i < d; ++i) {
    const std::uint64_t begin = plan.chunk_begin(i);
    const std::uint64_t m = plan.chunk_size(i);
    for (std::uint64_t j = 0; j < g; ++j)
      table[i * g + j] = run{begin + bin_offset(m, g, j), bin_size(m, g, j)};
  }
  return table;
}

std::vector<run> transpose(const std::vector<run>& table, std::uint64_t d, std::uint64_t g)
{
  GPUSORT_EXPECTS(table.size() == d * g, "a run table holds d*g runs");
  std::vector<run> out(table.size());
  for (std::uint64_t i = 0; i < d; ++i)
    for (std::uint64_t j = 0; j < g; ++j) out[j * d + i] = table[i * g + j];
  return out;
}

template <typename K, typename V>
void deal(const K* in_keys, const V* in_values, std::uint64_t m, std::uint64_t d, K* out_keys,
          V* out_values)
{
  GPUSORT_EXPECTS(d > 0, "dealing needs at least one bin");
  const auto bins = static_cast<std::int64_t>(d);
  // One bin per iteration: writes stream, reads stride by d through a chunk that the sort just
  // left in cache-sized pieces.
#pragma omp parallel for schedule(static)
  for (std::int64_t jj = 0; jj < bins; ++jj) {
    const auto j = static_cast<std::uint64_t>(jj);
    const std::uint64_t off = bin_offset(m, d, j);
    const std::uint64_t len = bin_size(m, d, j);
    for (std::uint64_t t = 0; t < len; ++t) out_keys[off + t] = in_keys[j + t * d];
    if constexpr (!std::is_same_v<V, no_value>) {
      if (in_values != nullptr)
        for (std::uint64_t t = 0; t < len; ++t) out_values[off + t] = in_values[j + t * d];
    }
  }
}

#define GPUSORT_INSTANTIATE_DEAL(K, V) \
  template void deal<K, V>(const K*, const V*, std::uint64_t, std::uint64_t, K*, V*);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_INSTANTIATE_DEAL)
#undef GPUSORT_INSTANTIATE_DEAL

}  // namespace gpusort::detail
