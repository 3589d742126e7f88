// The results format every benchmark writes, so that a program can read every report:
// bench/results/<machine>-<yyyymmdd>-<short commit>.json with "commit", "machine", "date", a list
// "targets" of {"name", "value", "unit", "baseline", "ratio", "target", "met"}, and raw
// measurements. Also the Markdown table of the targets that gpu-check.sh keeps.
#pragma once

#include <gpusort/types.hpp>

#include <cstddef>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

namespace gpusort::bench {

/// Where the time of a profiled sort went, one line per device, round and stage.
inline void print_profile(const gpusort::sort_report& r)
{
  for (const gpusort::stage_profile& p : r.profile) {
    const double span = p.last_end - p.first_start;
    std::printf("    round %d %-8s %-26.26s busy %7.3f s of span %7.3f s (%3.0f%%) [%6.3f, %6.3f]"
                " %6.1f GB/s busy\n",
                p.round, p.stage.c_str(), p.device.c_str(), p.busy_seconds, span,
                span > 0 ? 100.0 * p.busy_seconds / span : 0.0, p.first_start, p.last_end,
                p.busy_seconds > 0 ? static_cast<double>(p.bytes) / 1e9 / p.busy_seconds : 0.0);
  }
}

struct target {
  std::string name, unit, baseline;
  double value{}, ratio{}, goal{};
  bool higher_is_better{true};
  [[nodiscard]] bool met() const { return higher_is_better ? ratio >= goal : ratio <= goal; }
};

/// `s` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
inline std::string json_string(const std::string& s)
{
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// Prints the targets as a Markdown table (`value_heading` names the value column); returns how
/// many are met.
inline int print_targets(const std::vector<target>& targets, const char* value_heading = "value")
{
  std::printf("\n| target | %s | ratio | goal | met |\n| --- | ---: | ---: | ---: | --- |\n",
              value_heading);
  int met = 0;
  for (const target& t : targets) {
    std::printf("| %s | %.3f | %.3f | %s %.2f | %s |\n", t.name.c_str(), t.value, t.ratio,
                t.higher_is_better ? ">=" : "<=", t.goal, t.met() ? "yes" : "NO");
    met += t.met() ? 1 : 0;
  }
  return met;
}

/// Writes the results file. `fields`: further top-level members, each already JSON
/// ("\"device\": \"H100\""); `raw`: the members of the "raw" list, comma-separated JSON objects.
inline void write_results(const std::string& path, const std::string& commit,
                          const std::string& machine, const std::vector<target>& targets,
                          const std::string& raw, const std::vector<std::string>& fields = {})
{
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  std::ofstream out{path};
  out << "{\n  \"commit\": \"" << commit << "\",\n  \"machine\": \"" << machine
      << "\",\n  \"date\": \"" << date << "\",\n";
  for (const std::string& f : fields) out << "  " << f << ",\n";
  out << "  \"targets\": [\n";
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const target& t = targets[i];
    out << "    {\"name\": \"" << t.name << "\", \"value\": " << t.value << ", \"unit\": \""
        << t.unit << "\", \"baseline\": \"" << t.baseline << "\", \"ratio\": " << t.ratio
        << ", \"target\": " << t.goal << ", \"met\": " << (t.met() ? "true" : "false") << "}"
        << (i + 1 < targets.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"raw\": [" << raw << "]\n}\n";
}

}  // namespace gpusort::bench
