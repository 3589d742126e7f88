// Arrays in files (gpusort::file_array): the engine's contract when keys, values or outputs live
// in files read and written with positioned I/O, on every key type, in place and separate, at
// sizes around the I/O block (1 MiB) and the chunk boundaries, at offsets that are not aligned;
// and the errors: a file shorter than its array, a write that fails. Checked by the
// order-plus-fingerprint verifier against the bytes read back from the files. Run twice by ctest
// (default configuration and a tiny budget: see test_budget.hpp).
#include "test_budget.hpp"
#include "tests/support/sanitizer.hpp"
#include "tests/support/small_tmpfs.hpp"

#include "core/generate.hpp"
#include "core/verify.hpp"
#include "pipeline/file_window.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpusort {
namespace {

/// An unnamed temporary file, removed when closed, in /tmp unless told otherwise.
class temp_file {
 public:
  explicit temp_file(const std::string& folder = "/tmp")
  {
    std::string name = folder + "/gpusort-file-array-XXXXXX";
    fd_ = ::mkstemp(name.data());
    if (fd_ >= 0) ::unlink(name.c_str());
  }
  ~temp_file()
  {
    if (fd_ >= 0) ::close(fd_);
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  [[nodiscard]] int fd() const noexcept { return fd_; }

  void write_at(std::uint64_t offset, const void* data, std::uint64_t bytes) const
  {
    ASSERT_EQ(::pwrite(fd_, data, bytes, static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes));
  }
  template <typename T>
  [[nodiscard]] std::vector<T> read_at(std::uint64_t offset, std::uint64_t count) const
  {
    std::vector<T> out(count);
    const ssize_t got = ::pread(fd_, out.data(), count * sizeof(T), static_cast<off_t>(offset));
    EXPECT_EQ(got, static_cast<ssize_t>(count * sizeof(T)));
    return out;
  }

 private:
  int fd_{-1};
};

bool is_tmpfs(const char* folder)
{
  struct statfs info {};
  return ::statfs(folder, &info) == 0 && info.f_type == 0x01021994;
}

/// Where the files of the typed tests live: /tmp, and tmpfs (/dev/shm), where the engine writes
/// outputs through mappings whose pages it makes ahead (pipeline/file_window.hpp).
std::vector<std::string> folders()
{
  std::vector<std::string> f{"/tmp"};
  if (is_tmpfs("/dev/shm") && !is_tmpfs("/tmp")) f.emplace_back("/dev/shm");
  return f;
}

/// Bytes before each array in its file: not a multiple of a page or of the I/O block.
constexpr std::uint64_t lead = 4096 + 24;

template <typename K>
class FileArrayKeys : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(FileArrayKeys, key_types);

/// Under a sanitizer the two largest sizes are left out (TSan: they made these the suite's
/// second longest tests, 100 s each); a block and one past it still cross the I/O block.
template <typename K>
std::vector<std::uint64_t> sizes_for()
{
  constexpr std::uint64_t block = (std::uint64_t{1} << 20) / sizeof(K);
  std::vector<std::uint64_t> sizes{0,
                                   1,
                                   2,
                                   1009,
                                   test::tiny_capacity - 1,
                                   test::tiny_capacity,
                                   test::tiny_capacity + 1,
                                   block - 1,
                                   block,
                                   block + 1};
  if (!test_support::under_sanitizer()) sizes.insert(sizes.end(), {3 * block + 7, 1'000'003});
  return sizes;
}

TYPED_TEST(FileArrayKeys, SortsAFileInPlace)
{
  using K = TypeParam;
  for (const std::string& folder : folders()) {
    SCOPED_TRACE(folder);
    for (const distribution dist : {distribution::uniform, distribution::sorted,
                                    distribution::fewunique, distribution::zero}) {
      for (const order dir : {order::ascending, order::descending}) {
        for (const std::uint64_t n : sizes_for<K>()) {
          SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n));
          std::vector<K> keys(n);
          generate(std::span<K>{keys}, dist, n + 3);
          const fingerprint before = fingerprint_of(key_array{keys.data(), n, dtype_of_v<K>});
          const temp_file file{folder};
          const std::vector<char> marker(lead, 'x');
          file.write_at(0, marker.data(), lead);
          file.write_at(lead, keys.data(), n * sizeof(K));
          file.write_at(lead + n * sizeof(K), marker.data(), 16);  // bytes after the array
          {
            const file_array in{file.fd(), lead, n * sizeof(K), "keys"};
            engine{test::config_for(n, sizeof(K))}.sort(
                sort_job{.keys = {in.data(), n, dtype_of_v<K>}}, sort_options{.direction = dir});
          }
          std::vector<K> sorted = file.read_at<K>(lead, n);
          const verify_result v =
              verify(key_array{sorted.data(), n, dtype_of_v<K>}, std::nullopt, dir, before);
          ASSERT_TRUE(v.ok) << v.message;
          EXPECT_EQ(file.read_at<char>(0, lead), marker) << "bytes before the array changed";
          EXPECT_EQ(file.read_at<char>(lead + n * sizeof(K), 16),
                    std::vector<char>(marker.begin(), marker.begin() + 16))
              << "bytes after the array changed";
        }
      }
    }
  }
}

TYPED_TEST(FileArrayKeys, FileToFileAndMemoryToFileLeaveTheInputAlone)
{
  using K = TypeParam;
  for (const std::string& folder : folders()) {
    SCOPED_TRACE(folder);
    for (const std::uint64_t n : sizes_for<K>()) {
      SCOPED_TRACE("n=" + std::to_string(n));
      std::vector<K> keys(n);
      generate(std::span<K>{keys}, distribution::uniform, n * 7 + 1);
      const key_array view{keys.data(), n, dtype_of_v<K>};
      const fingerprint before = fingerprint_of(view);
      const temp_file input{folder}, output{folder};
      input.write_at(lead, keys.data(), n * sizeof(K));
      {
        const file_array in{input.fd(), lead, n * sizeof(K), "input"};
        const file_array out{output.fd(), 0, n * sizeof(K), "output"};
        engine{test::config_for(n, sizeof(K))}.sort(
            sort_job{.keys = {in.data(), n, dtype_of_v<K>}, .keys_out = out.data()});
      }
      const std::vector<K> left = input.read_at<K>(lead, n);
      EXPECT_TRUE(test::same_bytes(left, keys));
      std::vector<K> sorted = output.read_at<K>(0, n);
      verify_result v =
          verify(key_array{sorted.data(), n, dtype_of_v<K>}, std::nullopt, order::ascending, before);
      ASSERT_TRUE(v.ok) << "file to file: " << v.message;

      // Memory in, file out; then file in, memory out.
      const temp_file second{folder};
      {
        const file_array out{second.fd(), 8, n * sizeof(K), "output"};
        engine{test::config_for(n, sizeof(K))}.sort(sort_job{.keys = view, .keys_out = out.data()});
      }
      sorted = second.read_at<K>(8, n);
      v = verify(key_array{sorted.data(), n, dtype_of_v<K>}, std::nullopt, order::ascending, before);
      ASSERT_TRUE(v.ok) << "memory to file: " << v.message;
      std::vector<K> in_memory(n);
      {
        const file_array in{input.fd(), lead, n * sizeof(K), "input"};
        engine{test::config_for(n, sizeof(K))}.sort(
            sort_job{.keys = {in.data(), n, dtype_of_v<K>}, .keys_out = in_memory.data()});
      }
      v = verify(key_array{in_memory.data(), n, dtype_of_v<K>}, std::nullopt, order::ascending,
                 before);
      ASSERT_TRUE(v.ok) << "file to memory: " << v.message;
    }
  }
}

