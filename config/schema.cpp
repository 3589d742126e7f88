#include "config/schema.hpp"

#include <gpusort/units.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <climits>
#include <optional>
#include <utility>
#include <unordered_set>

namespace gpusort::detail {
namespace {

[[noreturn]] void reject(const YAML::Node& node, const YAML::Mark& mark,
                         std::string_view expected)
{
  throw value_error{mark, "expected " + std::string{expected} + ", got " + describe(node)};
}

const std::string& scalar(const YAML::Node& node, const YAML::Mark& mark,
                          std::string_view expected)
{
  if (!node.IsScalar()) reject(node, mark, expected);
  return node.Scalar();
}

/// Decimal digits only: no sign, no hex or octal, no exponent, no blanks.
std::optional<std::uint64_t> parse_decimal(std::string_view s)
{
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::uint64_t read_size(const YAML::Node& value, const YAML::Mark& mark, std::uint64_t minimum,
                        std::string_view expected)
{
  const std::string& text = scalar(value, mark, expected);
  const auto bytes = parse_bytes(text);
  if (!bytes) reject(value, mark, expected);
  if (*bytes < minimum) {
    throw value_error{mark, "must be at least " + exact_size(minimum) + " (" +
                                std::to_string(minimum) + " bytes), got '" + text + "' (" +
                                std::to_string(*bytes) + " bytes)"};
  }
  return *bytes;
}

std::string at_least(std::uint64_t minimum)
{
  return minimum == 0 ? std::string{} : ", at least " + exact_size(minimum);
}

key_spec optional_size_key(std::string_view name, std::optional<std::uint64_t> config::*member,
                           std::uint64_t minimum, std::string_view meaning)
{
  return {
      name,
      "`auto` or a size (8MiB, 40GiB, 1.5GiB, 65536)" + at_least(minimum),
      meaning,
      [member, minimum](const YAML::Node& value, const YAML::Mark& mark, config& cfg) {
        constexpr std::string_view expected = "'auto' or a size like 8MiB";
        if (scalar(value, mark, expected) == "auto") {
          cfg.*member = std::nullopt;
        } else {
          cfg.*member = read_size(value, mark, minimum, expected);
        }
      },
      [member](const config& cfg) {
        const auto& v = cfg.*member;
        return v ? exact_size(*v) : std::string{"auto"};
      },
  };
}

key_spec integer_key(std::string_view name, unsigned config::*member, unsigned minimum,
                     unsigned maximum, std::string_view meaning)
{
  const std::string range =
      "an integer from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  return {
      name,
      range,
      meaning,
      [member, minimum, maximum, range](const YAML::Node& value, const YAML::Mark& mark,
                                        config& cfg) {
        const auto v = parse_decimal(scalar(value, mark, range));
        if (!v || *v < minimum || *v > maximum) reject(value, mark, range);
        cfg.*member = static_cast<unsigned>(*v);
      },
      [member](const config& cfg) { return std::to_string(cfg.*member); },
  };
}

/// Whether `text` is UTF-8. YAML's emitter writes each byte of anything else as U+FFFD, so a
/// path of other bytes was accepted and then printed (--check-config, to_yaml) as a longer,
/// different path (found by fuzz/config_loader). Control characters are fine: the emitter
/// escapes them and they read back the same.
bool valid_utf8(std::string_view text)
{
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t extra = 0;  // continuation bytes of this character
    if (b >= 0x80) {
      if ((b & 0xE0) == 0xC0) {
        extra = 1;
      } else if ((b & 0xF0) == 0xE0) {
        extra = 2;
      } else if ((b & 0xF8) == 0xF0) {
        extra = 3;
      } else {
        return false;  // a continuation byte first, or no UTF-8 lead byte at all
      }
    }
    if (b == 0xC0 || b == 0xC1 || b > 0xF4 || i + extra >= text.size() + (extra == 0 ? 1 : 0))
      return false;
    std::uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};  // shorter forms are not UTF-8
    if (cp < least[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

key_spec path_key(std::string_view name, std::string config::*member, std::size_t max_bytes,
                  std::string_view meaning)
{
  return {
      name,
      "a non-empty path of at most " + std::to_string(max_bytes) + " bytes",
      meaning,
      [member, max_bytes](const YAML::Node& value, const YAML::Mark& mark, config& cfg) {
        const std::string& path = scalar(value, mark, "a path");
        if (path.empty()) throw value_error{mark, "expected a path, got an empty string"};
        if (path.find('\0') != std::string::npos)
          throw value_error{mark, "a path cannot contain a NUL character"};
        if (!valid_utf8(path)) throw value_error{mark, "a path must be UTF-8 text"};
        if (path.size() > max_bytes) {
          throw value_error{mark, "the path is " + std::to_string(path.size()) +
                                      " bytes long, at most " + std::to_string(max_bytes) +
                                      " fit in a Unix socket address"};
        }
        cfg.*member = path;
      },
      [member](const config& cfg) {
        // The emitter quotes a path where plain YAML would misread it, but writes a carriage
        // return as it is, which the reader takes for the line's end (the fuzzer's
        // "p/NULLl:&*a\r"): control characters are written escaped, in double quotes.
        const std::string& path = cfg.*member;
        const bool control = std::any_of(path.begin(), path.end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20 || c == '\x7f';
        });
        YAML::Emitter out;
        if (control) out << YAML::DoubleQuoted;
        out << path;
        return std::string{out.c_str()};
      },
  };
}

/// A key that takes one of a fixed set of words, each naming one value of the enum E.
template <typename E, std::size_t N>
key_spec enum_key(std::string_view name, E config::*member,
                  const std::array<std::pair<E, std::string_view>, N>& words,
                  std::string_view meaning)
{
  std::string names;
  std::string markdown;
  for (const auto& [value, word] : words) {
    names += (names.empty() ? "" : ", ") + std::string{word};
    markdown += (markdown.empty() ? "one of `" : ", `") + std::string{word} + "`";
  }
  return {
      name,
      markdown,
      meaning,
      [member, words, expected = "one of " + names](const YAML::Node& value,
                                                    const YAML::Mark& mark, config& cfg) {
        const std::string& text = scalar(value, mark, expected);
        const auto found = std::find_if(words.begin(), words.end(),
                                        [&](const auto& w) { return w.second == text; });
        if (found == words.end()) reject(value, mark, expected);
        cfg.*member = found->first;
      },
      [member, words](const config& cfg) {
        const auto found = std::find_if(words.begin(), words.end(),
                                        [&](const auto& w) { return w.first == cfg.*member; });
        return std::string{found->second};
      },
  };
}

key_spec log_level_key(std::string_view name, log_level config::*member,
                       std::string_view meaning)
{
  static constexpr std::array levels{log_level::trace, log_level::debug, log_level::info,
                                     log_level::warn,  log_level::error, log_level::off};
  std::array<std::pair<log_level, std::string_view>, levels.size()> words{};
  for (std::size_t i = 0; i < levels.size(); ++i) words[i] = {levels[i], name_of(levels[i])};
  return enum_key(name, member, words, meaning);
}

key_spec incore_engine_key(std::string_view meaning)
{
  static constexpr std::array<std::pair<incore_engine, std::string_view>, 3> words{{
      {incore_engine::automatic, "auto"},
      {incore_engine::radix, "radix"},
      {incore_engine::sample, "sample"},
  }};
  return enum_key("incore_engine", &config::incore, words, meaning);
}

key_spec compress_runs_key(std::string_view meaning)
{
  static constexpr std::array<std::pair<run_compression, std::string_view>, 3> words{{
      {run_compression::automatic, "auto"},
      {run_compression::on, "on"},
      {run_compression::off, "off"},
  }};
  return enum_key("compress_runs", &config::compress_runs, words, meaning);
}

key_spec round1_buffer_key(std::string_view meaning)
{
  static constexpr std::array<std::pair<round1_memory, std::string_view>, 4> words{{
      {round1_memory::automatic, "auto"},
      {round1_memory::pinned, "pinned"},
      {round1_memory::pageable, "pageable"},
      {round1_memory::by_job, "by-job"},
  }};
  return enum_key("round1_buffer", &config::round1_buffer, words, meaning);
}

key_spec admission_key(std::string_view meaning)
{
  static constexpr std::array<std::pair<admission_policy, std::string_view>, 2> words{{
      {admission_policy::wait, "wait"},
      {admission_policy::reject, "reject"},
  }};
  return enum_key("admission", &config::admission, words, meaning);
}

key_spec shutdown_key(std::string_view meaning)
{
  static constexpr std::array<std::pair<shutdown_policy, std::string_view>, 2> words{{
      {shutdown_policy::drain, "drain"},
      {shutdown_policy::cancel, "cancel"},
  }};
  return enum_key("shutdown", &config::on_shutdown, words, meaning);
}

/// A list of distinct user or group ids, e.g. [1000, 1001]; empty allowed.
key_spec id_list_key(std::string_view name, std::vector<std::uint32_t> config::*member,
                     std::string_view what, std::string_view meaning)
{
  // (uid_t)-1 means "no id" to chown and setreuid: it cannot be a peer's id.
  constexpr std::uint64_t max_id = 4294967294u;
  return {
      name,
      "a list of distinct " + std::string{what} + " ids from 0 to " + std::to_string(max_id) +
          ", such as `[1000, 1001]`, or `[]`",
      meaning,
      [member, what, name](const YAML::Node& value, const YAML::Mark& mark, config& cfg) {
        const std::string expected = "a list of " + std::string{what} + " ids like [1000]";
        if (!value.IsSequence()) reject(value, mark, expected);
        const std::string id_expected =
            "a " + std::string{what} + " id (an integer from 0 to " + std::to_string(max_id) +
            ")";
        std::vector<std::uint32_t> ids;
        for (const YAML::Node& element : value) {
          const YAML::Mark element_mark = mark_of(element, mark);
          const auto id = parse_decimal(scalar(element, element_mark, id_expected));
          if (!id || *id > max_id) reject(element, element_mark, id_expected);
          if (std::find(ids.begin(), ids.end(), static_cast<std::uint32_t>(*id)) != ids.end())
            throw value_error{element_mark, std::string{what} + " id " + std::to_string(*id) +
                                                " is listed twice in " + std::string{name}};
          ids.push_back(static_cast<std::uint32_t>(*id));
        }
        cfg.*member = std::move(ids);
      },
      [member](const config& cfg) {
        std::string list = "[";
        for (const std::uint32_t id : cfg.*member)
          list += (list.size() == 1 ? "" : ", ") + std::to_string(id);
        return list + "]";
      },
  };
}

key_spec devices_key(std::string_view meaning)
{
  return {
      "devices",
      "`auto`, `cpu` or a list of distinct GPU ids such as `[0, 1]`",
      meaning,
      [](const YAML::Node& value, const YAML::Mark& mark, config& cfg) {
        constexpr std::string_view expected = "'auto', 'cpu' or a list of GPU ids like [0, 1]";
        if (value.IsScalar() && value.Scalar() == "auto") {
          cfg.devices = device_selection::automatic;
          cfg.gpu_ids.clear();
          return;
        }
        if (value.IsScalar() && value.Scalar() == "cpu") {
          cfg.devices = device_selection::cpu;
          cfg.gpu_ids.clear();
          return;
        }
        if (!value.IsSequence()) reject(value, mark, expected);
        if (value.size() == 0) {
          throw value_error{mark, "the list of GPU ids is empty (write 'cpu' for the host "
                                  "device or 'auto' for every GPU)"};
        }
        const std::string id_expected =
            "a GPU id (an integer from 0 to " + std::to_string(INT_MAX) + ")";
        std::vector<int> ids;
        for (const YAML::Node& element : value) {
          const YAML::Mark element_mark = mark_of(element, mark);
          const auto id = parse_decimal(scalar(element, element_mark, id_expected));
          if (!id || *id > static_cast<std::uint64_t>(INT_MAX))
            reject(element, element_mark, id_expected);
          if (std::find(ids.begin(), ids.end(), static_cast<int>(*id)) != ids.end()) {
            throw value_error{element_mark,
                              "GPU id " + std::to_string(*id) + " is listed twice"};
          }
          ids.push_back(static_cast<int>(*id));
        }
        cfg.devices = device_selection::listed;
        cfg.gpu_ids = std::move(ids);
      },
      [](const config& cfg) -> std::string {
        switch (cfg.devices) {
          case device_selection::automatic: return "auto";
          case device_selection::cpu: return "cpu";
          case device_selection::listed: break;
        }
        std::string list = "[";
        for (const int id : cfg.gpu_ids)
          list += (list.size() == 1 ? "" : ", ") + std::to_string(id);
        return list + "]";
      },
  };
}

std::string lower(std::string_view s)
{
  std::string out{s};
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string describe(const YAML::Node& node)
{
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      constexpr std::size_t shown = 60;  // a pasted blob should not flood the message
      const std::string& s = node.Scalar();
      return "'" + (s.size() <= shown ? s : s.substr(0, shown) + "...") + "'";
    }
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing";
  }
}

YAML::Mark mark_of(const YAML::Node& node, const YAML::Mark& fallback)
{
  // An empty value's own mark is wherever the next token starts, often the next line.
  return node.IsNull() || node.Mark().is_null() ? fallback : node.Mark();
}

const std::vector<key_spec>& config_keys()
{
  // sockaddr_un::sun_path holds 108 bytes including the terminating NUL.
  constexpr std::size_t max_socket_path = 107;
  static const std::vector<key_spec> keys{
      devices_key("Which devices sort: `auto` every GPU found (the host CPU when there is "
                  "none), `cpu` the host CPU only, a list exactly those CUDA device ids."),
      optional_size_key("device_memory_budget", &config::device_memory_budget, 64 * 1024,
                        "Memory one device may use for a job. `auto`: on a GPU its free "
                        "memory less a margin; on the CPU no limit (the job sorts in place)."),
      optional_size_key("chunk_bytes", &config::chunk_bytes, 4 * 1024,
                        "Bytes of keys (and values) per round-1 chunk. `auto`: the planner "
                        "derives it from the device memory budget."),
      optional_size_key("pinned_pool_bytes", &config::pinned_pool_bytes, 0,
                        "Page-locked host memory of the daemon's shared buffers together "
                        "(handed out and kept for reuse). `auto`: half of the physical memory."),
      integer_key("host_threads", &config::host_threads, 0, 4096,
                  "Threads for work on the host CPU; 0: one per core."),
      path_key("socket", &config::socket, max_socket_path,
               "Path of the daemon's Unix domain socket."),
      id_list_key("allowed_uids", &config::allowed_uids, "user",
                  "Users whose programs may use the daemon (checked with SO_PEERCRED), besides "
                  "those of `allowed_gids`. Both lists empty: only the daemon's own user and "
                  "root."),
      id_list_key("allowed_gids", &config::allowed_gids, "group",
                  "Groups whose members may use the daemon: a peer whose primary or "
                  "supplementary group is listed. Both lists empty: only the daemon's own user "
                  "and root."),
      integer_key("max_connections", &config::max_connections, 1, 65536,
                  "Clients connected at once; a connection over the limit gets one "
                  "REJECTED_BUSY error and is closed."),
      integer_key("max_running_jobs", &config::max_running_jobs, 1, 1024,
                  "Jobs sorting at once on the CPU engine. With GPUs one job runs at a time, "
                  "whatever this says: each alone keeps the PCIe links busy."),
      integer_key("max_queued_jobs", &config::max_queued_jobs, 0, 65536,
                  "Jobs waiting to run; a job over the limit is refused with REJECTED_BUSY."),
      admission_key("A job that fits `host_memory_budget` but not beside the jobs running "
                    "now: `wait` queues it until memory frees up, `reject` refuses it with "
                    "REJECTED_BUSY. A job that cannot run within the whole budget, even on "
                    "the lean path, is always refused (TOO_LARGE)."),
      optional_size_key("host_memory_budget", &config::host_memory_budget, 1024 * 1024,
                        "Host memory that jobs may use beyond their arrays: in the daemon its "
                        "jobs' together (staging copies of files and the sort's working "
                        "memory), in the library and `gpusort sort --local` each job's. A job "
                        "whose fastest path needs more sorts in place on the lean path, within "
                        "it, or is refused naming what it needs. `auto`: half of the physical "
                        "memory."),
      shutdown_key("What SIGTERM does with jobs: `drain` lets running and queued jobs finish "
                   "(up to `shutdown_timeout`, then cancels the rest), `cancel` cancels them "
                   "at once."),
      integer_key("shutdown_timeout", &config::shutdown_timeout, 0, 86400,
                  "Seconds SIGTERM waits for jobs to finish before it cancels them."),
      incore_engine_key("How a GPU sorts one chunk in its memory: `radix` CUB's radix sort, "
                        "`sample` the GPU sample sort, `auto` the faster of the two for the key "
                        "type (from the benchmark), or the radix sort where its smaller scratch "
                        "gives an out-of-core job at most two thirds of the chunks."),
      compress_runs_key("Whether round 1 of an out-of-core job compresses its sorted keys "
                        "(issue 21): `on` encodes every chunk's runs, `auto` encodes them but "
                        "keeps a chunk raw where its stream would take more than 10% of the "
                        "keys' bytes (on the H100 host only runs of few distinct keys paid for "
                        "their decoding), `off` never. Values travel raw; jobs that fit one device "
                        "are unchanged; the CPU engine only pays the encoding (it has no PCIe "
                        "to save)."),
      round1_buffer_key("Where round 1 of an out-of-core job on GPUs leaves its sorted runs "
                        "(host memory of the job's size): `pinned` registers it with the GPUs "
                        "at the first such job and keeps it for the engine's life, so the copy "
                        "engines move the runs directly; `pageable` never registers it and stages "
                        "the runs through the pinned pieces, which saves a one-shot job the "
                        "registration and its undoing; `by-job` pins it for a job whose chunks "
                        "are smaller than 32 MiB (a small device budget, where staging each "
                        "chunk's runs costs more than the registration) and keeps it pageable "
                        "otherwise; `auto` is `pinned` in the daemon and the library, `by-job` "
                        "for `gpusort sort --local`."),
      log_level_key("log_level", &config::level, "Least severe messages that are logged."),
  };
  return keys;
}

const key_spec* find_key(std::string_view name) noexcept
{
  const auto& keys = config_keys();
  const auto it =
      std::find_if(keys.begin(), keys.end(), [&](const key_spec& k) { return k.name == name; });
  return it == keys.end() ? nullptr : &*it;
}

std::size_t edit_distance(std::string_view a, std::string_view b)
{
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string_view closest_key(std::string_view name)
{
  const std::string wanted = lower(name);
  std::string_view best;
  std::size_t best_distance = SIZE_MAX;
  for (const key_spec& k : config_keys()) {
    // About a third of the key's length (1 to 3 edits): a slip of the fingers gets a hint, an
    // unrelated word gets none.
    const std::size_t limit = std::clamp<std::size_t>(k.name.size() / 3, 1, 3);
    const std::size_t d = edit_distance(wanted, k.name);
    if (d <= limit && d < best_distance) {
      best = k.name;
      best_distance = d;
    }
  }
  return best;
}

std::string exact_size(std::uint64_t bytes)
{
  static constexpr std::array<std::string_view, 6> suffixes{"KiB", "MiB", "GiB",
                                                            "TiB", "PiB", "EiB"};
  if (bytes == 0) return "0";
  for (std::size_t k = suffixes.size(); k > 0; --k) {
    const unsigned shift = 10 * static_cast<unsigned>(k);
    if (bytes % (std::uint64_t{1} << shift) == 0)
      return std::to_string(bytes >> shift) + std::string{suffixes[k - 1]};
  }
  return std::to_string(bytes);
}

std::string config_reference_markdown()
{
  const config defaults{};
  std::string out = "| key | default | accepted values | meaning |\n| --- | --- | --- | --- |\n";
  for (const key_spec& k : config_keys()) {
    out += "| `" + std::string{k.name} + "` | `" + k.write(defaults) + "` | " + k.accepted +
           " | " + std::string{k.meaning} + " |\n";
  }
  return out;
}

}  // namespace gpusort::detail
