// Records on the command line (issue 42), through the real `gpusort` binary: `gen --records`
// (gensort's layout, the other sizes, each distribution, determinism), `sort` of records by
// --key OFFSET:LEN:TYPE[:desc] and of structured .npy files by their fields, --local and
// through a real gpusortd, in place, into --out and --argsort-out, the errors and their exit
// codes, and `verify --records` catching what it must.
//
// Every sorted file is checked against a reference written here: std::stable_sort of the record
// numbers with typed comparisons of the keys (memcmp for bytes, the C++ integer and float types
// for the others), never gpusort's own code; `gpusort verify --records` is run beside it.
#include "tests/service/daemon_test_support.hpp"

#include "tests/client/cli_process.hpp"
#include "tests/client/npy_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;
namespace ref = npy_reference;

using run_result = test_support::cli_result;

// ---- the reference ---------------------------------------------------------------------------

enum class col { u32, i32, u64, i64, f32, f64, u128, i128, bytes };

/// One key of a record as the test sees it; `length` only for bytes.
struct rkey {
  col type;
  std::uint32_t offset;
  std::uint32_t length{};
  bool descending{};
};

const char* name_of(col t)
{
  switch (t) {
    case col::u32: return "u32";
    case col::i32: return "i32";
    case col::u64: return "u64";
    case col::i64: return "i64";
    case col::f32: return "f32";
    case col::f64: return "f64";
    case col::u128: return "u128";
    case col::i128: return "i128";
    case col::bytes: return "bytes";
  }
  return "?";
}

std::uint32_t width(const rkey& k)
{
  switch (k.type) {
    case col::u32:
    case col::i32:
    case col::f32: return 4;
    case col::u64:
    case col::i64:
    case col::f64: return 8;
    case col::u128:
    case col::i128: return 16;
    case col::bytes: return k.length;
  }
  return 0;
}

/// The --key argument of `k`.
std::string spec(const rkey& k)
{
  return std::to_string(k.offset) + ":" + std::to_string(width(k)) + ":" + name_of(k.type) +
         (k.descending ? ":desc" : "");
}

template <typename T>
T load(const unsigned char* p)
{
  T v{};
  std::memcpy(&v, p, sizeof v);  // the host is little-endian, as the records are
  return v;
}

template <typename T>
int three_way(T a, T b)
{
  return a < b ? -1 : (b < a ? 1 : 0);
}

/// IEEE 754 totalOrder: -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN; NaNs of one sign
/// by their payload, the larger further from zero.
template <typename F>
int total_order(F a, F b)
{
  const auto rank = [](F x) { return std::isnan(x) ? (std::signbit(x) ? -1 : 1) : 0; };
  if (rank(a) != rank(b)) return three_way(rank(a), rank(b));
  if (rank(a) == 0) {
    if (a < b) return -1;
    if (b < a) return 1;
    return three_way(!std::signbit(a), !std::signbit(b));  // -0.0 first
  }
  using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  const U mask = std::numeric_limits<U>::max() >> 1;
  const int c = three_way(ref::bits(a) & mask, ref::bits(b) & mask);
  return rank(a) < 0 ? -c : c;
}

/// Key `k` of records `a` and `b`: <0, 0, >0 as a comes first, ties, comes after. `numpy`:
/// NumPy's float order (every NaN after every number in both directions, NaNs equal, -0.0 ==
/// +0.0); else totalOrder, reversed for a descending key.
int compare_key(const rkey& k, const unsigned char* a, const unsigned char* b, bool numpy)
{
  a += k.offset;
  b += k.offset;
  int c = 0;
  const auto floats = [&]<typename F>(F x, F y) {
    if (!numpy) return total_order(x, y);
    if (std::isnan(x) || std::isnan(y)) return three_way(std::isnan(x), std::isnan(y));
    return three_way(x, y);
  };
  switch (k.type) {
    case col::u32: c = three_way(load<std::uint32_t>(a), load<std::uint32_t>(b)); break;
    case col::i32: c = three_way(load<std::int32_t>(a), load<std::int32_t>(b)); break;
    case col::u64: c = three_way(load<std::uint64_t>(a), load<std::uint64_t>(b)); break;
    case col::i64: c = three_way(load<std::int64_t>(a), load<std::int64_t>(b)); break;
    case col::f32: c = floats(load<float>(a), load<float>(b)); break;
    case col::f64: c = floats(load<double>(a), load<double>(b)); break;
    case col::u128:  // the low 8 bytes first, as every integer of the host
      c = three_way(std::pair{load<std::uint64_t>(a + 8), load<std::uint64_t>(a)},
                    std::pair{load<std::uint64_t>(b + 8), load<std::uint64_t>(b)});
      break;
    case col::i128:
      c = three_way(std::pair{load<std::int64_t>(a + 8), load<std::uint64_t>(a)},
                    std::pair{load<std::int64_t>(b + 8), load<std::uint64_t>(b)});
      break;
    case col::bytes: c = std::memcmp(a, b, k.length); break;
  }
  const bool nan_last = numpy && (k.type == col::f32 || k.type == col::f64);
  if (nan_last && k.descending) {
    // NaNs stay last: only the numbers' order turns around.
    const bool an = k.type == col::f32 ? std::isnan(load<float>(a)) : std::isnan(load<double>(a));
    const bool bn = k.type == col::f32 ? std::isnan(load<float>(b)) : std::isnan(load<double>(b));
    return an || bn ? c : -c;
  }
  return k.descending ? -c : c;
}

/// The stable sorting permutation of `n` records of `rb` bytes by `keys`, the first primary.
std::vector<std::uint64_t> reference_order(const std::string& records, std::uint32_t rb,
                                           const std::vector<rkey>& keys, bool numpy)
{
  const std::uint64_t n = records.size() / rb;
  std::vector<std::uint64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  const auto* base = reinterpret_cast<const unsigned char*>(records.data());
  std::stable_sort(idx.begin(), idx.end(), [&](std::uint64_t i, std::uint64_t j) {
    for (const rkey& k : keys)
      if (const int c = compare_key(k, base + i * rb, base + j * rb, numpy); c != 0) return c < 0;
    return false;
  });
  return idx;
}

std::string gather(const std::string& records, std::uint32_t rb,
                   const std::vector<std::uint64_t>& idx)
{
  std::string out;
  out.reserve(records.size());
  for (const std::uint64_t i : idx) out.append(records, i * rb, rb);
  return out;
}

/// Equality of two record files that names the first record that differs, not the bytes.
::testing::AssertionResult same_records(const std::string& want, const std::string& got,
                                        std::uint32_t rb)
{
  if (want == got) return ::testing::AssertionSuccess();
  if (want.size() != got.size())
    return ::testing::AssertionFailure() << "sizes " << want.size() << " and " << got.size();
  const auto diff = std::mismatch(want.begin(), want.end(), got.begin());
  const auto at = static_cast<std::uint64_t>(diff.first - want.begin());
  return ::testing::AssertionFailure() << "record " << at / rb << " of " << want.size() / rb
                                       << " differs at its byte " << at % rb;
}

