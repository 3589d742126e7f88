// What a lean job must not lose (issue 39): where every element is while the rounds and the
// permutation move them through the room. For a job on memory the journal is host memory (an
// error restores the array from it before the job fails); for a file sorted in place it is a
// file beside it, mapped shared, with the room inside, so that after a kill -9 at any moment
// `restore` puts every element back into the file (a permutation of the input) from it.
//
// Every step writes its data first and then, with a release store, the journal entry that
// makes the data count; nothing overwrites a position the journal still counts as live. So at
// any moment each element is live in exactly one place the journal names (live_ranges).
#pragma once

#include "core/plan/dealing.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/lean/plan.hpp"
#include "pipeline/lean/space.hpp"

#include <gpusort/gpusort.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpusort::detail::lean {

/// A file's identity and the range of it a journal covers.
struct file_identity {
  std::uint64_t dev{};
  std::uint64_t ino{};
  std::uint64_t offset{};  ///< where the array starts in the file
};

enum class phase : std::uint32_t {
  none = 0,
  round1 = 1,      ///< chunks move from the array into the shifted space, sorted
  evacuating = 2,  ///< the mixed blocks are copied to the storage (nothing is overwritten)
  permuting = 3,   ///< whole blocks move to their buckets' places
  cleaning = 4,    ///< the storage's fragments fill the rest of each bucket's place
  round2 = 5,      ///< buckets move into the array, sorted
  finished = 6,    ///< the array is sorted
  restored = 7,    ///< the array holds the input's elements again, in another order
  gathering = 8,   ///< round 2 reads each bucket where round 1 left it (gather.hpp): round 1's
                   ///< blocks move out of each bucket's place before it is written
};

/// A mover's move in flight: `from` to `to`, block indices. Once copied (state 2) the move
/// counts even where the map does not show it yet.
struct move_slot {
  std::uint64_t from{};
  std::uint64_t to{};
  std::uint32_t state{};  ///< 0 idle, 1 copying, 2 copied (the map not yet updated)
  std::uint32_t pad{};
};

/// Where a bucket is: `size` elements, which round 2 reads at x = `source` and writes at the
/// array's `out` (x = room + out).
struct bucket_place {
  std::uint64_t out{};
  std::uint64_t size{};
  std::uint64_t source{};
};

/// Where a memory journal's room keeps its values: after its p.room keys, from a 256-byte
/// boundary (as the round-1 buffer does).
constexpr std::uint64_t room_values_offset(const plan& p, std::uint32_t key_bytes) noexcept
{
  return (p.room * key_bytes + 255) / 256 * 256;
}

/// Bytes a caller's room buffer holds for `p` (journal's `room`): the keys, then the values.
constexpr std::uint64_t room_bytes(const plan& p, std::uint32_t key_bytes,
                                   std::uint32_t value_bytes) noexcept
{
  return room_values_offset(p, key_bytes) + p.room * value_bytes;
}

/// Calls f(o, from, length) for each part of `r` (an x range of round 1's output, [0, n)) that
/// lies in round 1's block o (of `block` elements), `from` elements into it.
template <typename F>
void for_each_block_run(run r, std::uint64_t block, F&& f)
{
  while (r.length > 0) {
    const std::uint64_t o = r.offset / block;
    const std::uint64_t from = r.offset % block;
    const std::uint64_t length = r.length < block - from ? r.length : block - from;
    f(o, from, length);
    r.offset += length;
    r.length -= length;
  }
}

class journal {
 public:
  /// In host memory, with the room in host memory too: in `room` where it holds the room's
  /// keys and values (a buffer the caller keeps from job to job), else in buffers of its own.
  journal(const plan& p, std::uint32_t key_bytes, std::uint32_t value_bytes,
          host_buffer* room = nullptr);
  /// In the file `fd` (writable, its contents replaced): sized for `p` and the room, its
  /// pages made (a full disk or tmpfs is an io_error now, not in the middle of the job), mapped
  /// shared. `keys` and `values` name the files it covers.
  journal(int fd, std::string name, const plan& p, std::uint32_t key_bytes,
          std::uint32_t value_bytes, file_identity keys, file_identity values);
  /// An existing journal file, for restore(): checks it and maps it.
  static journal open(int fd, std::string name);
  /// Whether the journal file `fd` was made but killed before its header was whole (no magic
  /// yet): no element had moved, and it may simply go.
  static bool untouched(int fd);
  ~journal();
  journal(journal&&) noexcept;
  journal& operator=(journal&&) noexcept;
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  /// The room: host memory, or windows of the journal file (file_array addresses).
  [[nodiscard]] char* room_keys() const noexcept;
  [[nodiscard]] char* room_values() const noexcept;
  [[nodiscard]] bool in_file() const noexcept;

