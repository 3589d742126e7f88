// Sizes and counts as people write them: "8MiB", "40GiB", "10M", "1Gi".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpusort {

/// Bytes: a plain integer or one with a suffix B, KB/MB/GB/TB (10^3..) or KiB/MiB/GiB/TiB
/// (2^10..); K/M/G/T alone and Ki/Mi/Gi/Ti are accepted too. nullopt on malformed input or
/// overflow.
std::optional<std::uint64_t> parse_bytes(std::string_view text) noexcept;

/// Element counts: a plain integer or one with k/M/G/T (10^3..) or Ki/Mi/Gi/Ti (2^10..).
std::optional<std::uint64_t> parse_count(std::string_view text) noexcept;

/// "1.50 GiB" style, for logs and reports.
std::string format_bytes(std::uint64_t bytes);

}  // namespace gpusort