std::vector<std::uint64_t> indices_of(const std::string& data, bool u32)
{
  std::vector<std::uint64_t> out;
  if (u32) {
    for (const std::uint32_t i : ref::from_bytes<std::uint32_t>(data)) out.push_back(i);
  } else {
    for (const std::int64_t i : ref::from_bytes<std::int64_t>(data))
      out.push_back(static_cast<std::uint64_t>(i));
  }
  return out;
}

// ---- the records the tests sort ----------------------------------------------------------------

/// Key values from a few per type, so that keys tie within a key and across all of them, with
/// each type's extremes: the integer limits, and for floats NaNs of both signs and several
/// payloads, +-0.0, +-inf, subnormals.
template <typename F>
F tricky_float(std::uint64_t pick)
{
  using L = std::numeric_limits<F>;
  using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  const U quiet = ref::bits(L::quiet_NaN());
  const U sign = U{1} << (8 * sizeof(F) - 1);
  switch (pick % 14) {
    case 0: return L::quiet_NaN();
    case 1: return ref::from_bits<F>(quiet | sign);                // -NaN
    case 2: return ref::from_bits<F>(ref::bits(L::infinity()) | 1);  // a signalling NaN
    case 3: return ref::from_bits<F>(quiet | sign | 5);            // -NaN with a payload
    case 4: return F{-0.0};
    case 5: return F{0.0};
    case 6: return -L::infinity();
    case 7: return L::infinity();
    case 8: return L::denorm_min();
    case 9: return -L::denorm_min();
    case 10: return F{1.5};
    case 11: return F{-2.25};
    case 12: return L::max();
    default: return L::lowest();
  }
}

template <typename T>
void put(unsigned char* p, T v)
{
  std::memcpy(p, &v, sizeof v);
}

/// `n` records of `rb` bytes: random bytes (which show whether ties kept their order), then each
/// key's bytes drawn from a few values of its type.
std::string make_records(std::uint64_t n, std::uint32_t rb, const std::vector<rkey>& keys,
                         std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::string out(n * rb, '\0');
  auto* base = reinterpret_cast<unsigned char*>(out.data());
  for (std::uint64_t i = 0; i < n * rb; ++i) base[i] = static_cast<unsigned char>(rng());
  // A few byte strings per bytes key, some the prefix of another but for the last byte, with
  // 0x00, 0x7f, 0x80 and 0xff, so that memcmp's unsigned order shows.
  std::vector<std::vector<std::string>> patterns(keys.size());
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (keys[k].type != col::bytes) continue;
    constexpr unsigned char alphabet[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    for (int p = 0; p < 6; ++p) {
      std::string s(keys[k].length, '\0');
      for (char& c : s) c = static_cast<char>(alphabet[rng() % 5]);
      patterns[k].push_back(s);
      s.back() = static_cast<char>(s.back() == '\0' ? '\xff' : '\0');
      patterns[k].push_back(s);
    }
  }
  constexpr std::uint64_t u64s[] = {0, 1, std::uint64_t{1} << 32, std::uint64_t{1} << 63,
                                    ~std::uint64_t{0}};
  for (std::uint64_t r = 0; r < n; ++r) {
    unsigned char* rec = base + r * rb;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      unsigned char* at = rec + keys[k].offset;
      const std::uint64_t pick = rng();
      switch (keys[k].type) {
        case col::u32: {
          constexpr std::uint32_t v[] = {0, 1, 2, 0x7fffffff, 0x80000000, 0xffffffff};
          put(at, v[pick % 6]);
          break;
        }
        case col::i32: {
          constexpr std::int32_t v[] = {std::numeric_limits<std::int32_t>::min(), -2, -1, 0, 1,
                                        std::numeric_limits<std::int32_t>::max()};
          put(at, v[pick % 6]);
          break;
        }
        case col::u64: put(at, u64s[pick % 5]); break;
        case col::i64: {
          constexpr std::int64_t v[] = {std::numeric_limits<std::int64_t>::min(),
                                        -(std::int64_t{1} << 32), -1, 0, 1,
                                        std::numeric_limits<std::int64_t>::max()};
          put(at, v[pick % 6]);
          break;
        }
        case col::f32: put(at, tricky_float<float>(pick)); break;
        case col::f64: put(at, tricky_float<double>(pick)); break;
        case col::u128:
        case col::i128:  // the high half's top bit makes an i128 negative
          put(at, u64s[pick % 5]);
          put(at + 8, u64s[(pick >> 8) % 5]);
          break;
        case col::bytes: {
          const std::string& s = patterns[k][pick % patterns[k].size()];
          std::memcpy(at, s.data(), s.size());
          break;
        }
      }
    }
  }
  return out;
}

// ---- .npy files ------------------------------------------------------------------------------

/// A .npy header as np.save writes it for an array of `descr` (a structured dtype's list, e.g.
/// "[('k', '<u8'), ('s', '|S6')]") and shape `shape` ("(5,)"), version 1.0, 64-byte aligned.
std::string npy_header_of(const std::string& descr, const std::string& shape)
{
  std::string dict =
      "{'descr': " + descr + ", 'fortran_order': False, 'shape': " + shape + ", }";
  dict.append(21, ' ');  // np.save's room for the shape to grow
  return ref::npy_prefix(dict);
}

std::string npy_header_of(const std::string& descr, std::uint64_t n)
{
  return npy_header_of(descr, "(" + std::to_string(n) + ",)");
}

// ---- the fixtures ----------------------------------------------------------------------------

class CliRecords : public ::testing::Test {
 protected:
  void SetUp() override
  {
    fs::create_directories(work());
    config_ = dir_.path() / "cpu.yaml";
    // Under GPUSORT_TEST_BUDGET=tiny the local engine sorts out of core in many chunks, as the
    // daemon_process does with its own tiny budget.
    spit(config_, tiny_budget() ? "devices: cpu\ndevice_memory_budget: 64KiB\n"
                                : "devices: cpu\n");
  }

  fs::path work() const { return dir_.path() / "work"; }
  std::string path(const std::string& name) const { return (work() / name).string(); }

  /// The work folder's files and their contents.
  std::map<std::string, std::string> work_files() const
  {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator{work()})
      out[e.path().filename().string()] = slurp(e.path());
    return out;
  }
  std::set<std::string> work_names() const
  {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator{work()}) out.insert(e.path().filename());
    return out;
  }

  /// Runs gpusort; stdout and stderr are captured outside the work folder.
  run_result run(const std::vector<std::string>& args) const
  {
    return test_support::run_cli(dir_.path(), args);
  }

  /// gen --records --count n --out `file` [--record-bytes rb] [--dist d] --seed s.
  void gen(std::uint64_t n, const std::string& file, std::uint32_t rb = 0,
           const std::string& dist = "", std::uint64_t seed = 7) const
  {
    std::vector<std::string> args{"gen", "--records", "--count", std::to_string(n), "--out",
                                  path(file), "--seed", std::to_string(seed), "--quiet"};
    if (rb != 0) args.insert(args.end(), {"--record-bytes", std::to_string(rb)});
    if (!dist.empty()) args.insert(args.end(), {"--dist", dist});
    const run_result r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(r.out + r.err, "");
  }

  /// `gpusort verify FILE` and `extra` (--records or --record-bytes, keys, --original ...).
  run_result verify(const std::string& file, std::vector<std::string> extra) const
  {
    extra.insert(extra.begin(), {"verify", path(file)});
    return run(extra);
  }

  temp_dir dir_;
  fs::path config_;
};