  [[nodiscard]] phase current() const noexcept;
  void set_phase(phase p) noexcept;

  [[nodiscard]] std::uint64_t n() const noexcept;
  [[nodiscard]] std::uint64_t room() const noexcept;
  [[nodiscard]] std::uint32_t key_bytes() const noexcept;
  [[nodiscard]] std::uint32_t value_bytes() const noexcept;
  [[nodiscard]] file_identity keys_file() const noexcept;
  [[nodiscard]] file_identity values_file() const noexcept;
  [[nodiscard]] bool has_values_file() const noexcept;

  /// Round 1: chunk j is in its shifted place.
  void chunk_written(std::uint64_t j) noexcept;

  /// The permutation's geometry, once it chose its block (at most the plan's).
  void set_blocks(std::uint64_t block, std::uint64_t blocks) noexcept;
  [[nodiscard]] std::uint64_t block() const noexcept;
  [[nodiscard]] std::uint64_t blocks() const noexcept;
  /// Whether block p holds live elements (a whole block of one bucket) during the permutation;
  /// the storage is live apart (set_storage).
  [[nodiscard]] bool block_live(std::uint64_t p) const noexcept;
  void set_block_live(std::uint64_t p, bool live) noexcept;
  /// The storage: x range [begin, begin + used) holds the evacuated fragments.
  void set_storage(std::uint64_t begin, std::uint64_t used) noexcept;
  [[nodiscard]] std::uint64_t movers() const noexcept;
  [[nodiscard]] move_slot slot(std::uint64_t i) const noexcept;
  void set_slot(std::uint64_t i, move_slot s) noexcept;

  /// The buckets (at most plan::most_buckets), written before the permutation starts.
  void set_buckets(const std::vector<bucket_place>& buckets);
  [[nodiscard]] std::uint64_t buckets() const noexcept;
  [[nodiscard]] bucket_place bucket(std::uint64_t k) const noexcept;
  /// Round 2: bucket k is sorted in the array.
  void bucket_written(std::uint64_t k) noexcept;

  /// The gathering round 2 (gather.hpp): every bucket's pieces as round 1 left them (x ranges
  /// of [0, n), in chunk order), bucket k's at pieces[first[k], first[k + 1]); written once,
  /// after set_buckets and before the phase.
  void set_pieces(const std::vector<run>& pieces, const std::vector<std::uint64_t>& first);
  /// Round 1's blocks (x in [o * block, ...) of [0, n)) at the blocks of the space they lie
  /// in now: where(o) = o until set_where moves one. `start_gathering` sets them so and then
  /// the phase.
  void start_gathering() noexcept;
  [[nodiscard]] std::uint64_t where(std::uint64_t o) const noexcept;
  /// Block o now lies at block q (its elements copied there first).
  void set_where(std::uint64_t o, std::uint64_t q) noexcept;

  /// The x ranges that hold live elements now, sorted, adding up to n: where the journal
  /// says every element is. Throws io_error where they do not add up (a damaged journal).
  [[nodiscard]] std::vector<run> live_ranges() const;

 private:
  struct state;
  explicit journal(std::unique_ptr<state> s);
  std::unique_ptr<state> state_;
};

/// Puts every live element the journal names in the room into the array's free places, so
/// that the array holds the input's elements (as a permutation), and marks the journal
/// restored. Idempotent: a restore that is itself killed can run again. `s` is the space the
/// journal describes (its room, and the array the job sorted).
void restore(journal& j, const space& s);

}  // namespace gpusort::detail::lean