TYPED_TEST(FileArrayKeys, ValuesInFilesTravelWithTheirKeys)
{
  using K = TypeParam;
  using V = std::uint64_t;
  for (const std::string& folder : folders()) {
    SCOPED_TRACE(folder);
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, test::tiny_capacity + 1,
                                  std::uint64_t{300'007}}) {
      for (const bool separate : {false, true}) {
        SCOPED_TRACE("n=" + std::to_string(n) + (separate ? " separate" : " in place"));
        std::vector<K> keys(n);
        std::vector<V> values(n);
        generate(std::span<K>{keys}, distribution::fewunique, n + 5);
        generate_values(value_array{values.data(), n, sizeof(V)}, 17);
        const fingerprint before = fingerprint_of(key_array{keys.data(), n, dtype_of_v<K>},
                                                  value_array{values.data(), n, sizeof(V)});
        // Keys and values in one file, one after the other, as a column store would keep them.
        const temp_file file{folder}, out_file{folder};
        const std::uint64_t values_at = lead + n * sizeof(K);
        file.write_at(lead, keys.data(), n * sizeof(K));
        file.write_at(values_at, values.data(), n * sizeof(V));
        {
          const file_array k{file.fd(), lead, n * sizeof(K), "keys"};
          const file_array v{file.fd(), values_at, n * sizeof(V), "values"};
          const file_array ko{out_file.fd(), 0, n * sizeof(K), "keys out"};
          const file_array vo{out_file.fd(), n * sizeof(K), n * sizeof(V), "values out"};
          sort_job job{.keys = {k.data(), n, dtype_of_v<K>}, .values = value_array{v.data(), n, 8}};
          if (separate) {
            job.keys_out = ko.data();
            job.values_out = vo.data();
          }
          engine{test::config_for(n, sizeof(K) + sizeof(V))}.sort(job);
        }
        const temp_file& result = separate ? out_file : file;
        std::vector<K> sorted_keys = result.read_at<K>(separate ? 0 : lead, n);
        std::vector<V> sorted_values = result.read_at<V>(separate ? n * sizeof(K) : values_at, n);
        const verify_result v = verify(key_array{sorted_keys.data(), n, dtype_of_v<K>},
                                       value_array{sorted_values.data(), n, sizeof(V)},
                                       order::ascending, before);
        ASSERT_TRUE(v.ok) << v.message;
      }
    }
  }
}

TEST(FileArray, AFileShorterThanItsArrayIsAnIoErrorAndTheOutputIsUntouched)
{
  const std::uint64_t n = 300'000;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 5);
  const temp_file input, output;
  input.write_at(0, keys.data(), (n - 1000) * sizeof(std::uint64_t));  // 1000 keys short
  const std::vector<char> untouched(n * sizeof(std::uint64_t), 'u');
  output.write_at(0, untouched.data(), untouched.size());
  const file_array in{input.fd(), 0, n * sizeof(std::uint64_t), "short.bin"};
  const file_array out{output.fd(), 0, n * sizeof(std::uint64_t), "out.bin"};
  try {
    engine{test::config_for(n, 8)}.sort(
        sort_job{.keys = {in.data(), n, dtype::u64}, .keys_out = out.data()});
    FAIL() << "no error for a file shorter than its array";
  } catch (const io_error& e) {
    EXPECT_NE(std::string{e.what()}.find("short.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("shrank"), std::string::npos) << e.what();
  }
  // The input is read whole (the CPU engine) or in round 1 (GPUs) before any output is written.
  EXPECT_EQ(output.read_at<char>(0, untouched.size()), untouched);
}

/// `sort` must end in an io_error that names the output `name` and the lack of space.
template <typename Sort>
void expect_no_space(const std::string& name, Sort&& sort)
{
  try {
    sort();
    ADD_FAILURE() << "no error for an output with no room: " << name;
  } catch (const io_error& e) {
    EXPECT_NE(std::string{e.what()}.find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
}

TEST(FileArray, AWriteThatFailsIsAnIoErrorNamingTheFile)
{
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) GTEST_SKIP() << "no /dev/full here";
  const std::uint64_t n = 100'000;
  std::vector<std::uint32_t> keys(n);
  generate(std::span<std::uint32_t>{keys}, distribution::uniform, 9);
  const std::vector<std::uint32_t> original = keys;
  {
    const file_array out{full, 0, n * sizeof(std::uint32_t), "full.bin"};
    expect_no_space("full.bin", [&] {
      engine{test::config_for(n, 4)}.sort(
          sort_job{.keys = {keys.data(), n, dtype::u32}, .keys_out = out.data()});
    });
  }
  ::close(full);
  EXPECT_EQ(keys, original) << "a separate output's input must stay as it was";
}

TEST(FileArray, OnlyReadWriteOutputsInTmpfsAreMapped)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  const std::uint64_t bytes = 3 * (std::uint64_t{1} << 20) + 8;
  const temp_file shm{"/dev/shm"};
  const file_array at_start{shm.fd(), lead, bytes, "shm"};
  {
    const detail::output_mappings mapped{{at_start.data(), bytes}};
    EXPECT_EQ(mapped.size(), 1U);
    // Written through the mapping: the bytes land in the file at the window's offset.
    std::vector<std::uint64_t> data(bytes / 8);
    for (std::uint64_t i = 0; i < data.size(); ++i) data[i] = i * 0x9e3779b97f4a7c15ULL;
    detail::host_write(at_start.data(), data.data(), bytes);
    EXPECT_EQ(shm.read_at<std::uint64_t>(lead, data.size()), data);
    // A second mapping of a window already mapped, and an address inside a window, are not.
    const detail::output_mappings again{{at_start.data(), bytes},
                                        {static_cast<char*>(at_start.data()) + 8, 8}};
    EXPECT_EQ(again.size(), 0U);
  }
  // Not open for reading and writing: a shared mapping cannot write it; pwrite does.
  const std::string path = "/dev/shm/gpusort-file-array-wronly-" + std::to_string(::getpid());
  const int wronly = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(wronly, 0);
  ::unlink(path.c_str());
  {
    const file_array out{wronly, 0, 64, "wronly"};
    const detail::output_mappings mapped{{out.data(), 64}};
    EXPECT_EQ(mapped.size(), 0U);
  }
  ::close(wronly);
  if (!is_tmpfs("/tmp")) {
    const temp_file disk;
    const file_array out{disk.fd(), 0, 64, "disk"};
    const detail::output_mappings mapped{{out.data(), 64}};
    EXPECT_EQ(mapped.size(), 0U);
  }
}

TEST(FileArray, APreparedOutputIsMadeAheadAndTheJobWritesThroughItsMapping)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  const std::uint64_t n = 300'007;  // not a whole number of pages or fallocate steps
  const temp_file shm{"/dev/shm"};
  ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(lead + n * 8)), 0);
  file_array out{shm.fd(), lead, n * 8, "prepared.bin"};
  ASSERT_TRUE(out.prepare_output());
  // Prepared once: a second call, or a job's own mapping, finds the window mapped.
  EXPECT_FALSE(out.prepare_output());
  {
    const detail::output_mappings mapped{{out.data(), n * 8}};
    EXPECT_EQ(mapped.size(), 0U);
  }
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 11);
  std::vector<std::uint64_t> expect = keys;
  std::sort(expect.begin(), expect.end());
  for (const bool tiny : {false, true}) {  // one round, then two through a tiny budget
    engine{tiny ? test::config_for(n, 8) : config{}}.sort(
        sort_job{.keys = {keys.data(), n, dtype::u64}, .keys_out = out.data()});
    EXPECT_EQ(shm.read_at<std::uint64_t>(lead, n), expect) << (tiny ? "tiny budget" : "default");
  }
  // The pages were made (allocated blocks cover the window), and the prepared mapping still
  // serves a write after the jobs ended.
  struct stat st {};
  ASSERT_EQ(::fstat(shm.fd(), &st), 0);
  EXPECT_GE(static_cast<std::uint64_t>(st.st_blocks) * 512, n * 8);
  const std::vector<std::uint64_t> ones(n, 1);
  detail::host_write(out.data(), ones.data(), n * 8);
  EXPECT_EQ(shm.read_at<std::uint64_t>(lead, n), ones);

  // Not tmpfs, or not open for reading and writing: nothing to prepare, and the job writes.
  const std::string path = "/dev/shm/gpusort-file-array-prep-" + std::to_string(::getpid());
  const int wronly = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(wronly, 0);
  ::unlink(path.c_str());
  {
    file_array w{wronly, 0, 64, "wronly"};
    EXPECT_FALSE(w.prepare_output());
  }
  ::close(wronly);
  if (!is_tmpfs("/tmp")) {
    const temp_file disk;
    file_array d{disk.fd(), 0, 64, "disk"};
    EXPECT_FALSE(d.prepare_output());
  }
  // A prepared output given up before any job: its page maker stops and nothing is left.
  const temp_file unused{"/dev/shm"};
  {
    file_array u{unused.fd(), 0, std::uint64_t{64} << 20, "unused"};
    EXPECT_TRUE(u.prepare_output());
  }
}

