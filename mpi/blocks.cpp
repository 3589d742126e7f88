// The block space of the exchange and the merge (phases.hpp).
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <cstring>

namespace gpusort::detail::mpi {

block_space::block_space(char* keys, char* values, std::uint64_t capacity,
                         std::uint32_t key_bytes, std::uint32_t value_bytes, std::uint64_t block,
                         std::uint64_t extra_blocks)
    : keys_{keys},
      values_{values},
      key_bytes_{key_bytes},
      value_bytes_{value_bytes},
      block_{block},
      shard_blocks_{capacity / block},
      extra_{extra_blocks},
      extra_keys_{new std::byte[extra_blocks * block * key_bytes]},
      extra_values_{value_bytes > 0 ? new std::byte[extra_blocks * block * value_bytes] : nullptr}
{
  // Taken from the top first: the blocks of its own before the shard's, which free up later.
  is_free_.assign(blocks(), false);
  for (std::uint64_t id = shard_blocks_; id < blocks(); ++id) give(id);
}

char* block_space::keys(std::uint64_t id) const noexcept
{
  return id < shard_blocks_ ? keys_ + id * block_ * key_bytes_
                            : reinterpret_cast<char*>(extra_keys_.get()) +
                                  (id - shard_blocks_) * block_ * key_bytes_;
}

char* block_space::values(std::uint64_t id) const noexcept
{
  if (value_bytes_ == 0) return nullptr;
  return id < shard_blocks_ ? values_ + id * block_ * value_bytes_
                            : reinterpret_cast<char*>(extra_values_.get()) +
                                  (id - shard_blocks_) * block_ * value_bytes_;
}

std::uint64_t block_space::take()
{
  while (!free_.empty()) {
    const std::uint64_t id = free_.back();
    free_.pop_back();
    if (!is_free_[id]) continue;  // claimed after it was given
    is_free_[id] = false;
    --free_count_;
    return id;
  }
  throw logic_error{"mpi::sort: no free block (" + std::to_string(blocks()) + " blocks of " +
                    std::to_string(block_) + " elements)"};
}

void block_space::give(std::uint64_t id)
{
  is_free_[id] = true;
  ++free_count_;
  free_.push_back(id);
}

void block_space::claim(std::uint64_t id) noexcept
{
  if (!is_free_[id]) return;
  is_free_[id] = false;
  --free_count_;
}

std::uint64_t block_space::extra_bytes() const noexcept
{
  return extra_ * block_ * (key_bytes_ + value_bytes_);
}

void block_space::copy(std::uint64_t from, std::uint64_t to) const noexcept
{
  std::memcpy(keys(to), keys(from), block_ * key_bytes_);
  if (value_bytes_ > 0) std::memcpy(values(to), values(from), block_ * value_bytes_);
}

}  // namespace gpusort::detail::mpi
