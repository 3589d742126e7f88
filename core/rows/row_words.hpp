// A row's keys as one string of ordered bytes, read 64 bits at a time: the first key's ordered
// bits (core/keys.hpp) big-endian, then the second key's, and so on, the last word padded with
// zeros. Rows compare as these strings compare, so a sort of rows is a sort of words: the
// first word of every row, then the next word of the rows still tied (pipeline/rows/).
#pragma once

#include "core/keys.hpp"

#include <gpusort/rows.hpp>

#include <cstdint>
#include <vector>

namespace gpusort::detail {

class row_words {
 public:
  /// `floats` for float keys; NumPy's order is taken canonical (NaNs one code, -0.0 as +0.0),
  /// so that keys NumPy calls equal tie and the next key decides, as in np.lexsort.
  row_words(const row_keys& keys, float_order floats);

  /// Words of a row: ceil(bytes of all keys / 8).
  [[nodiscard]] std::uint32_t words() const noexcept { return words_; }
  [[nodiscard]] std::uint64_t key_bytes() const noexcept { return key_bytes_; }

  /// Word `w` (< words()) of row `row`.
  [[nodiscard]] std::uint64_t word(std::uint64_t row, std::uint32_t w) const noexcept
  {
    const segment* s = segments_.data() + first_segment_[w];
    const segment* end = segments_.data() + first_segment_[w + 1];
    if (end - s == 1 && s->whole_word) return whole(keys_[s->key], row, s->from);
    unsigned char out[8] = {};
    for (; s != end; ++s) put(keys_[s->key], row, s->from, s->length, out + s->to);
    return load_big_endian(out);
  }

  /// Word `w` of rows [first, first + count) into out, on every core for large counts.
  void words_of(std::uint64_t first, std::uint64_t count, std::uint32_t w,
                std::uint64_t* out) const;
  /// Word `w` of rows[0 .. count) into out, on every core for large counts.
  template <typename Index>
  void words_of_rows(const Index* rows, std::uint64_t count, std::uint32_t w,
                     std::uint64_t* out) const;

 private:
  struct key_code {
    const unsigned char* data{};
    std::uint64_t stride{};
    column_type type{};
    std::uint32_t bytes{};
    bool descending{};
    key_map<std::uint32_t> map32{};
    key_map<std::uint64_t> map64{};
  };
  /// Bytes [from, from + length) of a key's ordered string go to bytes [to, to + length) of a
  /// word; `whole_word`: the word is 8 bytes of one key that it can make at once (a 64-bit key,
  /// a half of a 128-bit one, 8 bytes of a string), without byte copies.
  struct segment {
    std::uint32_t key{};
    std::uint32_t from{};
    std::uint32_t length{};
    std::uint32_t to{};
    bool whole_word{};
  };

  static std::uint64_t load_big_endian(const unsigned char* p) noexcept;
  static std::uint64_t whole(const key_code& k, std::uint64_t row, std::uint32_t from) noexcept;
  static void put(const key_code& k, std::uint64_t row, std::uint32_t from, std::uint32_t length,
                  unsigned char* to) noexcept;

  std::vector<key_code> keys_;
  std::vector<segment> segments_;
  std::vector<std::uint32_t> first_segment_;  ///< word w's segments: [first[w], first[w + 1])
  std::uint64_t key_bytes_{};
  std::uint32_t words_{};
};

}  // namespace gpusort::detail
