// The configuration schema: one table of keys that drives parsing, defaults, to_yaml and the
// documentation (config_reference_markdown). Adding a key means adding a member to
// gpusort::config and one row to config_keys() in schema.cpp; nothing else names keys one by one.
#pragma once

#include <gpusort/config.hpp>

#include <yaml-cpp/mark.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace YAML {
class Node;
}

namespace gpusort::detail {

/// A value that a key rejects, with the position to blame. parse_config adds the source name
/// and the key and rethrows it as gpusort::config_error.
struct value_error : std::runtime_error {
  value_error(const YAML::Mark& where, const std::string& what)
      : std::runtime_error{what}, mark{where}
  {
  }
  YAML::Mark mark;
};

struct key_spec {
  std::string_view name;
  /// What may be written, e.g. "`auto` or a size, at least 64KiB" (Markdown).
  std::string accepted;
  /// What the key does, one or two sentences.
  std::string_view meaning;
  /// Validates `value` and stores it in `cfg`; throws value_error. `mark` is where the value
  /// is (the key's position when the value is empty).
  std::function<void(const YAML::Node& value, const YAML::Mark& mark, config& cfg)> read;
  /// The value of the key in `cfg` as YAML text that `read` accepts back.
  std::function<std::string(const config& cfg)> write;
};

/// How a rejected value shows in a message: "'lots'", "a list", "a map", "nothing".
std::string describe(const YAML::Node& node);

/// Where to point at `node`: its own position, or `fallback` (its key's) when it is empty.
YAML::Mark mark_of(const YAML::Node& node, const YAML::Mark& fallback);

/// Every key, in the order to_yaml writes them.
const std::vector<key_spec>& config_keys();

/// nullptr when `name` is not a key.
const key_spec* find_key(std::string_view name) noexcept;

/// The known key closest to `name` when it is close enough to be a likely typo, else empty.
std::string_view closest_key(std::string_view name);

/// Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
/// neighbours each cost 1 (a swapped pair of letters is the commonest typo).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// A byte count in its shortest exact spelling: "4GiB", "64KiB", "1000" (parse_bytes reads it).
std::string exact_size(std::uint64_t bytes);

/// The key table as a Markdown table (key, default, accepted values, meaning) for the README.
std::string config_reference_markdown();

}  // namespace gpusort::detail
