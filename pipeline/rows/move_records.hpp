// Moving whole records by a permutation on the host's cores: into another array (a gather,
// bound by random reads) or in place (its cycles walked, bound by their latency).
#pragma once

#include <cstdint>

namespace gpusort::detail {

/// out[i] = records[perm[i]] for every i < count, `record_bytes` each.
template <typename Index>
void gather_records(const unsigned char* records, std::uint64_t count,
                    std::uint32_t record_bytes, const Index* perm, unsigned char* out);

/// records[i] = the records' old record perm[i] for every i, in place, perm a permutation of
/// [0, count). Cycles are cut at breakpoints (one in each window of rows, at a place a hash
/// chooses) whose records are saved first, so that threads walk the pieces between them side
/// by side; cycles that miss every breakpoint are rotated whole by the thread that owns their
/// smallest row. Takes about `saved_bytes` of records (at least one) plus a bit per record.
template <typename Index>
void permute_records(unsigned char* records, std::uint64_t count, std::uint32_t record_bytes,
                     const Index* perm, std::uint64_t saved_bytes);

}  // namespace gpusort::detail