/// Whether MADV_COLLAPSE makes 2 MiB folios of a tmpfs file here (Linux 6.1 and later, shmem
/// THP not "deny"): the outcome the page makers' huge path depends on.
bool tmpfs_collapses()
{
  constexpr std::uint64_t huge = std::uint64_t{2} << 20;
  const temp_file probe{"/dev/shm"};
  if (::ftruncate(probe.fd(), static_cast<off_t>(huge)) != 0) return false;
  void* room = ::mmap(nullptr, 2 * huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (room == MAP_FAILED) return false;
  const auto aligned = (reinterpret_cast<std::uintptr_t>(room) + huge - 1) / huge * huge;
  char* p = static_cast<char*>(::mmap(reinterpret_cast<void*>(aligned), huge,
                                      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                      probe.fd(), 0));
  bool ok = false;
  if (p != MAP_FAILED) {
    p[0] = 0;
    ok = ::madvise(p, huge, 25 /* MADV_COLLAPSE */) == 0;
  }
  ::munmap(room, 2 * huge);
  return ok;
}

/// New tmpfs outputs get their pages from threads that make whole 2 MiB pages of the file as
/// huge folios and the rest (and everything, with huge pages off) by fallocate: whatever the
/// window's place in the file and its length, the bytes before and after it stay as they were,
/// bytes inside it that existed stay, the rest reads as zeros, the file keeps its size, and a
/// write through the mapping lands. With huge pages on, some bytes must have been made huge
/// wherever the kernel can (probed first).
TEST(FileArray, NewTmpfsOutputsAreMadeOfHugePagesWhereTheKernelCanAndKeepEveryByte)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  constexpr std::uint64_t huge = std::uint64_t{2} << 20;
  const bool collapses = tmpfs_collapses();
  const detail::tmpfs_page_making before = detail::current_tmpfs_page_making();
  struct mode {
    bool huge;
    unsigned makers;
  };
  for (const mode m : {mode{true, 1}, mode{true, 3}, mode{false, 1}}) {
    detail::set_tmpfs_page_making({.huge = m.huge, .makers = m.makers});
    // Offsets: on a huge page, an .npy header's, a page before a huge page's end. Lengths: less
    // than a huge page, a huge page and a byte (whole huge pages for an aligned window only),
    // and more than one 16 MiB step of whole huge pages (8 of them).
    for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{128}, huge - 4096}) {
      for (const std::uint64_t bytes : {std::uint64_t{4096 + 8}, huge + 1, 9 * huge + 24}) {
        SCOPED_TRACE("huge " + std::to_string(m.huge) + ", makers " + std::to_string(m.makers) +
                     ", offset " + std::to_string(offset) + ", bytes " + std::to_string(bytes));
        const temp_file shm{"/dev/shm"};
        const std::uint64_t trailer = 64, size = offset + bytes + trailer;
        ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(size)), 0);
        const std::vector<char> header(offset, 'h'), tail(trailer, 't');
        shm.write_at(0, header.data(), offset);
        shm.write_at(offset + bytes, tail.data(), trailer);
        // A few bytes that exist inside the window before its pages are made: kept.
        const std::uint64_t inside = bytes / 2 / 4096 * 4096 + 7;
        shm.write_at(offset + inside, "kept", 4);
        const std::uint64_t huge_before = detail::tmpfs_huge_bytes_made();
        {
          file_array out{shm.fd(), offset, bytes, "huge.bin"};
          ASSERT_TRUE(out.prepare_output());
          // One byte at the window's end waits until every page is made.
          detail::host_write(static_cast<char*>(out.data()) + bytes - 1, "z", 1);
        }
        std::vector<char> want(size, 0);
        std::copy(header.begin(), header.end(), want.begin());
        std::copy(tail.begin(), tail.end(),
                  want.begin() + static_cast<std::ptrdiff_t>(offset + bytes));
        std::memcpy(want.data() + offset + inside, "kept", 4);
        want[offset + bytes - 1] = 'z';
        EXPECT_EQ(shm.read_at<char>(0, size), want);
        struct stat st {};
        ASSERT_EQ(::fstat(shm.fd(), &st), 0);
        EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), size);
        EXPECT_GE(static_cast<std::uint64_t>(st.st_blocks) * 512, bytes);
        // The whole 2 MiB pages of the file inside the window: the most that can be huge.
        const std::uint64_t first = (offset + huge - 1) / huge * huge;
        const std::uint64_t last = (offset + bytes) / huge * huge;
        const std::uint64_t whole = last > first ? last - first : 0;
        const std::uint64_t made_huge = detail::tmpfs_huge_bytes_made() - huge_before;
        EXPECT_LE(made_huge, whole);
        if (!m.huge) {
          EXPECT_EQ(made_huge, 0U);
        } else if (collapses && whole > 0) {
          EXPECT_GT(made_huge, 0U);
        }
        // And a whole write through a new mapping of the now existing pages.
        std::vector<char> data(bytes);
        for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<char>('a' + i % 26);
        {
          file_array out{shm.fd(), offset, bytes, "huge.bin"};
          const detail::output_mappings mapped{{out.data(), bytes}};
          ASSERT_EQ(mapped.size(), 1U);
          detail::host_write(out.data(), data.data(), bytes);
        }
        EXPECT_EQ(shm.read_at<char>(offset, bytes), data);
        EXPECT_EQ(shm.read_at<char>(offset + bytes, trailer), tail);
      }
    }
  }
  detail::set_tmpfs_page_making(before);
}

