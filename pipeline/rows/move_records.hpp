// Moving whole records by a permutation on the host's cores: into another array (a gather,
// bound by random reads) or in place (its cycles walked, many walks at a time on each core so
// that their random reads overlap).
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
/// by side, each thread several at a time; cycles that miss every breakpoint are rotated whole
/// by the walk that starts from their smallest row, and the rare long ones among them on one
/// thread. Takes about `saved_bytes` of records (at least one) plus a byte per record, and on
/// each thread up to 16 KiB of records (at least one) that it rotates.
template <typename Index>
void permute_records(unsigned char* records, std::uint64_t count, std::uint32_t record_bytes,
                     const Index* perm, std::uint64_t saved_bytes);

}  // namespace gpusort::detail
