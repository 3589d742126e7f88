// What several of gpusort's commands share: their option values, the arrays in raw and .npy
// files, the configuration, the daemon's socket, and how they print. Each command lives in its
// own file beside this one (gen.cpp, sort.cpp, verify.cpp, status.cpp, recover.cpp, plan.cpp) with the
// helpers only it uses.
#pragma once

#include "client/args.hpp"
#include "client/files.hpp"
#include "client/npy.hpp"

#include <gpusort/client.hpp>
#include <gpusort/config.hpp>
#include <gpusort/types.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::cli {

// ---- the commands' tables (each in its command's file; find_command looks them up) ----------

const command_spec& gen_spec();
const command_spec& sort_spec();
const command_spec& verify_spec();
const command_spec& status_spec();
const command_spec& recover_spec();
const command_spec& plan_spec();

// ---- arguments -------------------------------------------------------------------------------

/// The command's arguments, parsed; nullopt when they asked for help, which is then printed.
std::optional<parsed_args> parse_or_help(const std::vector<std::string>& args,
                                         const command_spec& spec);

/// The one file a command takes; `missing` says what the command needs when none is given.
const std::string& one_file(const parsed_args& a, std::string_view command,
                            std::string_view missing);

/// --dtype, which must be given: an unknown name is a usage error.
dtype dtype_option(const parsed_args& a);

/// --count, which must be given: a count such as 1000, 10M or 1Gi, else a usage error.
std::uint64_t count_option(const parsed_args& a);

/// --dtype when given (an unknown name is a usage error at once); a .npy file may say it instead.
std::optional<dtype> optional_dtype_option(const parsed_args& a);

/// --value-bytes when given; a .npy values file says it, else the default is 8.
std::optional<std::uint32_t> optional_value_bytes_option(const parsed_args& a);

/// --float-order when given; otherwise the input decides (numpy for .npy files, else total).
std::optional<float_order> float_order_option(const parsed_args& a);

// ---- raw and .npy arrays ---------------------------------------------------------------------

/// How many elements `bytes` of `shown` hold; exit 65 when they are not a whole number.
std::uint64_t whole_elements(std::string_view shown, std::uint64_t bytes,
                             std::uint64_t element_bytes, std::string_view what);

/// Where an array lies in a file or a stream: all of it (a raw file), or the data after a .npy
/// file's header, which outputs keep byte for byte.
struct array_layout {
  std::string header;             ///< the .npy header as read; empty for a raw file
  std::optional<npy_header> npy;  ///< the header parsed
  std::uint64_t bytes{};          ///< of data, after the header
  [[nodiscard]] std::uint64_t offset() const noexcept { return header.size(); }
};

/// The layout of `size` bytes named `shown`, whose first bytes `prefix(k)` returns (fewer when
/// there are fewer). A file named *.npy must be one: sorting a header as keys is what this
/// check exists to prevent.
array_layout layout_of(const std::string& shown, std::uint64_t size,
                       const std::function<std::string(std::uint64_t)>& prefix);

/// The layout of an open file, its header read with pread (the file is never mapped here).
array_layout layout_of(const input_file& file);

/// The layout of bytes in memory (a mapped file, a stream read to its end).
array_layout layout_of(const std::string& shown, const void* data, std::uint64_t size);

/// The keys a .npy header describes: their type, and whether they are big-endian (sorted in
/// memory, byte-swapped on the way in and out, as the Python client's sort_file does).
struct npy_keys {
  dtype type{};
  bool swapped{};
};

/// The keys of a .npy header; exit 65 naming what the file holds when it is none the engine
/// sorts.
npy_keys npy_keys_of(const npy_header& h, const std::string& shown);

/// Reverses the bytes of each of `n` elements of `bytes` (4 or 8) at `data`: big-endian keys
/// to the host's order and back.
void swap_bytes(void* data, std::uint64_t n, std::uint64_t bytes);

/// The element count of a .npy array of `element_bytes` each, after checking that it is 1-D,
/// that its data starts at a whole element (an offset the engine and the protocol take) and
/// that the file holds exactly its data after the header. Exit 65 otherwise.
std::uint64_t npy_elements(const array_layout& l, std::uint64_t element_bytes,
                           const std::string& shown);

/// The type and count of keys, and whether they are big-endian (a .npy file's).
struct key_layout {
  dtype type{};
  std::uint64_t count{};
  bool swapped{};
};

/// Where an expected key type came from, for the message when a header disagrees: --dtype (a
/// usage error), or the file whose header said it (a data error).
struct expected_type {
  std::optional<dtype> type;
  std::string source{"--dtype"};  ///< "--dtype" or a file's name
};

/// The keys of a file or stream: from the .npy header (which must agree with `expected`), or for
/// a raw file from `expected` and the size.
key_layout keys_of(const array_layout& l, const expected_type& expected, const std::string& shown);

/// Bytes per value of a values file (4 or 8) holding `keys` values: from its .npy header, which
/// --value-bytes must agree with, or from --value-bytes (default 8) and its size.
std::uint32_t values_of(const array_layout& l, const std::optional<std::uint32_t>& option,
                        std::uint64_t keys, const std::string& shown,
                        const std::string& keys_shown);

/// The descr of values of `value_bytes` in a new .npy header: opaque unsigned integers.
std::string_view value_descr(std::uint32_t value_bytes);

// ---- the configuration and the daemon --------------------------------------------------------

/// The configuration: --config, else $GPUSORT_CONFIG, else the built-in defaults; exit 78 when
/// it cannot be loaded.
config load_cli_config(const parsed_args& a);

/// The daemon's socket: --socket, else $GPUSORT_SOCKET, else the configuration's `socket`.
std::string socket_option(const parsed_args& a);

/// The exit code of a daemon's status: what a script can act on.
exit_code exit_of(client::status_code code) noexcept;

/// `hint`: what the user can do instead when no daemon answers (sort has --local; status not).
client::connection connect_daemon(const std::string& socket, std::string_view hint);

// ---- output ----------------------------------------------------------------------------------

/// One JSON object on a line. nlohmann-json escapes every string and writes a number that is
/// not finite (a rate over zero seconds) as null, where a format string gave invalid JSON.
void print_json(std::FILE* to, const nlohmann::ordered_json& value);

/// "1 key", "2 keys".
std::string plural(std::uint64_t n, std::string_view word);

}  // namespace gpusort::cli