/// A page_locker that records what it is asked (and fails from its `fail_from`th lock on),
/// standing in for the GPU's cudaHostRegister, so that CI checks what gets locked and when.
class recording_locker final : public detail::page_locker {
 public:
  explicit recording_locker(std::size_t fail_from = SIZE_MAX) : fail_from_{fail_from} {}
  bool lock(void* data, std::size_t bytes) noexcept override
  {
    const std::lock_guard lock{mutex_};
    if (++calls_ >= fail_from_) return false;
    // The unit's pages must exist and be writable: a copy engine would write them now.
    static_cast<char*>(data)[0] = 0;
    static_cast<char*>(data)[bytes - 1] = 0;
    held_.emplace(data, bytes);
    ++locks_;
    return true;
  }
  void unlock(void* data, std::size_t bytes) noexcept override
  {
    const std::lock_guard lock{mutex_};
    const auto it = held_.find(data);
    if (it == held_.end() || it->second != bytes) {
      bad_unlocks_ = true;
      return;
    }
    held_.erase(it);
  }
  std::size_t locks()
  {
    const std::lock_guard lock{mutex_};
    return locks_;
  }
  std::size_t held()
  {
    const std::lock_guard lock{mutex_};
    return held_.size();
  }
  std::uint64_t held_bytes()
  {
    const std::lock_guard lock{mutex_};
    std::uint64_t sum = 0;
    for (const auto& [data, bytes] : held_) sum += bytes;
    return sum;
  }
  bool bad_unlocks()
  {
    const std::lock_guard lock{mutex_};
    return bad_unlocks_;
  }

 private:
  std::mutex mutex_;
  std::size_t fail_from_;
  std::size_t calls_{};
  std::size_t locks_{};
  bool bad_unlocks_{};
  std::map<void*, std::size_t> held_;
};

/// Writes [at, at + bytes) of an output window the way the GPU's copy-out does: the locked runs
/// straight into the mapping (as a copy engine would), the rest through host_write. Returns the
/// bytes written directly.
std::uint64_t write_like_the_copy_engines(char* window, std::uint64_t at, const char* src,
                                          std::uint64_t bytes)
{
  std::uint64_t direct = 0;
  for (std::uint64_t done = 0; done < bytes;) {
    const detail::locked_run run = detail::locked_output_run(window + at + done, bytes - done);
    EXPECT_GT(run.bytes, 0U);
    if (run.bytes == 0) break;
    if (run.mapped != nullptr) {
      std::memcpy(run.mapped, src + done, run.bytes);
      direct += run.bytes;
    } else {
      detail::host_write(window + at + done, src + done, run.bytes);
    }
    done += run.bytes;
  }
  return direct;
}

/// With a locker (the GPU engine's), a new tmpfs output's pages are locked in 64 MiB units once
/// the makers made them as 2 MiB pages, never the part before the file's first huge page; the
/// copy-out writes locked runs straight into the mapping, each within one lock, and the rest
/// through host_write; every byte lands; each lock is undone once, after the job. A locker that
/// fails stops the locking there and the copies stage. With 4 KiB pages nothing is locked.
TEST(FileArray, ATmpfsOutputsHugePagesAreLockedForTheCopyEnginesUnitByUnit)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  if (!tmpfs_collapses()) GTEST_SKIP() << "no 2 MiB tmpfs pages here (MADV_COLLAPSE)";
  constexpr std::uint64_t mib = std::uint64_t{1} << 20, unit = 64 * mib;
  const detail::tmpfs_page_making before = detail::current_tmpfs_page_making();
  struct variant {
    bool huge;
    std::size_t fail_from;
    std::uint64_t offset;
    bool prepared;  ///< made ahead by file_array::prepare_output, as the CLI does
  };
  for (const variant v : {variant{true, SIZE_MAX, 128, false}, variant{true, SIZE_MAX, 0, true},
                          variant{true, 2, 4096, false}, variant{false, SIZE_MAX, 0, false}}) {
    // Never giving up on huge pages: a slow machine's makers would otherwise leave units in
    // 4 KiB pages, which are not locked (what this test counts).
    detail::set_tmpfs_page_making({.huge = v.huge, .makers = 3, .give_up_below_gbps = 0});
    // Two whole units and a part of a third after the head, and a tail past the last huge page.
    const std::uint64_t bytes = 2 * unit + 6 * mib + 5000;
    SCOPED_TRACE("huge " + std::to_string(v.huge) + ", failing from lock " +
                 std::to_string(v.fail_from) + ", offset " + std::to_string(v.offset) +
                 (v.prepared ? ", prepared" : ""));
    const temp_file shm{"/dev/shm"};
    ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(v.offset + bytes)), 0);
    std::vector<char> data(bytes);
    for (std::uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<char>('a' + (i * 7) % 26);
    const auto locker = std::make_shared<recording_locker>(v.fail_from);
    const std::uint64_t locked_before = detail::tmpfs_locked_bytes();
    std::uint64_t direct = 0;
    {
      file_array out{shm.fd(), v.offset, bytes, "locked.bin"};
      if (v.prepared) {
        ASSERT_TRUE(out.prepare_output());
      }
      char* const window = static_cast<char*>(out.data());
      {
        const detail::output_mappings mapped{{{window, bytes}}, locker};
        // Wait (bounded) for the locking to settle: every unit it can lock, locked, and known to
        // the mapping as locked (it marks a unit just after the locker returns: under a
        // sanitizer's slowdown the copies below once started in between, and the first of them
        // was staged).
        const std::size_t expect = !v.huge ? 0 : v.fail_from == SIZE_MAX ? 3 : v.fail_from - 1;
        for (int i = 0; i < 2000 && (locker->locks() < expect ||
                                     detail::tmpfs_locked_bytes() - locked_before <
                                         locker->held_bytes());
             ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds{5});
        EXPECT_EQ(locker->locks(), expect);
        // Pieces of odd sizes, as chunks are, each split at the locks' edges.
        for (std::uint64_t at = 0; at < bytes;) {
          const std::uint64_t n = std::min(bytes - at, 37 * mib + 123);
          direct += write_like_the_copy_engines(window, at, data.data() + at, n);
          at += n;
        }
        EXPECT_NO_THROW(mapped.check_sizes());
        EXPECT_EQ(detail::tmpfs_locked_bytes() - locked_before, direct);
      }
      if (v.huge && v.fail_from == SIZE_MAX) {
        // Everything but the head and the tail past the last whole huge page went directly.
        const std::uint64_t head = (2 * mib - v.offset % (2 * mib)) % (2 * mib);
        EXPECT_EQ(direct, (bytes - head) / (2 * mib) * (2 * mib));
      } else if (v.huge) {
        EXPECT_EQ(direct, unit);  // the first unit alone
      } else {
        EXPECT_EQ(direct, 0U);
      }
    }
    detail::wait_for_output_releases();
    EXPECT_EQ(locker->held(), 0U) << "a lock was never undone";
    EXPECT_FALSE(locker->bad_unlocks()) << "an unlock of something never locked";
    EXPECT_EQ(shm.read_at<char>(v.offset, bytes), data);
  }
  detail::set_tmpfs_page_making(before);
}

