#include <gpusort/config.hpp>
#include <gpusort/error.hpp>

#include "config/schema.hpp"
#include "core/log.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>
#include <unordered_map>

namespace gpusort {
namespace {

/// A configuration is a screenful; anything much larger is the wrong file (or /dev/zero).
constexpr std::size_t max_config_bytes = std::size_t{1} << 20;

[[noreturn]] void fail(std::string_view source, const YAML::Mark& mark, const std::string& what)
{
  std::string where{source};
  if (!mark.is_null())
    where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
  throw config_error{where + ": " + what};
}

/// yaml-cpp stops at a NUL byte and would silently ignore everything after it.
void reject_nul(std::string_view yaml, std::string_view source)
{
  const std::size_t nul = yaml.find('\0');
  if (nul == std::string_view::npos) return;
  const std::string_view before = yaml.substr(0, nul);
  const std::size_t line_start = before.rfind('\n') == std::string_view::npos
                                     ? 0
                                     : before.rfind('\n') + 1;
  YAML::Mark mark;
  mark.pos = static_cast<int>(nul);
  mark.line = static_cast<int>(std::count(before.begin(), before.end(), '\n'));
  mark.column = static_cast<int>(nul - line_start);
  fail(source, mark, "the text contains a NUL byte");
}

/// Counts the documents of a YAML stream without building them, and notices a parser that
/// makes no progress: yaml-cpp 0.7 (Debian 12) answers a token it cannot place (a stray ',' at
/// the top level: jbeder/yaml-cpp#1040, found by fuzz/config_loader) with an empty document and
/// the same token again, forever, so YAML::LoadAll never returned and grew without bound.
class document_counter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override
  {
    stuck_ = documents_ > 0 && mark.pos == last_.pos;
    last_ = mark;
    ++documents_;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override
  {
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override
  {
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override
  {
  }
  void OnMapEnd() override {}

  [[nodiscard]] int documents() const noexcept { return documents_; }
  [[nodiscard]] bool stuck() const noexcept { return stuck_; }
  [[nodiscard]] const YAML::Mark& last() const noexcept { return last_; }

 private:
  int documents_{};
  bool stuck_{};
  YAML::Mark last_{YAML::Mark::null_mark()};
};

/// The one document of a configuration (null when the text has none) and, when there is one,
/// where a second document starts.
struct yaml_text {
  YAML::Node root;
  std::optional<YAML::Mark> second;
};

yaml_text load_documents(std::string_view yaml, std::string_view source)
{
  reject_nul(yaml, source);
  try {
    // Up to two documents (a configuration is one; a second is an error), each start further
    // on than the one before, then the first one built with YAML::Load, which parses a single
    // document and cannot loop.
    std::istringstream in{std::string{yaml}};
    YAML::Parser parser{in};
    document_counter counter;
    while (counter.documents() < 2 && parser.HandleNextDocument(counter)) {
      if (counter.stuck())
        fail(source, counter.last(), "invalid YAML: the parser cannot read on from here");
    }
    yaml_text out;
    if (counter.documents() > 1) out.second = counter.last();
    if (counter.documents() > 0) out.root = YAML::Load(std::string{yaml});
    return out;
  } catch (const YAML::Exception& e) {  // ParserException (syntax) and anything else yaml-cpp
    fail(source, e.mark, "invalid YAML: " + e.msg);
  }
}

std::string errno_text(int error) { return std::generic_category().message(error); }

/// "# text" lines of at most 100 columns.
std::string comment(std::string_view text)
{
  constexpr std::size_t width = 100;
  std::string out;
  std::string line = "#";
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const std::string_view word = text.substr(0, space);
    if (line.size() > 1 && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = "#";
    }
    line += " ";
    line += word;
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
  }
  return out + line + "\n";
}

}  // namespace

config parse_config(std::string_view yaml, std::string_view source)
{
  const yaml_text text = load_documents(yaml, source);
  config cfg;
  if (text.second) fail(source, *text.second, "expected one YAML document, found a second one");
  if (!text.root || text.root.IsNull()) return cfg;  // no settings: defaults

  const YAML::Node& root = text.root;
  if (!root.IsMap()) {
    fail(source, root.Mark(),
         "expected a map of settings (key: value) at the top level, got " +
             detail::describe(root));
  }
  // yaml-cpp keeps both entries of a duplicated key, so iterating finds them.
  std::unordered_map<std::string, int> first_line;
  for (const auto& entry : root) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    if (!key.IsScalar()) fail(source, key.Mark(), "expected a key name, got " +
                                                      detail::describe(key));
    const std::string& name = key.Scalar();
    if (name.empty()) fail(source, key.Mark(), "expected a key name, got an empty string");
    const int line = key.Mark().line + 1;
    if (const auto [it, fresh] = first_line.emplace(name, line); !fresh) {
      fail(source, key.Mark(),
           name + ": duplicate key: first at line " + std::to_string(it->second) +
               ", again at line " + std::to_string(line));
    }
    const detail::key_spec* spec = detail::find_key(name);
    if (spec == nullptr) {
      const std::string_view hint = detail::closest_key(name);
      fail(source, key.Mark(),
           name + ": unknown key" +
               (hint.empty() ? std::string{} : "; did you mean '" + std::string{hint} + "'?"));
    }
    try {
      spec->read(value, detail::mark_of(value, key.Mark()), cfg);
    } catch (const detail::value_error& e) {
      fail(source, e.mark, name + ": " + e.what());
    }
  }
  return cfg;
}

config load_config(const std::filesystem::path& path)
{
  const std::string name = path.string();
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{std::fopen(name.c_str(), "rb"),
                                                             &std::fclose};
  if (!file) throw config_error{name + ": cannot open: " + errno_text(errno)};
  std::string text;
  std::array<char, 16384> buffer{};
  for (;;) {
    errno = 0;
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    text.append(buffer.data(), n);
    if (text.size() > max_config_bytes) {
      throw config_error{name + ": larger than " + std::to_string(max_config_bytes) +
                         " bytes, not a configuration file"};
    }
    if (n < buffer.size()) {
      if (std::ferror(file.get())) throw config_error{name + ": cannot read: " +
                                                      errno_text(errno)};
      break;
    }
  }
  config cfg = parse_config(text, name);
  detail::log(log_level::debug, "configuration read from {}", name);
  return cfg;
}

std::string to_yaml(const config& cfg)
{
  std::string out = comment("gpusort configuration: every key with its value. parse_config "
                            "reads this back; deploy/gpusort.yaml explains the keys at length.");
  for (const detail::key_spec& k : detail::config_keys()) {
    out += "\n" + comment(k.meaning) + comment("Accepted: " + k.accepted + ".");
    out += std::string{k.name} + ": " + k.write(cfg) + "\n";
  }
  return out;
}

std::string_view name_of(log_level level) noexcept
{
  switch (level) {
    case log_level::trace: return "trace";
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warn";
    case log_level::error: return "error";
    case log_level::off: return "off";
  }
  return "unknown";
}

std::string_view name_of(admission_policy policy) noexcept
{
  return policy == admission_policy::reject ? "reject" : "wait";
}

std::string_view name_of(shutdown_policy policy) noexcept
{
  return policy == shutdown_policy::cancel ? "cancel" : "drain";
}

}  // namespace gpusort
