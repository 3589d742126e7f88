#include "client/npy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

namespace gpusort::cli {

namespace {

/// A value of the header's dict: what np.save writes (strings, True/False, integers, tuples)
/// and, for structured dtypes, lists of tuples, which are parsed only to be refused by name.
struct py_value {
  enum class kind : std::uint8_t { string, boolean, integer, sequence, none } type{};
  std::string text;  ///< the string; for a sequence, its literal as written
  bool boolean{};
  std::uint64_t integer{};
  bool negative{};
  std::vector<py_value> items;
};

/// A recursive-descent reader of the Python literals a .npy header holds.
class literal_reader {
 public:
  explicit literal_reader(std::string_view s) : s_{s} {}

  std::map<std::string, py_value> dict()
  {
    expect('{');
    std::map<std::string, py_value> out;
    for (;;) {
      skip_space();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const py_value key = value(0);
      if (key.type != py_value::kind::string) fail("a key that is not a string");
      expect(':');
      if (out.contains(key.text)) fail("the key '" + key.text + "' twice");
      out.emplace(key.text, value(0));
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
    skip_space();
    if (i_ != s_.size()) fail("text after the dict");
    return out;
  }

 private:
  py_value value(int depth)
  {
    if (depth > 16) fail("values nested too deep");
    skip_space();
    const char c = peek();
    if (c == '\'' || c == '"') return string(c);
    if (c == '(' || c == '[') return sequence(c == '(' ? ')' : ']', depth);
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c)) != 0) return integer();
    for (const auto& [word, v] : {std::pair{std::string_view{"True"}, true},
                                  std::pair{std::string_view{"False"}, false}}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        py_value out{.type = py_value::kind::boolean};
        out.boolean = v;
        return out;
      }
    }
    if (s_.substr(i_, 4) == "None") {
      i_ += 4;
      return py_value{.type = py_value::kind::none};
    }
    fail(i_ < s_.size() ? fmt::format("an unexpected '{}'", c) : "an unexpected end");
  }

  py_value string(char quote)
  {
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\') fail("an escape in a string");  // np.save writes none
      ++i_;
    }
    if (i_ >= s_.size()) fail("an unterminated string");
    py_value out{.type = py_value::kind::string};
    out.text = std::string{s_.substr(start, i_ - start)};
    ++i_;
    return out;
  }

  py_value integer()
  {
    py_value out{.type = py_value::kind::integer};
    if (peek() == '-') {
      out.negative = true;
      ++i_;
    }
    const std::size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])) != 0) {
      const auto digit = static_cast<std::uint64_t>(s_[i_] - '0');
      if (out.integer > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
        fail("an integer too large");
      out.integer = out.integer * 10 + digit;
      ++i_;
    }
    if (i_ == start) fail("a '-' without digits");
    if (peek() == 'L') ++i_;  // Python 2's long, in files written by old NumPy
    return out;
  }

  py_value sequence(char close, int depth)
  {
    const std::size_t start = i_++;
    py_value out{.type = py_value::kind::sequence};
    for (;;) {
      skip_space();
      if (peek() == close) {
        ++i_;
        break;
      }
      out.items.push_back(value(depth + 1));
      skip_space();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect(close);
      break;
    }
    out.text = std::string{s_.substr(start, i_ - start)};
    return out;
  }

  void skip_space()
  {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_])) != 0) ++i_;
  }
  [[nodiscard]] char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c)
  {
    skip_space();
    if (peek() != c)
      fail(i_ < s_.size() ? fmt::format("'{}' where '{}' belongs", s_[i_], c)
                          : fmt::format("an end where '{}' belongs", c));
    ++i_;
  }
  [[noreturn]] void fail(const std::string& what) const
  {
    throw npy_error{fmt::format("its header dict has {} (at character {})", what, i_)};
  }

  std::string_view s_;
  std::size_t i_{};
};

std::uint64_t little_endian(std::string_view bytes)
{
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;)
    v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

/// The descr's byte order and the rest ("<f8" -> '<', "f8"); '\0' when it has no order mark.
std::pair<char, std::string_view> split_order(std::string_view descr) noexcept
{
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=' ||
                         descr[0] == '|'))
    return {descr[0], descr.substr(1)};
  return {'\0', descr};
}

}  // namespace