/// A copy engine's write raises no SIGBUS when another process cuts the file: check_sizes, run
/// after the job's last write, makes it the same io_error as a staged write's.
TEST(FileArray, ALockedOutputThatShrinksIsAnIoErrorAfterTheJob)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  if (!tmpfs_collapses()) GTEST_SKIP() << "no 2 MiB tmpfs pages here (MADV_COLLAPSE)";
  const std::uint64_t bytes = std::uint64_t{64} << 20;
  const temp_file shm{"/dev/shm"};
  ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(bytes)), 0);
  const auto locker = std::make_shared<recording_locker>();
  const detail::tmpfs_page_making before = detail::set_tmpfs_page_making(
      {.huge = true, .makers = 2, .give_up_below_gbps = 0});
  {
    const file_array out{shm.fd(), 0, bytes, "cut.bin"};
    const detail::output_mappings mapped{{{out.data(), bytes}}, locker};
    for (int i = 0; i < 2000 && locker->locks() < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    ASSERT_EQ(locker->locks(), 1U);
    ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(bytes / 2)), 0);  // another process
    try {
      mapped.check_sizes();
      ADD_FAILURE() << "no error for a locked output that shrank";
    } catch (const io_error& e) {
      EXPECT_NE(std::string{e.what()}.find("cut.bin"), std::string::npos) << e.what();
      EXPECT_NE(std::string{e.what()}.find("shrank"), std::string::npos) << e.what();
    }
  }
  detail::wait_for_output_releases();
  EXPECT_EQ(locker->held(), 0U);
  detail::set_tmpfs_page_making(before);
}

TEST(FileArray, AMappedOutputThatShrinksIsAnIoErrorNotASignal)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  const std::uint64_t bytes = 4 * (std::uint64_t{1} << 20);
  // Sized first or not: its pages made as two 2 MiB pages, or by fallocate past its end.
  for (const bool sized : {true, false}) {
    SCOPED_TRACE(sized ? "a file of the window's size" : "an empty file");
    const temp_file shm{"/dev/shm"};
    if (sized) {
      ASSERT_EQ(::ftruncate(shm.fd(), static_cast<off_t>(bytes)), 0);
    }
    const file_array out{shm.fd(), 0, bytes, "shrinking.bin"};
    const std::vector<char> data(bytes, 'd');
    const detail::output_mappings mapped{{out.data(), bytes}};
    ASSERT_EQ(mapped.size(), 1U);
    detail::host_write(out.data(), data.data(), bytes);  // the pages exist from here on
    ASSERT_EQ(::ftruncate(shm.fd(), 0), 0);              // another process cuts the file
    try {
      detail::host_write(out.data(), data.data(), bytes);
      ADD_FAILURE() << "no error for an output that shrank";
    } catch (const io_error& e) {
      EXPECT_NE(std::string{e.what()}.find("shrinking.bin"), std::string::npos) << e.what();
      EXPECT_NE(std::string{e.what()}.find("shrank"), std::string::npos) << e.what();
    }
  }
  // Any other SIGBUS still does what it did before the engine's handler came. The child is a
  // fresh run of this test (threadsafe style): OpenMP's threads do not survive a bare fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(::raise(SIGBUS), ::testing::KilledBySignal(SIGBUS), "");
}

/// A full tmpfs (a real one: 8 MiB, and an output of 16 MiB) is an io_error that names the
/// output and the kernel's reason, with its pages made either way, and never a SIGBUS; the
/// input is left as it was.
TEST(FileArray, AFullTmpfsIsAnIoErrorWhicheverWayItsPagesAreMade)
{
  const test_support::small_tmpfs fs{"8m"};
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
  const std::uint64_t n = std::uint64_t{2} << 20;  // 16 MiB of u64 keys
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 8);
  const std::vector<std::uint64_t> original = keys;
  const detail::tmpfs_page_making before = detail::current_tmpfs_page_making();
  for (const bool huge : {true, false}) {
    SCOPED_TRACE(huge ? "2 MiB pages" : "4 KiB pages");
    detail::set_tmpfs_page_making({.huge = huge, .makers = 2});
    const temp_file out_file{fs.path()};
    ASSERT_GE(out_file.fd(), 0);
    ASSERT_EQ(::ftruncate(out_file.fd(), static_cast<off_t>(n * 8)), 0);  // sparse: it fits
    const file_array out{out_file.fd(), 0, n * 8, "full.bin"};
    expect_no_space("full.bin", [&] {
      engine{test::config_for(n, 8)}.sort(
          sort_job{.keys = {keys.data(), n, dtype::u64}, .keys_out = out.data()});
    });
    EXPECT_EQ(keys, original) << "a separate output's input changed";
  }
  detail::set_tmpfs_page_making(before);
}

/// In a death test's child: a sort into tmpfs under a file size limit, which makes fallocate
/// fail (EFBIG) as a full tmpfs would (ENOSPC). Exits 3 when the engine said so with an io_error
/// naming the file and left the input as it was.
[[noreturn]] void sort_into_a_tmpfs_that_cannot_grow()
{
  const std::uint64_t n = 1'000'000;
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{.rlim_cur = 1 << 20, .rlim_max = 1 << 20};
  ::setrlimit(RLIMIT_FSIZE, &limit);
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 3);
  const std::vector<std::uint64_t> original = keys;
  const temp_file shm{"/dev/shm"};
  const file_array out{shm.fd(), 0, n * 8, "limited.bin"};
  try {
    engine{test::config_for(n, 8)}.sort(
        sort_job{.keys = {keys.data(), n, dtype::u64}, .keys_out = out.data()});
  } catch (const io_error& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "%s\n", e.what());
    const bool says = what.find("limited.bin") != std::string::npos &&
                      what.find(std::strerror(EFBIG)) != std::string::npos;
    std::exit(says && keys == original ? 3 : 4);
  }
  std::exit(5);
}