/// The stderr of a failed command: one line that starts "gpusort: ".
void expect_one_error_line(const run_result& r)
{
  EXPECT_EQ(r.err.rfind("gpusort: ", 0), 0U) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

/// The sorts run --local (the embedded engine) or through a gpusortd started for the test.
class CliRecordsSort : public CliRecords, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override
  {
    CliRecords::SetUp();
    if (daemon()) daemon_ = std::make_unique<daemon_process>(dir_.path());
  }
  bool daemon() const { return std::string{GetParam()} == "daemon"; }

  /// gpusort sort `args`, --local or --socket.
  run_result sort(std::vector<std::string> args) const
  {
    args.insert(args.begin(), "sort");
    if (daemon())
      args.insert(args.end(), {"--socket", daemon_->socket()});
    else
      args.insert(args.end(), {"--local", "--config", config_.string()});
    return run(args);
  }
  std::string log() const { return daemon_ ? "\ndaemon log:\n" + daemon_->log() : ""; }

  /// The --key arguments of `keys`.
  static std::vector<std::string> key_args(const std::vector<rkey>& keys)
  {
    std::vector<std::string> out;
    for (const rkey& k : keys) out.insert(out.end(), {"--key", spec(k)});
    return out;
  }

  /// Sorts records.bin (`rb`-byte records) by `keys` into --out and --argsort-out, checks both
  /// against the reference and the input unchanged, and has verify --records agree.
  void sort_and_check(const std::string& records, std::uint32_t rb,
                      const std::vector<rkey>& keys, bool numpy = false)
  {
    spit(path("records.bin"), records);
    std::vector<std::string> args{path("records.bin"), "--record-bytes", std::to_string(rb),
                                  "--out", path("sorted.bin"), "--quiet"};
    const std::vector<std::string> k = key_args(keys);
    args.insert(args.end(), k.begin(), k.end());
    if (numpy) args.insert(args.end(), {"--float-order", "numpy"});
    run_result r = sort(args);
    ASSERT_EQ(r.code, 0) << r.err << log();
    const std::vector<std::uint64_t> want = reference_order(records, rb, keys, numpy);
    EXPECT_TRUE(same_records(gather(records, rb, want), slurp(path("sorted.bin")), rb));
    EXPECT_TRUE(slurp(path("records.bin")) == records) << "the input changed";

    args[3] = "--argsort-out";
    args[4] = path("order.bin");
    r = sort(args);
    ASSERT_EQ(r.code, 0) << r.err << log();
    EXPECT_EQ(indices_of(slurp(path("order.bin")), false), want);

    std::vector<std::string> check{"--record-bytes", std::to_string(rb), "--original",
                                   path("records.bin")};
    check.insert(check.end(), k.begin(), k.end());
    if (numpy) check.insert(check.end(), {"--float-order", "numpy"});
    const run_result v = verify("sorted.bin", check);
    EXPECT_EQ(v.code, 0) << v.err << v.out;
  }

  std::unique_ptr<daemon_process> daemon_;
};

INSTANTIATE_TEST_SUITE_P(Modes, CliRecordsSort, ::testing::Values("local", "daemon"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string{p.param};
                         });

std::string hex16(std::uint64_t v)
{
  std::string s(16, '0');
  for (std::size_t i = 16; i-- > 0; v >>= 4) s[i] = "0123456789ABCDEF"[v & 15];
  return s;
}

std::string key_of(const std::string& records, std::uint32_t rb, std::uint64_t r)
{
  return records.substr(r * rb, 10);
}