std::optional<std::uint64_t> npy_header::elements() const noexcept
{
  std::uint64_t n = 1;
  for (const std::uint64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string npy_header::shape_text() const
{
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i)
    out += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

bool has_npy_magic(std::string_view prefix) noexcept { return prefix.starts_with(npy_magic); }

bool has_npy_name(std::string_view path) noexcept
{
  if (path.size() < 4) return false;
  std::string tail{path.substr(path.size() - 4)};
  std::transform(tail.begin(), tail.end(), tail.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return tail == ".npy";
}

std::uint64_t npy_header_bytes(std::string_view first)
{
  if (!has_npy_magic(first)) throw npy_error{"it does not start with the .npy magic"};
  if (first.size() < 10) throw npy_error{"it ends inside its .npy header"};
  const int major = static_cast<unsigned char>(first[6]);
  const int minor = static_cast<unsigned char>(first[7]);
  if ((major < 1 || major > 3) || minor != 0)
    throw npy_error{fmt::format(".npy version {}.{} is not one this gpusort reads (1.0, 2.0, "
                                "3.0)",
                                major, minor)};
  const std::size_t field = major == 1 ? 2 : 4;
  if (first.size() < 8 + field) throw npy_error{"it ends inside its .npy header"};
  const std::uint64_t dict = little_endian(first.substr(8, field));
  if (dict > npy_max_header_bytes)
    throw npy_error{fmt::format("its .npy header claims {} bytes (more than {} is no array "
                                "NumPy wrote)",
                                dict, npy_max_header_bytes)};
  return 8 + field + dict;
}

namespace {

/// The bytes of one element of a plain descr: '<u8' 8, '|S10' 10, '<U5' 20 (UCS-4), '<M8[ns]'
/// 8; nullopt for what has no size of its own ('|O' objects count 8, as NumPy stores them).
std::optional<std::uint64_t> descr_bytes(std::string_view d)
{
  if (d.size() < 2) return std::nullopt;
  const char kind = d[1];
  std::uint64_t n = 0;
  std::size_t i = 2;
  for (; i < d.size() && d[i] >= '0' && d[i] <= '9'; ++i)
    n = n * 10 + static_cast<unsigned>(d[i] - '0');
  if (i == 2) return std::nullopt;
  return kind == 'U' ? 4 * n : n;
}

/// The fields of a structured descr, laid end to end.
std::vector<npy_field> fields_of(const py_value& descr)
{
  std::vector<npy_field> fields;
  std::uint64_t offset = 0;
  for (const py_value& item : descr.items) {
    if (item.type != py_value::kind::sequence || item.items.size() < 2 ||
        item.items[0].type != py_value::kind::string)
      throw npy_error{"its .npy header's structured 'descr' holds something other than "
                      "(name, type) fields"};
    npy_field f;
    f.name = item.items[0].text;
    if (item.items[1].type == py_value::kind::string && item.items.size() == 2) {
      f.descr = item.items[1].text;
      const std::optional<std::uint64_t> b = descr_bytes(f.descr);
      if (!b) throw npy_error{"its .npy field '" + f.name + "' has type '" + f.descr +
                              "', whose size the header does not say"};
      f.bytes = *b;
    } else {
      // A subarray ('a', '<f8', (3,)) or a nested structure: its size is not needed unless
      // the records are sorted, and then it is refused by name.
      f.descr = item.text;
      f.nested = true;
    }
    f.offset = offset;
    offset += f.bytes;
    fields.push_back(std::move(f));
  }
  return fields;
}

}  // namespace

std::uint64_t npy_header::record_bytes() const noexcept
{
  std::uint64_t bytes = 0;
  for (const npy_field& f : fields) bytes += f.bytes;
  return bytes;
}

npy_header parse_npy_header(std::string_view bytes)
{
  const std::uint64_t total = npy_header_bytes(bytes);
  if (bytes.size() < total) throw npy_error{"it ends inside its .npy header"};
  npy_header h;
  h.major = static_cast<unsigned char>(bytes[6]);
  h.minor = static_cast<unsigned char>(bytes[7]);
  h.data_offset = total;
  const std::size_t field = h.major == 1 ? 2 : 4;
  const std::string_view dict = bytes.substr(8 + field, total - 8 - field);
  // 1.0 and 2.0 are latin-1, 3.0 UTF-8: the keys and values read here are ASCII in all of them;
  // a control character other than whitespace means the length points somewhere else.
  for (const char c : dict)
    if (static_cast<unsigned char>(c) < 0x20 && std::isspace(static_cast<unsigned char>(c)) == 0)
      throw npy_error{"its .npy header holds a control character"};
  const std::map<std::string, py_value> d = literal_reader{dict}.dict();
  // NumPy refuses a header without exactly these keys; so does this reader.
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (!d.contains(key)) throw npy_error{fmt::format("its .npy header has no '{}'", key)};
  if (d.size() != 3) {
    std::string extra;
    for (const auto& [k, v] : d)
      if (k != "descr" && k != "fortran_order" && k != "shape") extra = k;
    throw npy_error{fmt::format("its .npy header has an unknown key '{}'", extra)};
  }
  const py_value& descr = d.at("descr");
  if (descr.type == py_value::kind::string) {
    h.descr = descr.text;
  } else if (descr.type == py_value::kind::sequence) {
    h.descr = descr.text;
    h.structured = true;
    h.fields = fields_of(descr);
  } else {
    throw npy_error{"its .npy header's 'descr' is neither a string nor a list of fields"};
  }
  const py_value& fortran = d.at("fortran_order");
  if (fortran.type != py_value::kind::boolean)
    throw npy_error{"its .npy header's 'fortran_order' is not True or False"};
  h.fortran_order = fortran.boolean;
  const py_value& shape = d.at("shape");
  if (shape.type != py_value::kind::sequence || shape.text.front() != '(')
    throw npy_error{"its .npy header's 'shape' is not a tuple"};
  for (const py_value& dim : shape.items) {
    if (dim.type != py_value::kind::integer || dim.negative)
      throw npy_error{"its .npy header's 'shape' holds something other than sizes"};
    h.shape.push_back(dim.integer);
  }
  return h;
}

std::optional<dtype> npy_key_type(std::string_view descr) noexcept
{
  const auto [order, rest] = split_order(descr);
  // The engine compares little-endian keys; '=' is the native order, little-endian on every
  // host this runs on. No order mark is NumPy's shorthand for native too.
  if (order == '>' || order == '|') return std::nullopt;
  for (const dtype t : all_dtypes)
    if (rest == npy_descr_of(t).substr(1)) return t;
  return std::nullopt;
}

std::optional<std::uint32_t> npy_value_bytes(std::string_view descr) noexcept
{
  auto [order, rest] = split_order(descr);
  (void)order;  // a value is moved, never compared: its byte order does not matter
  // datetime64 and timedelta64 carry a unit: '<M8[ns]'.
  if (rest.size() > 2 && (rest[0] == 'M' || rest[0] == 'm') && rest[2] == '[' &&
      rest.back() == ']')
    rest = rest.substr(0, 2);
  if (rest.size() != 2) return std::nullopt;
  const char kind = rest[0];
  const char size = rest[1];
  if (std::string_view{"iuf"}.find(kind) != std::string_view::npos && (size == '4' || size == '8'))
    return static_cast<std::uint32_t>(size - '0');
  if (kind == 'c' && size == '8') return 8;  // complex64; complex128 is 16 bytes
  if ((kind == 'M' || kind == 'm') && size == '8') return 8;
  return std::nullopt;
}

std::string_view npy_descr_of(dtype t) noexcept
{
  switch (t) {
    case dtype::u32: return "<u4";
    case dtype::i32: return "<i4";
    case dtype::u64: return "<u8";
    case dtype::i64: return "<i8";
    case dtype::f32: return "<f4";
    case dtype::f64: return "<f8";
  }
  return "?";
}

std::string make_npy_header(std::string_view descr, std::uint64_t count)
{
  // As numpy/lib/format.py's _write_array_header: the keys sorted, each "'key': repr, ", then
  // spaces so that the shape may grow to 21 digits in place, then padding to 64 bytes.
  const std::string length = std::to_string(count);
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({},), }}",
                                 descr, length);
  dict.append(21 > length.size() ? 21 - length.size() : 0, ' ');
  for (const int major : {1, 2}) {
    const std::size_t prefix = major == 1 ? 10 : 12;
    const std::size_t unpadded = prefix + dict.size() + 1;  // + '\n'
    const std::size_t total = (unpadded + 63) / 64 * 64;
    if (major == 1 && total - prefix > 0xffff) continue;
    std::string out{npy_magic};
    out += static_cast<char>(major);
    out += '\0';
    std::uint64_t len = total - prefix;
    for (std::size_t i = 0; i < prefix - 8; ++i, len >>= 8) out += static_cast<char>(len & 0xff);
    out += dict;
    out.append(total - unpadded, ' ');
    out += '\n';
    return out;
  }
  return {};  // unreachable: a 2.0 length field holds any dict made here
}

}  // namespace gpusort::cli