TEST(FileArray, AnOutputWhosePagesCannotBeMadeIsAnIoErrorAndNothingElse)
{
  if (!is_tmpfs("/dev/shm")) GTEST_SKIP() << "no tmpfs at /dev/shm";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // OpenMP's threads do not survive a fork
  EXPECT_EXIT(sort_into_a_tmpfs_that_cannot_grow(), ::testing::ExitedWithCode(3), "limited.bin");
}

TEST(FileArray, RejectsABadDescriptorAndARangePastAnyFile)
{
  EXPECT_THROW(file_array(-1, 0, 8), invalid_argument);
  const temp_file file;
  EXPECT_THROW(file_array(file.fd(), std::uint64_t{1} << 63, 8), invalid_argument);
  const file_array empty{file.fd(), 0, 0};
  EXPECT_NE(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0U);
  file_array moved = file_array{file.fd(), 0, 16};
  void* at = moved.data();
  file_array target{file.fd(), 0, 8};
  target = std::move(moved);
  EXPECT_EQ(target.data(), at);
}

// ---- piece_mover: the GPU staging's way of moving files (pipeline/file_window.hpp) ----------

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

/// The copies a GPU would make from and into the ring, made only when the mover says the
/// buffer's turn has come (reusable: the copy that read the buffer completes; filled: the copy
/// into it lands), so that a mover that touched a buffer too early moves wrong bytes.
class fake_copies {
 public:
  fake_copies(std::uint64_t piece_bytes, std::size_t ring)
      : memory_(ring, std::vector<char>(piece_bytes))
  {
    for (auto& b : memory_) buffers_.push_back(b.data());
  }
  [[nodiscard]] const std::vector<char*>& buffers() const noexcept { return buffers_; }

  /// Reading: the copy out of buffer i into `to` at `offset` is queued.
  void queue(std::size_t i, std::uint64_t offset, std::uint64_t bytes, char* to)
  {
    const std::lock_guard lock{mutex_};
    EXPECT_FALSE(pending_.contains(i)) << "buffer " << i << " handed on twice";
    pending_[i] = {offset, bytes, to, nullptr};
    if (offset != expected_offset_) ADD_FAILURE() << "piece at " << offset << " out of order";
    expected_offset_ = offset + bytes;
  }
  /// Writing: the copy of `from` at `offset` into buffer i is queued.
  void queue_fill(std::size_t i, std::uint64_t offset, std::uint64_t bytes, const char* from)
  {
    const std::lock_guard lock{mutex_};
    EXPECT_FALSE(pending_.contains(i)) << "buffer " << i << " filled twice";
    pending_[i] = {offset, bytes, nullptr, from};
  }
  /// The queued copy of buffer i (if any) completes now.
  void complete(std::size_t i)
  {
    const std::lock_guard lock{mutex_};
    const auto it = pending_.find(i);
    if (it == pending_.end()) return;
    const copy& c = it->second;
    if (c.to != nullptr) std::memcpy(c.to + c.offset, buffers_[i], c.bytes);
    if (c.from != nullptr) std::memcpy(buffers_[i], c.from + c.offset, c.bytes);
    pending_.erase(it);
  }
  void complete_all()
  {
    for (std::size_t i = 0; i < buffers_.size(); ++i) complete(i);
  }

 private:
  struct copy {
    std::uint64_t offset, bytes;
    char* to;
    const char* from;
  };
  std::vector<std::vector<char>> memory_;
  std::vector<char*> buffers_;
  std::mutex mutex_;
  std::map<std::size_t, copy> pending_;
  std::uint64_t expected_offset_{};
};

std::vector<char> pattern(std::uint64_t bytes, std::uint64_t seed)
{
  std::vector<std::uint64_t> words((bytes + 7) / 8);
  generate(std::span<std::uint64_t>{words}, distribution::uniform, seed);
  std::vector<char> out(bytes);
  if (bytes > 0) std::memcpy(out.data(), words.data(), bytes);
  return out;
}

struct mover_case {
  std::uint64_t bytes, piece_bytes;
  std::size_t ring;
  unsigned threads;
};

/// Sizes around the 1 MiB block and the pieces, pieces that are and are not whole blocks, a
/// ring of one (every piece waits for the last) and of several. Under a sanitizer, the pieces
/// smaller than a block and of one and a half blocks only.
std::vector<mover_case> mover_cases()
{
  std::vector<std::uint64_t> pieces{64 * std::uint64_t{1024}, 3 * mib / 2};
  if (!test_support::under_sanitizer()) pieces.insert(pieces.end(), {mib, 4 * mib});
  std::vector<mover_case> cases;
  for (const std::uint64_t piece : pieces)
    for (const std::uint64_t bytes : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4099},
                                      mib - 1, mib, mib + 1, 7 * mib + 4093})
      for (const std::size_t ring : {std::size_t{1}, std::size_t{3}})
        cases.push_back({bytes, piece, ring, ring == 1 ? 1U : 4U});
  return cases;
}

TEST(PieceMover, ReadsEveryPieceInOrderAndNeverIntoABufferStillInUse)
{
  for (const std::string& folder : folders()) {
    for (const mover_case& c : mover_cases()) {
      SCOPED_TRACE(folder + ": " + std::to_string(c.bytes) + " bytes, pieces of " +
                   std::to_string(c.piece_bytes) + ", ring " + std::to_string(c.ring));
      const temp_file file{folder};
      const std::vector<char> bytes = pattern(c.bytes, c.bytes + c.piece_bytes);
      file.write_at(lead, bytes.data(), bytes.size());
      const file_array in{file.fd(), lead, c.bytes, "in.bin"};
      fake_copies gpu{c.piece_bytes, c.ring};
      std::vector<char> out(c.bytes, 'x');
      detail::piece_mover mover{c.threads};
      mover.read(
          in.data(), c.bytes, {.buffers = &gpu.buffers(), .piece_bytes = c.piece_bytes},
          [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
            gpu.queue(i, off, len, out.data());
          },
          [&](std::size_t i) { gpu.complete(i); });
      gpu.complete_all();
      EXPECT_TRUE(out == bytes);
    }
  }
}