std::string big_endian(std::uint64_t v)
{
  std::string s(8, '\0');
  for (std::size_t i = 8; i-- > 0; v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

// ---- gen --records -------------------------------------------------------------------------

// gensort's 100-byte records: a 10-byte key, 0x00 0x11, the record's number as 32 uppercase
// hex digits, 0x88 0x99 0xAA 0xBB, 48 bytes of filler in runs of 4 equal hex digits, 0xCC 0xDD
// 0xEE 0xFF; the summary line says what was written.
TEST_F(CliRecords, GenWritesGensortRecordsByDefault)
{
  const run_result r = run({"gen", "--records", "--count", "1000", "--out", path("g.bin")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote 1000 records of 100 bytes (uniform keys, seed 1) to " + path("g.bin") +
                       "\n");
  const std::string g = slurp(path("g.bin"));
  ASSERT_EQ(g.size(), 100'000U);
  std::set<std::string> keys;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    const std::string rec = g.substr(i * 100, 100);
    keys.insert(rec.substr(0, 10));
    ASSERT_EQ(rec.substr(10, 2), std::string("\x00\x11", 2));
    ASSERT_EQ(rec.substr(12, 32), std::string(16, '0') + hex16(i));
    ASSERT_EQ(rec.substr(44, 4), "\x88\x99\xAA\xBB");
    for (int run = 0; run < 12; ++run) {
      const char c = rec[48 + 4 * static_cast<std::size_t>(run)];
      ASSERT_TRUE((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')) << run;
      ASSERT_EQ(rec.substr(48 + 4 * static_cast<std::size_t>(run), 4), std::string(4, c)) << run;
    }
    ASSERT_EQ(rec.substr(96, 4), "\xCC\xDD\xEE\xFF");
  }
  EXPECT_EQ(keys.size(), 1000U) << "80 random bits repeat almost never";
  // Not in order; `verify --records` needs no --record-bytes for them.
  const run_result v = verify("g.bin", {"--records"});
  EXPECT_EQ(v.code, 1) << v.out;
  EXPECT_NE(v.err.find("out of order"), std::string::npos) << v.err;
}

// Other sizes: the key, then the record's number as 8 little-endian bytes where there is room
// (18 bytes or more), then filler hashed from the seed and the number.
TEST_F(CliRecords, GenOtherSizesCarryTheKeyTheNumberAndAFiller)
{
  for (const std::uint32_t rb : {10U, 17U, 18U, 64U, 4096U}) {
    SCOPED_TRACE("record bytes " + std::to_string(rb));
    const std::uint64_t n = rb == 4096 ? 200 : 2000;
    gen(n, "g.bin", rb, "sorted");
    const std::string g = slurp(path("g.bin"));
    ASSERT_EQ(g.size(), n * rb);
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(key_of(g, rb, i), std::string(2, '\0') + big_endian(i)) << i;
      const auto* rec = reinterpret_cast<const unsigned char*>(g.data()) + i * rb;
      if (rb >= 18) {
        ASSERT_EQ(load<std::uint64_t>(rec + 10), i);
      }
    }
    if (rb >= 26) {  // the fillers of two records differ
      EXPECT_NE(g.substr(18, rb - 18), g.substr(rb + 18, rb - 18));
    }
    const run_result v = verify("g.bin", {"--record-bytes", std::to_string(rb)});
    EXPECT_EQ(v.code, 0) << v.err;
  }
}

// Each distribution --records accepts, by its keys: uniform and gaussian random (gaussian's
// first byte near the middle), sorted and reverse strictly monotonic in the record's number,
// zero all equal, fewunique 16 keys; the order `verify --records` finds agrees.
TEST_F(CliRecords, GenEachDistributionMakesItsKeys)
{
  constexpr std::uint64_t n = 2000;
  for (const std::uint32_t rb : {100U, 20U}) {
    for (const std::string dist :
         {"uniform", "gaussian", "sorted", "reverse", "zero", "fewunique"}) {
      SCOPED_TRACE(dist + ", " + std::to_string(rb) + "-byte records");
      gen(n, "g.bin", rb, dist);
      const std::string g = slurp(path("g.bin"));
      ASSERT_EQ(g.size(), n * rb);
      std::set<std::string> keys;
      std::uint64_t middle = 0;
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::string k = key_of(g, rb, i);
        keys.insert(k);
        const auto first = static_cast<unsigned char>(k[0]);
        if (first >= 0x40 && first < 0xC0) ++middle;
        if (dist == "sorted") {
          ASSERT_EQ(k, std::string(2, '\0') + big_endian(i));
        } else if (dist == "reverse") {
          ASSERT_EQ(k, std::string(2, '\xff') + big_endian(~i));
        } else if (dist == "zero") {
          ASSERT_EQ(k, std::string(10, '\0'));
        }
      }
      const std::size_t distinct = dist == "zero" ? 1 : dist == "fewunique" ? 16 : n;
      EXPECT_EQ(keys.size(), distinct);
      // The mean of four uniform values lies in the middle half of the range ~92% of the time;
      // a uniform key's first byte only half the time.
      if (dist == "gaussian") {
        EXPECT_GT(middle, n * 8 / 10);
      } else if (dist == "uniform") {
        EXPECT_LT(middle, n * 6 / 10);
      }
      const run_result v = verify("g.bin", {"--record-bytes", std::to_string(rb), "--json"});
      const bool in_order = dist == "sorted" || dist == "zero";
      EXPECT_EQ(v.code, in_order ? 0 : 1) << v.out;
      if (dist == "zero") {
        EXPECT_NE(v.out.find("\"duplicate_keys\":1999"), std::string::npos) << v.out;
      }
    }
  }
}

// The same seed, size, distribution and count give the same bytes; another seed other bytes;
// a record depends on its number alone, so a shorter file is the longer one's start.
TEST_F(CliRecords, GenTheSameSeedGivesTheSameBytes)
{
  for (const auto& [rb, dist] : std::vector<std::pair<std::uint32_t, std::string>>{
           {100, "uniform"}, {100, "gaussian"}, {33, "fewunique"}}) {
    SCOPED_TRACE(dist + ", " + std::to_string(rb) + "-byte records");
    gen(5000, "a.bin", rb, dist, 11);
    gen(5000, "b.bin", rb, dist, 11);
    gen(5000, "c.bin", rb, dist, 12);
    gen(1234, "d.bin", rb, dist, 11);
    const std::string a = slurp(path("a.bin"));
    EXPECT_TRUE(a == slurp(path("b.bin")));
    EXPECT_TRUE(a != slurp(path("c.bin")));
    EXPECT_TRUE(a.substr(0, 1234 * rb) == slurp(path("d.bin")));
  }
}

// ---- sort: raw records -----------------------------------------------------------------------

// The sort benchmark's case: gensort's records by their 10-byte key, into --out and in place,
// checked by the reference and by verify --records with --original.
TEST_P(CliRecordsSort, SortsGensortRecordsByTheBenchmarkKey)
{
  gen(100'000, "g.bin");
  const std::string g = slurp(path("g.bin"));
  const std::vector<rkey> key{{col::bytes, 0, 10}};
  const std::string want = gather(g, 100, reference_order(g, 100, key, false));
  run_result r = sort({path("g.bin"), "--record-bytes", "100", "--key", "0:10:bytes", "--out",
                       path("s.bin"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_NE(r.out.find("\"elements\":100000"), std::string::npos) << r.out;
  EXPECT_TRUE(same_records(want, slurp(path("s.bin")), 100));
  EXPECT_TRUE(slurp(path("g.bin")) == g) << "the input changed";
  r = verify("s.bin", {"--records", "--original", path("g.bin")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ok: 100000 records sorted, a permutation of " + path("g.bin") +
                            "; checksum ",
                        0),
            0U)
      << r.out;
  EXPECT_NE(r.out.find(", 0 duplicate keys"), std::string::npos) << r.out;

  r = sort({path("g.bin"), "--record-bytes", "100", "--key", "0:10:bytes", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(same_records(want, slurp(path("g.bin")), 100));
  // The summary counts records, not elements.
  r = sort({path("g.bin"), "--record-bytes", "100", "--key", "0:10:bytes"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(r.out.rfind("sorted 100000 records (9.54 MiB) in ", 0), 0U) << r.out;
  EXPECT_EQ(work_names(), (std::set<std::string>{"g.bin", "s.bin"})) << "a temporary was left";
}

// Records of 4, 12, 100 and 4096 bytes with keys at the start, in the middle and at the end of
// the record, aligned and not.
TEST_P(CliRecordsSort, SortsRecordsOfEverySizeByKeysAnywhere)
{
  struct layout {
    std::uint32_t rb;
    std::uint64_t n;
    std::vector<rkey> keys;
  };
  const std::vector<layout> layouts{
      {4, 100'000, {{col::u32, 0}}},
      {4, 20'000, {{col::f32, 0, 0, true}}},
      {4, 20'000, {{col::bytes, 3, 1}, {col::bytes, 1, 2, true}}},  // byte 0 shows stability
      {12, 20'000, {{col::u64, 2, 0, true}}},
      {12, 20'000, {{col::f32, 8}, {col::bytes, 4, 3, true}}},
      {12, 20'000, {{col::i64, 4}, {col::u32, 0, 0, true}}},
      {100, 10'000, {{col::i128, 41, 0, true}, {col::f64, 57}}},
      {100, 10'000, {{col::u128, 84}, {col::bytes, 80, 4}}},
      {4096, 300, {{col::u32, 4092}, {col::bytes, 2000, 16, true}, {col::f64, 2045}}},
  };
  std::uint64_t seed = 1;
  for (const layout& l : layouts) {
    std::string shown = std::to_string(l.rb) + "-byte records by";
    for (const rkey& k : l.keys) shown += " " + spec(k);
    SCOPED_TRACE(shown);
    sort_and_check(make_records(l.n, l.rb, l.keys, seed++), l.rb, l.keys);
  }
}

/// Records of 80 bytes with a key of every type: u32@0 i32@4 u64@8 i64@16 f32@24 f64@28
/// (unaligned) u128@36 i128@52 bytes@68:6, then filler.
struct every_type {
  rkey u32{col::u32, 0}, i32{col::i32, 4}, u64{col::u64, 8}, i64{col::i64, 16},
      f32{col::f32, 24}, f64{col::f64, 28}, u128{col::u128, 36}, i128{col::i128, 52},
      text{col::bytes, 68, 6};
  std::string records = make_records(8'000, 80, {u32, i32, u64, i64, f32, f64, u128, i128, text},
                                     42);
  static rkey desc(rkey k)
  {
    k.descending = true;
    return k;
  }
};

// Several keys of every type in one record, in mixed directions: the first key decides, the
// next only among its ties, and so on; floats in totalOrder (raw files' default) and in NumPy's
// order with --float-order numpy (NaNs last in both directions). The 128-bit keys start at a
// multiple of 8 bytes of the keys before them (see the next test for the others).
TEST_P(CliRecordsSort, SortsByMixedKeyTypesAndOrders)
{
  const every_type t;
  const auto desc = every_type::desc;
  const std::vector<std::pair<std::vector<rkey>, bool>> cases{
      {{t.u64, t.u128, t.i128, t.i64, t.f64, t.u32, t.i32, t.f32, t.text}, false},
      {{desc(t.f64), t.i128, desc(t.text), t.u32}, false},
      {{desc(t.u128), t.f32, desc(t.i64), t.i32, t.u64}, false},
      {{t.text, desc(t.f32), desc(t.f64)}, true},
      {{t.f64, desc(t.i128), desc(t.u32)}, true},
      {{desc(t.i32), desc(t.u64), desc(t.f32)}, false},
  };
  for (const auto& [keys, numpy] : cases) {
    std::string shown = numpy ? "numpy order:" : "total order:";
    for (const rkey& k : keys) shown += " " + spec(k);
    SCOPED_TRACE(shown);
    sort_and_check(t.records, 80, keys, numpy);
  }
}

// A u128 or i128 key after keys whose bytes are not a multiple of 8 (a u32, an f32, a 1-byte
// string) straddles a word of the engine's key string: its pieces are neither of its halves.
// (It found core/rows/row_words.cpp reading such a piece as the key's low half.)
TEST_P(CliRecordsSort, Sorts128BitKeysThatStartInsideAWord)
{
  const every_type t;
  const auto desc = every_type::desc;
  const rkey first_byte{col::bytes, 79, 1};
  const std::vector<std::vector<rkey>> cases{
      {t.u32, t.u128},
      {desc(t.f32), t.i128},
      {first_byte, desc(t.u128)},
      {t.u32, t.i32, t.u64, t.i64, t.f32, t.f64, t.u128, t.i128, t.text},
  };
  for (const std::vector<rkey>& keys : cases) {
    std::string shown;
    for (const rkey& k : keys) shown += " " + spec(k);
    SCOPED_TRACE(shown);
    sort_and_check(t.records, 80, keys);
  }
}

// Where the results go: in place, --out, --argsort-out raw and .npy with i64 and u32 indices,
// and --argsort-out with --out (both written); the input is only read but in place.
TEST_P(CliRecordsSort, WritesInPlaceOutAndArgsortOutputs)
{
  const std::vector<rkey> keys{{col::i32, 0}, {col::f32, 8, 0, true}};
  constexpr std::uint64_t n = 20'000;
  const std::string records = make_records(n, 12, keys, 3);
  const std::vector<std::uint64_t> perm = reference_order(records, 12, keys, false);
  const std::string want = gather(records, 12, perm);
  spit(path("r.bin"), records);
  const std::vector<std::string> base{path("r.bin"), "--record-bytes", "12", "--key", "0:4:i32",
                                      "--key",       "8:4:f32:desc",   "--quiet"};
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return sort(extra);
  };
  struct argsort_case {
    std::string file;
    bool u32;
    bool with_out;
  };
  for (const argsort_case& c : {argsort_case{"i.bin", false, false}, {"i32.bin", true, false},
                                {"i.npy", false, true}, {"i32.npy", true, false},
                                {"j.bin", true, true}}) {
    SCOPED_TRACE(c.file + (c.u32 ? " u32" : " i64") + (c.with_out ? " with --out" : ""));
    std::vector<std::string> extra{"--argsort-out", path(c.file)};
    if (c.u32) extra.insert(extra.end(), {"--index-type", "u32"});
    if (c.with_out) extra.insert(extra.end(), {"--out", path("o.bin")});
    const run_result r = with(extra);
    ASSERT_EQ(r.code, 0) << r.err << log();
    std::string idx = slurp(path(c.file));
    if (c.file.ends_with(".npy")) {
      const std::string h = ref::npy_header(c.u32 ? "<u4" : "<i8", n);
      ASSERT_GE(idx.size(), h.size());
      EXPECT_EQ(idx.substr(0, h.size()), h) << "np.save's header of the indices";
      idx.erase(0, h.size());
    }
    EXPECT_EQ(idx.size(), n * (c.u32 ? 4 : 8));
    EXPECT_EQ(indices_of(idx, c.u32), perm);
    EXPECT_EQ(fs::exists(path("o.bin")), c.with_out) << "records written only with --out";
    if (c.with_out) {
      EXPECT_TRUE(same_records(want, slurp(path("o.bin")), 12));
    }
    fs::remove(path("o.bin"));
    EXPECT_TRUE(slurp(path("r.bin")) == records) << "the input changed";
  }
  run_result r = with({"--out", path("o.bin")});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_TRUE(same_records(want, slurp(path("o.bin")), 12));
  EXPECT_TRUE(slurp(path("r.bin")) == records) << "the input changed";
  r = with({});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_TRUE(same_records(want, slurp(path("r.bin")), 12));
  EXPECT_EQ(work_names(), (std::set<std::string>{"i.bin", "i.npy", "i32.bin", "i32.npy",
                                                 "j.bin", "o.bin", "r.bin"}));
}

// Equal keys keep their input order: records whose every key ties come out as they went in,
// whose keys tie in part keep the order of the records among each tie, and the argsort of
// all-equal keys is the identity.
TEST_P(CliRecordsSort, TiesKeepTheInputOrder)
{
  constexpr std::uint64_t n = 20'000;
  gen(n, "z.bin", 24, "zero");
  const std::string z = slurp(path("z.bin"));
  run_result r = sort({path("z.bin"), "--record-bytes", "24", "--key", "0:10:bytes:desc",
                       "--key", "2:8:i64", "--argsort-out", path("i.bin"), "--out",
                       path("o.bin"), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  std::vector<std::uint64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(indices_of(slurp(path("i.bin")), false), identity);
  EXPECT_TRUE(same_records(z, slurp(path("o.bin")), 24));

  // fewunique: 16 keys, ~1250 records each, told apart by the record numbers they carry.
  gen(n, "f.bin", 24, "fewunique");
  const std::string f = slurp(path("f.bin"));
  r = sort({path("f.bin"), "--record-bytes", "24", "--key", "0:10:bytes", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  const std::string s = slurp(path("f.bin"));
  EXPECT_TRUE(same_records(gather(f, 24, reference_order(f, 24, {{col::bytes, 0, 10}}, false)),
                           s, 24));
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::uint64_t i = 1; i < n; ++i)
    if (std::memcmp(p + (i - 1) * 24, p + i * 24, 10) == 0) {
      ASSERT_LT(load<std::uint64_t>(p + (i - 1) * 24 + 10), load<std::uint64_t>(p + i * 24 + 10))
          << "records " << i - 1 << " and " << i << " tie but swapped";
    }
}

// An empty file and a single record: sorted (nothing to do), argsorted (no index, index 0).
TEST_P(CliRecordsSort, SortsAnEmptyFileAndOneRecord)
{
  spit(path("e.bin"), "");
  run_result r = sort({path("e.bin"), "--record-bytes", "12", "--key", "0:4:u32", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(slurp(path("e.bin")), "");
  r = sort({path("e.bin"), "--record-bytes", "12", "--key", "0:4:u32", "--argsort-out",
            path("e.npy"), "--out", path("eo.bin"), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(slurp(path("e.npy")), ref::npy_header("<i8", 0));
  EXPECT_EQ(slurp(path("eo.bin")), "");
  r = verify("e.bin", {"--record-bytes", "12", "--original", path("e.bin")});
  EXPECT_EQ(r.code, 0) << r.err;

  const std::string one = make_records(1, 12, {{col::i64, 4}}, 9);
  spit(path("one.bin"), one);
  r = sort({path("one.bin"), "--record-bytes", "12", "--key", "4:8:i64:desc", "--argsort-out",
            path("one.idx"), "--index-type", "u32", "--out", path("o.bin"), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(slurp(path("one.idx")), std::string(4, '\0'));
  EXPECT_EQ(slurp(path("o.bin")), one);
  r = sort({path("one.bin"), "--record-bytes", "12", "--key", "4:8:i64:desc", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err << log();
  EXPECT_EQ(slurp(path("one.bin")), one);
}

// ---- sort: structured .npy files -----------------------------------------------------------

/// A structured dtype the test builds files of: its descr list and its fields' keys.
struct structured {
  std::string descr;
  std::uint32_t rb;
  std::vector<std::pair<std::string, rkey>> fields;

  rkey field(const std::string& name, bool descending = false) const
  {
    for (const auto& [n, k] : fields)
      if (n == name) {
        rkey out = k;
        out.descending = descending;
        return out;
      }
    throw std::runtime_error{"no field " + name};
  }
  /// np.sort(a, order=names)'s keys: the named fields, then the others in the dtype's order.
  std::vector<rkey> by_order(const std::vector<std::string>& names) const
  {
    std::vector<rkey> keys;
    for (const std::string& n : names) keys.push_back(field(n));
    for (const auto& [n, k] : fields)
      if (std::find(names.begin(), names.end(), n) == names.end()) keys.push_back(k);
    return keys;
  }
  std::vector<rkey> keys() const { return by_order({}); }
};

const structured kfs{"[('k', '<u8'), ('f', '<f8'), ('s', '|S6')]",
                     22,
                     {{"k", {col::u64, 0}}, {"f", {col::f64, 8}}, {"s", {col::bytes, 16, 6}}}};

// Every other field type records take (i4 f4 b1 u1), and padding that is no field ('' in the
// descr, as np.save writes an aligned dtype): records move whole, padding and all.
const structured mixed{
    "[('i', '<i4'), ('', '|V4'), ('g', '<f4'), ('b', '|b1'), ('c', '|u1'), ('', '|V2'), "
    "('q', '<i8')]",
    24,
    {{"i", {col::i32, 0}},
     {"g", {col::f32, 8}},
     {"b", {col::bytes, 12, 1}},
     {"c", {col::bytes, 13, 1}},
     {"q", {col::i64, 16}}}};

/// Records of `t` with its fields' keys from the reference's few values; a bool is 0 or 1 as
/// NumPy makes them, and the padding is random (so that a tie's order shows).
std::string make_structured(const structured& t, std::uint64_t n, std::uint64_t seed)
{
  std::vector<rkey> keys;
  for (const auto& [name, k] : t.fields) keys.push_back(k);
  std::string data = make_records(n, t.rb, keys, seed);
  for (const auto& [name, k] : t.fields)
    if (name == "b")
      for (std::uint64_t i = 0; i < n; ++i) data[i * t.rb + k.offset] &= 1;
  return data;
}

// A structured .npy file sorts as np.sort(a, order=..., kind="stable"): all fields in order by
// default, --order's fields then the others, --key NAME[:desc] those fields alone (also with an
// OFFSET:LEN:TYPE key), NumPy's float order (the .npy default); into --out, in place, and
// --argsort-out as np.argsort's int64 .npy; the header comes back byte for byte (in place for
// a few variants: the path is the same for all).
TEST_P(CliRecordsSort, SortsStructuredNpyFilesAsNumPy)
{
  struct variant {
    const structured* type;
    std::vector<std::string> args;
    std::vector<rkey> keys;
  };
  const std::vector<variant> variants{
      {&kfs, {}, kfs.keys()},
      {&kfs, {"--order", "f,s"}, kfs.by_order({"f", "s"})},
      {&kfs, {"--order", "s"}, kfs.by_order({"s"})},
      {&kfs, {"--key", "f:desc", "--key", "s"}, {kfs.field("f", true), kfs.field("s")}},
      {&kfs, {"--key", "s:desc"}, {kfs.field("s", true)}},
      {&kfs, {"--key", "16:6:bytes", "--key", "k:desc"}, {kfs.field("s"), kfs.field("k", true)}},
      {&mixed, {}, mixed.keys()},
      {&mixed, {"--order", "g,b"}, mixed.by_order({"g", "b"})},
      {&mixed, {"--key", "c:desc", "--key", "g:desc"},
       {mixed.field("c", true), mixed.field("g", true)}},
  };
  constexpr std::uint64_t n = 5'000;
  std::uint64_t seed = 100;
  for (const variant& v : variants) {
    std::string shown = v.type->descr;
    for (const std::string& a : v.args) shown += " " + a;
    SCOPED_TRACE(shown);
    const std::string header = npy_header_of(v.type->descr, n);
    const std::string data = make_structured(*v.type, n, seed++);
    const std::vector<std::uint64_t> perm = reference_order(data, v.type->rb, v.keys, true);
    const std::string want = header + gather(data, v.type->rb, perm);
    spit(path("a.npy"), header + data);

    std::vector<std::string> args{path("a.npy"), "--out", path("s.npy"), "--quiet"};
    args.insert(args.end(), v.args.begin(), v.args.end());
    run_result r = sort(args);
    ASSERT_EQ(r.code, 0) << r.err << log();
    const std::string got = slurp(path("s.npy"));
    EXPECT_EQ(got.substr(0, header.size()), header) << "the header changed";
    EXPECT_TRUE(same_records(want.substr(header.size()), got.substr(header.size()),
                             v.type->rb));
    EXPECT_TRUE(slurp(path("a.npy")) == header + data) << "the input changed";
    // verify reads the header's fields without --records.
    std::vector<std::string> check{"--original", path("a.npy")};
    check.insert(check.end(), v.args.begin(), v.args.end());
    r = verify("s.npy", check);
    EXPECT_EQ(r.code, 0) << r.err;

    args[1] = "--argsort-out";
    args[2] = path("i.npy");
    r = sort(args);
    ASSERT_EQ(r.code, 0) << r.err << log();
    const std::string h = ref::npy_header("<i8", n);
    const std::string idx = slurp(path("i.npy"));
    EXPECT_EQ(idx.substr(0, h.size()), h);
    EXPECT_EQ(indices_of(idx.substr(h.size()), false), perm);

    if (&v == &variants[0] || &v == &variants[3] || &v == &variants[6]) {
      args.erase(args.begin() + 1, args.begin() + 3);
      r = sort(args);
      ASSERT_EQ(r.code, 0) << r.err << log();
      EXPECT_TRUE(same_records(want, slurp(path("a.npy")), v.type->rb)) << "in place";
    }
  }
}

// ---- errors ----------------------------------------------------------------------------------

// Each refusal of the records' options and data: its exit code (64 usage, 65 data, 1 verify),
// one line naming the problem, nothing on stdout, and afterwards every file as it was and no
// new one.
TEST_P(CliRecordsSort, ErrorsExitWithTheirCodeAndChangeNoFile)
{
  gen(100, "r.bin");
  spit(path("odd.bin"), slurp(path("r.bin")).substr(0, 1050));
  spit(path("v.bin"), std::string(800, 'v'));
  spit(path("s.npy"), npy_header_of(kfs.descr, 50) + make_structured(kfs, 50, 1));
  spit(path("u.npy"), npy_header_of("[('a', '<u4'), ('b', '<U2')]", 3) + std::string(36, '\0'));
  spit(path("sub.npy"),
       npy_header_of("[('a', '<u4'), ('b', '<u4', (2,))]", 3) + std::string(36, '\0'));
  spit(path("nest.npy"),
       npy_header_of("[('a', '<u4'), ('b', [('x', '<u4')])]", 3) + std::string(24, '\0'));
  spit(path("half.npy"), npy_header_of("[('a', '<f2'), ('b', '<u2')]", 3) + std::string(12, 0));
  spit(path("be.npy"), npy_header_of("[('a', '>u4')]", 3) + std::string(12, '\0'));
  spit(path("two.npy"), npy_header_of("[('a', '<u4')]", "(2, 3)") + std::string(24, '\0'));
  spit(path("short.npy"), npy_header_of("[('a', '<u4')]", 5) + std::string(16, '\0'));
  spit(path("plain.npy"), ref::npy_header("<u4", 3) + std::string(12, '\0'));
  {
    // A bool whose byte is 2 (a view, a raw write): NumPy's sort(order=) calls it True.
    std::string data = make_structured(mixed, 40, 3);
    data[17 * mixed.rb + 12] = 2;
    spit(path("bool.npy"), npy_header_of(mixed.descr, 40) + data);
  }
  const std::map<std::string, std::string> before = work_files();

  struct error_case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::string r = path("r.bin"), s = path("s.npy");
  const std::vector<std::string> rec{r, "--record-bytes", "100"};
  const auto records = [&](std::vector<std::string> more) {
    more.insert(more.begin(), rec.begin(), rec.end());
    return more;
  };
  const std::vector<error_case> sorts{
      // --key
      {records({"--key", "0:10:byts"}), 64, "unknown type 'byts'"},
      {records({"--key", "0:10"}), 64, "not OFFSET:LEN:TYPE[:desc]"},
      {records({"--key", "0:10:bytes:down"}), 64, "not OFFSET:LEN:TYPE[:desc]"},
      {records({"--key", "x:10:bytes"}), 64, "OFFSET and LEN are byte counts"},
      {records({"--key", "0:-1:bytes"}), 64, "OFFSET and LEN are byte counts"},
      {records({"--key", "0:0:bytes"}), 64, "a length of 0"},
      {records({"--key", "0:4:u64"}), 64, "a u64 key is 8 bytes long, not 4"},
      {records({"--key", "0:8:u128"}), 64, "a u128 key is 16 bytes long, not 8"},
      {records({"--key", "96:8:u64"}), 64, "ends at byte 104, beyond the 100-byte record"},
      {records({"--key", "0:10:bytes", "--key", "90:11:bytes"}), 64,
       "ends at byte 101, beyond the 100-byte record"},
      {records({}), 64, "records need at least one --key"},
      // --record-bytes
      {{r, "--key", "0:10:bytes"}, 64, "records need --record-bytes"},
      {{r, "--record-bytes", "0", "--key", "0:1:bytes"}, 64, "--record-bytes takes 1 to"},
      {{r, "--record-bytes", "1048577", "--key", "0:1:bytes"}, 64, "--record-bytes takes 1 to"},
      {{r, "--record-bytes", "ten", "--key", "0:1:bytes"}, 64, "not 'ten'"},
      // the keys' options
      {records({"--key", "0:10:bytes", "--dtype", "u64"}), 64, "--dtype is for keys"},
      {records({"--key", "0:10:bytes", "--descending"}), 64, "--descending is for keys"},
      {records({"--key", "0:10:bytes", "--values", path("v.bin")}), 64, "--values is for keys"},
      // streams
      {{"-", "--record-bytes", "100", "--key", "0:10:bytes"}, 64, "not streams"},
      {records({"--key", "0:10:bytes", "--out", "-"}), 64, "not streams"},
      // outputs
      {records({"--key", "0:10:bytes", "--argsort-out", r}), 64, "only reads"},
      {records({"--key", "0:10:bytes", "--argsort-out", path("i.bin"), "--out",
                path("i.bin")}),
       64, "the same file"},
      {records({"--key", "0:10:bytes", "--index-type", "u32"}), 64, "needs --argsort-out"},
      // --order
      {records({"--order", "k"}), 64, "--order names the fields of a structured .npy file"},
      {{s, "--order", "zz"}, 64, "has no field 'zz'"},
      {{s, "--order", "k,k"}, 64, "--order names 'k' twice"},
      {{s, "--order", "k", "--key", "f"}, 64, "--order or --key, not both"},
      {{s, "--key", "zz:desc"}, 64, "has no field 'zz'"},
      {{s, "--key", "f:up"}, 64, "or a field's NAME[:desc]"},
      {{s, "--record-bytes", "8"}, 64, "header says 22"},
      {{s, "--key", "20:4:u32"}, 64, "ends at byte 24, beyond the 22-byte record"},
      // data
      {{path("odd.bin"), "--record-bytes", "100", "--key", "0:10:bytes"}, 65,
       "holds 1050 bytes of data, not a whole number of 100-byte records"},
      {{path("u.npy")}, 65, "field 'b' (<U2) is not a type records sort by"},
      {{path("u.npy"), "--order", "a"}, 65, "field 'b' (<U2) is not a type records sort by"},
      {{path("sub.npy"), "--key", "a"}, 65, "field 'b' is a subarray or a structure"},
      {{path("nest.npy")}, 65, "field 'b' is a subarray or a structure"},
      {{path("half.npy")}, 65, "field 'a' (<f2) is not a type records sort by"},
      {{path("be.npy")}, 65, "field 'a' (>u4) is not a type records sort by"},
      {{path("two.npy")}, 65, "is 2-dimensional: records are 1-D"},
      {{path("short.npy")}, 65, "its header says 5 records, its data holds 4"},
      {{path("bool.npy")}, 65, "bool field 'b' holds the byte 2 in record 17"},
      {{path("bool.npy"), "--key", "12:1:bytes"}, 65, "bool field 'b' holds the byte 2"},
      {{path("bool.npy"), "--order", "g,b", "--out", path("b2.npy")}, 65,
       "a['b'] = a['b'] != 0"},
      {{path("plain.npy"), "--record-bytes", "4", "--key", "0:4:u32"}, 65,
       "holds '<u4' elements, not records"},
  };
  const std::vector<error_case> others{
      {{"verify", r, "--records", "--dtype", "u64"}, 64, "--dtype is for keys"},
      {{"verify", r, "--records", "--descending"}, 64, "--descending is for keys"},
      {{"verify", r, "--record-bytes", "0"}, 64, "--record-bytes takes 1 to"},
      {{"verify", r, "--records", "--key", "0:10:byts"}, 64, "unknown type 'byts'"},
      {{"verify", r, "--records", "--key", "95:8:f64"}, 64, "beyond the 100-byte record"},
      {{"verify", r, "--order", "k"}, 64, "--order names the fields"},
      {{"verify", s, "--order", "zz"}, 64, "has no field 'zz'"},
      {{"verify", path("odd.bin"), "--records"}, 65, "not a whole number of 100-byte records"},
      {{"verify", r, "--records", "--original", path("odd.bin")}, 65,
       "not a whole number of 100-byte records"},
      {{"verify", path("u.npy")}, 65, "field 'b' (<U2) is not a type records sort by"},
      {{"verify", r, "--records"}, 1, "out of order"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--record-bytes", "9"}, 64,
       "--record-bytes takes 10 to 1048576, not '9'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--record-bytes", "2Mi"},
       64, "--record-bytes takes 10 to 1048576"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dist", "bucket"}, 64,
       "not 'bucket'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dist", "staggered"}, 64,
       "not 'staggered'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dist", "detdupes"}, 64,
       "not 'detdupes'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dist", "nanmix"}, 64,
       "not 'nanmix'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dist", "normal"}, 64,
       "not 'normal'"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--dtype", "u64"}, 64,
       "--dtype is for keys"},
      {{"gen", "--records", "--count", "9", "--out", path("x.bin"), "--npy"}, 64,
       "--npy is for keys"},
      {{"gen", "--records", "--count", "9", "--out", "-"}, 64, "not standard output"},
      {{"gen", "--record-bytes", "100", "--count", "9", "--out", path("x.bin")}, 64,
       "--record-bytes needs --records"},
  };
  const auto check = [&](const error_case& c, const run_result& got) {
    EXPECT_EQ(got.code, c.code) << got.err << log();
    expect_one_error_line(got);
    EXPECT_NE(got.err.find(c.says), std::string::npos) << got.err;
    EXPECT_EQ(got.out, "");
  };
  for (const error_case& c : sorts) {
    std::string shown = "sort";
    for (const std::string& a : c.args) shown += " " + a;
    SCOPED_TRACE(shown);
    check(c, sort(c.args));
  }
  // The other commands' refusals do not depend on how sort runs: once is enough.
  for (const error_case& c : daemon() ? std::vector<error_case>{} : others) {
    std::string shown;
    for (const std::string& a : c.args) shown += " " + a;
    SCOPED_TRACE(shown);
    check(c, run(c.args));
  }
  EXPECT_TRUE(work_files() == before) << "a file changed or appeared";
}

// ---- verify --records ------------------------------------------------------------------------

// verify --records says ok with the checksum and the duplicate keys; it catches two records
// swapped (the order, with or without --original) and one byte changed outside the key (the
// permutation, only with --original), exiting 1 with one line that says which.
TEST_F(CliRecords, VerifyCatchesASwappedPairAndAChangedByte)
{
  gen(5000, "g.bin");
  run_result r = run({"sort", path("g.bin"), "--record-bytes", "100", "--key", "0:10:bytes",
                      "--out", path("s.bin"), "--local", "--config", config_.string(), "-q"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = verify("s.bin", {"--records", "--original", path("g.bin"), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("{\"ok\":true,\"elements\":5000,\"message\":\"\",\"checksum\":\"", 0), 0U)
      << r.out;
  EXPECT_NE(r.out.find("\"duplicate_keys\":0}"), std::string::npos) << r.out;
  const std::string sorted = slurp(path("s.bin"));

  std::string swapped = sorted;
  std::swap_ranges(swapped.begin() + 1000 * 100, swapped.begin() + 1001 * 100,
                   swapped.begin() + 1001 * 100);
  spit(path("w.bin"), swapped);
  for (const bool original : {false, true}) {
    std::vector<std::string> args{"--records"};
    if (original) args.insert(args.end(), {"--original", path("g.bin")});
    r = verify("w.bin", args);
    EXPECT_EQ(r.code, 1) << r.out;
    expect_one_error_line(r);
    EXPECT_NE(r.err.find("records 1000 and 1001 are out of order"), std::string::npos) << r.err;
  }

  std::string changed = sorted;
  changed[2500 * 100 + 60] ^= 1;  // filler: the order still holds
  spit(path("c.bin"), changed);
  r = verify("c.bin", {"--records"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = verify("c.bin", {"--records", "--original", path("g.bin")});
  EXPECT_EQ(r.code, 1) << r.out;
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("not a permutation"), std::string::npos) << r.err;
  // A record of the same key dropped for another's copy sums differently too.
  std::string copied = sorted;
  std::copy_n(sorted.begin() + 7 * 100, 100, copied.begin() + 8 * 100);
  spit(path("d.bin"), copied);
  r = verify("d.bin", {"--records", "--original", path("g.bin")});
  EXPECT_EQ(r.code, 1) << r.out;
  // A key swapped by a descending --key, against the ascending file.
  r = verify("s.bin", {"--records", "--key", "0:10:bytes:desc"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("records 0 and 1 are out of order"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpusort::service::testing
