// The `gpusort` command line: argument parsing, files and commands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::cli {

/// Exit codes (sysexits.h where one fits).
enum exit_code : int {
  exit_ok = 0,
  exit_verify_failed = 1,
  exit_usage = 64,
  exit_runtime = 70,
  exit_config = 78,
};

/// An error that ends the command with `code` and one line on stderr.
struct cli_error : std::runtime_error {
  cli_error(exit_code c, const std::string& what) : std::runtime_error{what}, code{c} {}
  exit_code code;
};

/// One option of a command: `--name VALUE`, or a flag without value.
struct option_spec {
  std::string_view name;
  bool takes_value;
  std::string_view help;
};

/// Parsed arguments: positionals and options by name (flags map to "").
struct parsed_args {
  std::vector<std::string> positionals;
  std::map<std::string, std::string, std::less<>> options;
  [[nodiscard]] bool has(std::string_view name) const { return options.contains(name); }
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const;
  [[nodiscard]] std::string require(std::string_view name) const;
};

/// Parses argv against `specs`; unknown options, missing values and repeats are usage errors.
parsed_args parse_args(const std::vector<std::string>& args, const std::vector<option_spec>& specs);

/// Usage text of a command from its specs.
std::string usage_text(std::string_view synopsis, const std::vector<option_spec>& specs);

/// A file mapped read-only (an empty file maps to nothing).
class mapped_input {
 public:
  explicit mapped_input(const std::string& path);
  ~mapped_input();
  mapped_input(const mapped_input&) = delete;
  mapped_input& operator=(const mapped_input&) = delete;
  [[nodiscard]] const void* data() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

 private:
  void* data_{};
  std::uint64_t size_{};
};

/// An output written to a temporary file beside its final path and renamed over it only by
/// commit(), so that a failure never leaves a partly written output.
class atomic_output {
 public:
  atomic_output(const std::string& path, std::uint64_t size);
  ~atomic_output();
  atomic_output(const atomic_output&) = delete;
  atomic_output& operator=(const atomic_output&) = delete;
  [[nodiscard]] void* data() const noexcept { return data_; }
  void commit();

 private:
  std::string path_;
  std::string temp_;
  int fd_{-1};
  void* data_{};
  std::uint64_t size_{};
  bool committed_{};
};

int run_gen(const std::vector<std::string>& args);
int run_sort(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);

}  // namespace gpusort::cli