TEST(PieceMover, WritesEveryPieceOnlyOnceItsBytesAreIn)
{
  for (const std::string& folder : folders()) {
    for (const mover_case& c : mover_cases()) {
      SCOPED_TRACE(folder + ": " + std::to_string(c.bytes) + " bytes, pieces of " +
                   std::to_string(c.piece_bytes) + ", ring " + std::to_string(c.ring));
      const temp_file file{folder};
      const std::vector<char> bytes = pattern(c.bytes, c.bytes + c.piece_bytes + 1);
      ASSERT_EQ(::ftruncate(file.fd(), static_cast<off_t>(lead + c.bytes)), 0);
      const file_array out{file.fd(), lead, c.bytes, "out.bin"};
      {
        // In tmpfs the engine writes outputs through a mapping: the mover writes either way.
        const detail::output_mappings mapped{{out.data(), c.bytes}};
        fake_copies gpu{c.piece_bytes, c.ring};
        detail::piece_mover mover{c.threads};
        mover.write(
            out.data(), c.bytes, {.buffers = &gpu.buffers(), .piece_bytes = c.piece_bytes,
                                  .first = 1 % c.ring},
            [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
              gpu.queue_fill(i, off, len, bytes.data());
            },
            [&](std::size_t i) { gpu.complete(i); });
      }
      EXPECT_TRUE(file.read_at<char>(lead, c.bytes) == bytes);
    }
  }
}

/// gather: runs of memory and of a file window, one after another as one range, as round 2
/// gathers a task's slices of a pageable round-1 buffer: empty runs, runs shorter than a block
/// and many to a block, runs across blocks and pieces, every piece handed on in order and
/// never read into while in use; a run past its file's end is the file's io_error.
TEST(PieceMover, GathersRunsOfMemoryAndFilesAsOneRange)
{
  const temp_file file;
  const std::vector<char> file_bytes = pattern(5 * mib + 333, 7);
  file.write_at(lead, file_bytes.data(), file_bytes.size());
  const file_array in{file.fd(), lead, file_bytes.size(), "runs.bin"};
  const std::vector<char> memory = pattern(9 * mib + 17, 8);
  // The runs: (from the file?, offset, length).
  struct run_spec {
    bool from_file;
    std::uint64_t at, bytes;
  };
  const std::vector<std::vector<run_spec>> cases{
      {},
      {{false, 0, 0}, {true, 5, 0}},
      {{false, 3, 1}},
      {{false, 0, mib}, {true, 0, mib}, {false, mib, mib}},
      {{false, 17, 3 * mib + 5}, {true, 4093, 0}, {true, 4093, 2 * mib + 1}, {false, 9, 4099}},
      {{true, 5 * mib, 333}, {false, 8 * mib, mib + 17}, {true, 0, 5 * mib + 333}},
  };
  std::vector<run_spec> many;  // 3000 short runs, many to a block, alternately file and memory
  for (std::uint64_t k = 0; k < 3000; ++k)
    many.push_back({k % 2 == 0, (k * 1237) % (5 * mib), 1 + (k * 631) % 3000});
  std::vector<std::vector<run_spec>> all = cases;
  all.push_back(many);
  for (const std::uint64_t piece : {64 * std::uint64_t{1024}, 3 * mib / 2}) {
    for (const std::size_t ring : {std::size_t{1}, std::size_t{3}}) {
      for (std::size_t c = 0; c < all.size(); ++c) {
        SCOPED_TRACE("case " + std::to_string(c) + ", pieces of " + std::to_string(piece) +
                     ", ring " + std::to_string(ring));
        std::vector<detail::piece_mover::source_run> runs;
        std::vector<char> want;
        for (const run_spec& r : all[c]) {
          const char* base = r.from_file ? static_cast<const char*>(in.data()) : memory.data();
          const char* real = r.from_file ? file_bytes.data() : memory.data();
          runs.push_back({.data = base + r.at, .bytes = r.bytes});
          want.insert(want.end(), real + r.at, real + r.at + r.bytes);
        }
        fake_copies gpu{piece, ring};
        std::vector<char> out(want.size(), 'x');
        detail::piece_mover mover{ring == 1 ? 1U : 4U};
        mover.gather(
            runs, {.buffers = &gpu.buffers(), .piece_bytes = piece, .first = ring - 1},
            [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
              gpu.queue(i, off, len, out.data());
            },
            [&](std::size_t i) { gpu.complete(i); });
        gpu.complete_all();
        EXPECT_TRUE(out == want);
      }
    }
  }
  // A run that reaches past the file's end fails as the file does, naming it.
  const file_array longer{file.fd(), lead, file_bytes.size() + 2 * mib, "cut.bin"};
  const std::vector<detail::piece_mover::source_run> runs{
      {.data = memory.data(), .bytes = mib},
      {.data = static_cast<const char*>(longer.data()) + 4 * mib, .bytes = 2 * mib}};
  fake_copies gpu{mib, 2};
  std::vector<char> out(3 * mib);
  detail::piece_mover mover{3};
  try {
    mover.gather(
        runs, {.buffers = &gpu.buffers(), .piece_bytes = mib},
        [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
          gpu.queue(i, off, len, out.data());
        },
        [&](std::size_t i) { gpu.complete(i); });
    FAIL() << "no error for a run past the file's end";
  } catch (const io_error& e) {
    EXPECT_NE(std::string{e.what()}.find("cut.bin"), std::string::npos) << e.what();
  }
  gpu.complete_all();
}

