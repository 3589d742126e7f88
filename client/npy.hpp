// NumPy's .npy format (numpy/lib/format.py, versions 1.0, 2.0 and 3.0): the header the command
// line reads, keeps and writes, so that it sorts a .npy file's data and never its header.
//
// A file is: the magic "\x93NUMPY", the version (two bytes), the header's length (2 bytes
// little-endian in 1.0, 4 in 2.0 and 3.0), then the header, a Python dict literal
// {'descr': '<f8', 'fortran_order': False, 'shape': (1000,), } padded with spaces and ending
// with '\n', then the data, C order. NumPy pads the whole prefix to a multiple of 64 bytes (16
// before 1.14), so the data's offset is a multiple of every element size.
#pragma once

#include <gpusort/types.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::cli {

inline constexpr std::string_view npy_magic{"\x93NUMPY", 6};

/// The largest header the command line reads; NumPy itself refuses headers over 10000 bytes by
/// default (max_header_size), so anything near this is no array NumPy wrote.
inline constexpr std::uint64_t npy_max_header_bytes = std::uint64_t{1} << 20;

/// A header that is not a .npy header (bad version, length or dict); what() says what is wrong.
struct npy_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A field of a structured descr ("[('a', '<u8'), ('', '|V4')]"): its name, its descr, and
/// where it lies in the record (fields follow one another: np.save writes padding as fields
/// named ''); `nested`: a subarray or a structure within, which only its bytes describe.
struct npy_field {
  std::string name;
  std::string descr;
  std::uint64_t offset{};
  std::uint64_t bytes{};
  bool nested{};
};

/// A parsed header.
struct npy_header {
  int major{1};
  int minor{0};
  std::uint64_t data_offset{};  ///< bytes of magic, version, length and dict: where data starts
  std::string descr;            ///< as written, e.g. "<f8"; a structured descr is its literal
  bool structured{};            ///< descr was a list of fields, not a string
  bool fortran_order{};
  std::vector<std::uint64_t> shape;
  /// A structured descr's fields in order; their bytes add up to a record's. A field whose size
  /// the descr does not say (an object, a nested structure) is an npy_error when the header is
  /// parsed only if the record's size is asked for (record_bytes()).
  std::vector<npy_field> fields;
  /// The bytes of a record of a structured descr: the sum of its fields'; 0 for a plain descr.
  [[nodiscard]] std::uint64_t record_bytes() const noexcept;

  /// Elements in the array (the product of the shape; 1 for a 0-d array); nullopt on overflow.
  [[nodiscard]] std::optional<std::uint64_t> elements() const noexcept;
  /// The shape as Python writes it: "(1000,)", "(3, 4)", "()".
  [[nodiscard]] std::string shape_text() const;
};

/// Whether `prefix` (a file's first bytes) starts with the .npy magic.
[[nodiscard]] bool has_npy_magic(std::string_view prefix) noexcept;

/// Whether a path names a .npy file by its extension (".npy", any case).
[[nodiscard]] bool has_npy_name(std::string_view path) noexcept;

/// The length of the prefix (magic, version, length field) and of the whole header, read from
/// the first 12 bytes (or fewer, when the file is shorter: npy_error). Throws npy_error for a
/// version other than 1.0, 2.0, 3.0 or a header over npy_max_header_bytes.
[[nodiscard]] std::uint64_t npy_header_bytes(std::string_view first_bytes);

/// Parses a whole header (`bytes` holds at least npy_header_bytes() bytes); throws npy_error.
[[nodiscard]] npy_header parse_npy_header(std::string_view bytes);

/// The key type a descr names, when it is one the engine sorts ('<u4' '<i4' '<u8' '<i8' '<f4'
/// '<f8', also with '=' or, for none of these, '|'); nullopt otherwise (big-endian included).
[[nodiscard]] std::optional<dtype> npy_key_type(std::string_view descr) noexcept;

/// The element size of a descr that can travel as a value (an opaque 4- or 8-byte payload:
/// integers, floats, complex64, datetime64 and timedelta64 in either byte order); nullopt
/// otherwise (objects, strings, structured, 1, 2 and 16 bytes).
[[nodiscard]] std::optional<std::uint32_t> npy_value_bytes(std::string_view descr) noexcept;

/// The descr NumPy writes for a key type: "<u4", "<f8", ...
[[nodiscard]] std::string_view npy_descr_of(dtype t) noexcept;

/// A header as np.save writes it for a 1-D C-order array of `count` elements of `descr`:
/// version 1.0 (2.0 when the dict would not fit 1.0's 16-bit length), the dict with room for
/// the shape to grow, padded with spaces to a multiple of 64 bytes, ending with '\n'.
[[nodiscard]] std::string make_npy_header(std::string_view descr, std::uint64_t count);

}  // namespace gpusort::cli