TEST(PieceMover, AFileThatEndsEarlyIsAnIoErrorAndTheMoverWorksOn)
{
  const temp_file file;
  const std::vector<char> bytes = pattern(5 * mib, 3);
  file.write_at(0, bytes.data(), bytes.size());
  const file_array in{file.fd(), 0, 9 * mib, "short.bin"};  // 4 MiB more than the file has
  detail::piece_mover mover{3};
  const auto read = [&](std::uint64_t n, std::vector<char>& out) {
    fake_copies gpu{mib, 2};
    try {
      mover.read(
          in.data(), n, {.buffers = &gpu.buffers(), .piece_bytes = mib},
          [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
            gpu.queue(i, off, len, out.data());
          },
          [&](std::size_t i) { gpu.complete(i); });
    } catch (...) {
      gpu.complete_all();
      throw;
    }
    gpu.complete_all();
  };
  std::vector<char> out(9 * mib);
  try {
    read(9 * mib, out);
    FAIL() << "no error for a file shorter than its window";
  } catch (const io_error& e) {
    EXPECT_NE(std::string{e.what()}.find("short.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("shrank"), std::string::npos) << e.what();
  }
  out.assign(5 * mib, 'x');
  read(5 * mib, out);
  EXPECT_TRUE(out == bytes);
}

TEST(PieceMover, TheFirstErrorOfAnyStepIsRethrownOnceNoThreadMovesBytes)
{
  const temp_file file;
  const std::vector<char> bytes = pattern(6 * mib, 4);
  file.write_at(0, bytes.data(), bytes.size());
  const file_array in{file.fd(), 0, bytes.size(), "in.bin"};
  std::vector<char> ring_memory(3 * mib, 'r');
  const std::vector<char*> buffers{ring_memory.data(), ring_memory.data() + mib,
                                   ring_memory.data() + 2 * mib};
  detail::piece_mover mover{4};
  // hand_on fails on the third piece (a copy that could not be queued).
  int handed = 0;
  EXPECT_THROW(mover.read(
                   in.data(), bytes.size(), {.buffers = &buffers, .piece_bytes = mib},
                   [&](std::size_t, std::uint64_t, std::uint64_t) {
                     if (++handed == 3) throw cuda_error{"the copy failed"};
                   },
                   [](std::size_t) {}),
               cuda_error);
  EXPECT_EQ(handed, 3);
  // Once it returned, the ring is the caller's: nothing writes it any more.
  const std::vector<char> after = ring_memory;
  std::this_thread::sleep_for(std::chrono::milliseconds{20});
  EXPECT_TRUE(ring_memory == after);
  // A gate that fails (an asynchronous copy error): the same.
  EXPECT_THROW(mover.read(
                   in.data(), bytes.size(), {.buffers = &buffers, .piece_bytes = mib},
                   [](std::size_t, std::uint64_t, std::uint64_t) {},
                   [](std::size_t) { throw cuda_error{"the copy failed later"}; }),
               cuda_error);
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) return;
  {
    const file_array out{full, 0, 4 * mib, "full.bin"};
    try {
      mover.write(out.data(), 4 * mib, {.buffers = &buffers, .piece_bytes = mib},
                  [](std::size_t, std::uint64_t, std::uint64_t) {}, [](std::size_t) {});
      ADD_FAILURE() << "no error for a write to a full device";
    } catch (const io_error& e) {
      EXPECT_NE(std::string{e.what()}.find("full.bin"), std::string::npos) << e.what();
    }
  }
  ::close(full);
}

/// write_behind: ranges one after another through one ring, as a GPU's store writes its chunks
/// into a file, each returning once its pieces are being filled. A later range's fills wait
/// for the buffers that earlier writes still use (a buffer filled too soon would write the
/// later range's bytes into the earlier range's place), finish waits for a range's bytes
/// whatever the order and from another thread, and the ranges' bytes all land.
TEST(PieceMover, WritesBehindLandAndALaterRangeWaitsForTheBuffersItReuses)
{
  // Ranges shorter than a piece, of several pieces, and not whole pieces.
  const std::vector<std::uint64_t> sizes{5 * mib + 3, 1, 2 * mib, mib - 7, 3 * mib + 4099,
                                         64 * 1024, 4 * mib};
  std::uint64_t total = 0;
  for (const std::uint64_t n : sizes) total += n;
  const std::vector<char> bytes = pattern(total, 11);
  for (const std::string& folder : folders()) {
    for (const std::size_t ring : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
      for (const bool to_file : {true, false}) {
        SCOPED_TRACE(folder + ", ring " + std::to_string(ring) +
                     (to_file ? ", into a file" : ", into memory"));
        const temp_file file{folder};
        ASSERT_EQ(::ftruncate(file.fd(), static_cast<off_t>(lead + total)), 0);
        const file_array out_file{file.fd(), lead, total, "out.bin"};
        std::vector<char> out_memory(total, 'x');
        char* const out = to_file ? static_cast<char*>(out_file.data()) : out_memory.data();
        {
          const detail::output_mappings mapped{{out_file.data(), total}};
          fake_copies gpu{mib, ring};
          detail::piece_mover mover{ring == 1 ? 1U : 3U};
          std::vector<std::uint64_t> tickets;
          std::uint64_t at = 0;
          std::size_t first = 0;
          for (const std::uint64_t n : sizes) {
            tickets.push_back(mover.write_behind(
                out + at, n, {.buffers = &gpu.buffers(), .piece_bytes = mib, .first = first},
                [&, at](std::size_t i, std::uint64_t off, std::uint64_t len) {
                  gpu.queue_fill(i, off, len, bytes.data() + at);
                },
                [&gpu](std::size_t i) {
                  std::this_thread::sleep_for(std::chrono::microseconds{200});  // a copy's time
                  gpu.complete(i);
                }));
            EXPECT_NE(tickets.back(), 0U);
            at += n;
            first = (first + (n + mib - 1) / mib) % ring;
          }
          // Finished out of order, from another thread.
          std::thread finisher{[&] {
            for (std::size_t k = tickets.size(); k-- > 0;) mover.finish(tickets[k]);
          }};
          finisher.join();
          mover.finish(tickets.front());  // finished already: returns at once
          mover.finish(0);
        }
        if (to_file)
          EXPECT_TRUE(file.read_at<char>(lead, total) == bytes);
        else
          EXPECT_TRUE(out_memory == bytes);
      }
    }
  }
}

/// A write behind that fails says so at its finish, not at the next range's call; the ranges
/// around it land. settle() waits for writes no one finished yet; abandon() forgets them.
TEST(PieceMover, AWriteBehindsErrorComesAtItsFinishAndTheOthersLand)
{
  const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (full < 0) GTEST_SKIP() << "no /dev/full";
  std::vector<char> ring_memory(2 * mib);
  const std::vector<char*> buffers{ring_memory.data(), ring_memory.data() + mib};
  const std::vector<char> bytes = pattern(3 * mib, 5);
  std::vector<char> before(3 * mib, 'x'), after(3 * mib, 'x');
  const detail::piece_mover::buffer_fn no_wait = [](std::size_t) {};
  const auto fill_from = [&](const char* src) {
    return [&buffers, src](std::size_t i, std::uint64_t off, std::uint64_t len) {
      std::memcpy(buffers[i], src + off, len);
    };
  };
  detail::piece_mover mover{2};
  {
    const file_array out{full, 0, 3 * mib, "full.bin"};
    const detail::piece_mover::ring r{.buffers = &buffers, .piece_bytes = mib};
    const std::uint64_t first = mover.write_behind(before.data(), 3 * mib, r,
                                                   fill_from(bytes.data()), no_wait);
    // One piece: the call hands it on before any write of it can fail.
    const std::uint64_t failing = mover.write_behind(out.data(), mib, {.buffers = &buffers,
        .piece_bytes = mib, .first = 1}, fill_from(bytes.data()), no_wait);
    const std::uint64_t last = mover.write_behind(after.data(), 3 * mib, r,
                                                  fill_from(bytes.data()), no_wait);
    mover.finish(last);
    mover.finish(first);
    try {
      mover.finish(failing);
      ADD_FAILURE() << "no error for a write behind to a full device";
    } catch (const io_error& e) {
      EXPECT_NE(std::string{e.what()}.find("full.bin"), std::string::npos) << e.what();
    }
    mover.finish(failing);  // its error was said once
    // A write behind left unfinished: settle waits for it, abandon drops its error.
    const std::uint64_t dropped = mover.write_behind(out.data(), mib, r,
                                                     fill_from(bytes.data()), no_wait);
    mover.settle();
    mover.abandon();
    EXPECT_NO_THROW(mover.finish(dropped));
  }
  ::close(full);
  EXPECT_TRUE(before == bytes);
  EXPECT_TRUE(after == bytes);
}

}  // namespace
}  // namespace gpusort
