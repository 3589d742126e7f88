#include "service/fd_check.hpp"

#include "fd_test_support.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace gpusort::service {
namespace {

using testing::make_memfd;
using testing::open_fd_count;
using testing::temp_dir;

const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

/// The reason check_fd gives, or nullopt when it accepts.
std::optional<fd_error> reason_of(int fd, const fd_range& range)
{
  try {
    (void)check_fd(fd, range);
    return std::nullopt;
  } catch (const fd_check_error& e) {
    EXPECT_NE(std::string{e.what()}.find(name_of(e.reason())), std::string::npos) << e.what();
    return e.reason();
  }
}

fd_range input(std::uint64_t offset, std::optional<std::uint64_t> length, std::uint64_t esize = 8)
{
  return {.offset = offset, .length = length, .element_size = esize, .access = fd_access::read};
}

fd_range output(std::uint64_t offset, std::optional<std::uint64_t> length,
                std::uint64_t esize = 8)
{
  return {.offset = offset,
          .length = length,
          .element_size = esize,
          .access = fd_access::read_write};
}

unique_fd write_file(const std::filesystem::path& path, std::uint64_t bytes, int flags = O_RDWR)
{
  {
    unique_fd w{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
    EXPECT_TRUE(w);
    std::vector<unsigned char> data(bytes);
    std::iota(data.begin(), data.end(), static_cast<unsigned char>(1));
    EXPECT_EQ(::write(w.get(), data.data(), data.size()), static_cast<ssize_t>(bytes));
  }
  unique_fd fd{::open(path.c_str(), flags | O_CLOEXEC)};
  EXPECT_TRUE(fd);
  return fd;
}

TEST(FdCheck, ReasonNames)
{
  EXPECT_EQ(name_of(fd_error::not_regular), "not_regular");
  EXPECT_EQ(name_of(fd_error::too_small), "too_small");
  EXPECT_EQ(name_of(fd_error::bad_offset), "bad_offset");
  EXPECT_EQ(name_of(fd_error::overflow), "overflow");
  EXPECT_EQ(name_of(fd_error::not_multiple), "not_multiple");
  EXPECT_EQ(name_of(fd_error::not_readable), "not_readable");
  EXPECT_EQ(name_of(fd_error::not_writable), "not_writable");
  EXPECT_EQ(name_of(fd_error::unsealed_memfd), "unsealed_memfd");
  EXPECT_EQ(name_of(fd_error::map_failed), "map_failed");
  // The protocol maps reasons to statuses: the error is an invalid_argument.
  const fd_check_error e{fd_error::overflow, "x"};
  EXPECT_NE(dynamic_cast<const invalid_argument*>(&e), nullptr);
}

TEST(FdCheck, RefusesWhatIsNotARegularFile)
{
  const temp_dir dir;
  const unique_fd d{::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  ASSERT_TRUE(d);
  EXPECT_EQ(reason_of(d.get(), input(0, std::nullopt)), fd_error::not_regular);

  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const unique_fd r{p[0]};
  const unique_fd w{p[1]};
  EXPECT_EQ(reason_of(r.get(), input(0, 0)), fd_error::not_regular);

  int s[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
  const unique_fd s0{s[0]};
  const unique_fd s1{s[1]};
  EXPECT_EQ(reason_of(s0.get(), input(0, 0)), fd_error::not_regular);

  const unique_fd null{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  EXPECT_EQ(reason_of(null.get(), input(0, 0)), fd_error::not_regular);

  // A number that is no open descriptor at all.
  EXPECT_EQ(reason_of(-1, input(0, 0)), fd_error::not_regular);
  int closed = ::dup(null.get());
  ::close(closed);
  EXPECT_EQ(reason_of(closed, input(0, 0)), fd_error::not_regular);
}

TEST(FdCheck, AccessModeComesFromTheDescriptor)
{
  const temp_dir dir;
  const auto path = dir.path() / "keys.bin";
  const unique_fd wo = write_file(path, 64, O_WRONLY);
  EXPECT_EQ(reason_of(wo.get(), input(0, 64)), fd_error::not_readable);
  EXPECT_EQ(reason_of(wo.get(), output(0, 64)), fd_error::not_readable);

  const unique_fd opath{::open(path.c_str(), O_PATH | O_CLOEXEC)};
  ASSERT_TRUE(opath);
  EXPECT_EQ(reason_of(opath.get(), input(0, 64)), fd_error::not_readable);

  const unique_fd ro{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  EXPECT_EQ(reason_of(ro.get(), input(0, 64)), std::nullopt);
  EXPECT_EQ(reason_of(ro.get(), output(0, 64)), fd_error::not_writable);

  const unique_fd append{::open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC)};
  EXPECT_EQ(reason_of(append.get(), input(0, 64)), std::nullopt);
  EXPECT_EQ(reason_of(append.get(), output(0, 64)), fd_error::not_writable);

  const unique_fd rw{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  EXPECT_EQ(reason_of(rw.get(), output(0, 64)), std::nullopt);
}

TEST(FdCheck, MemfdsMustCarryTheShrinkSeal)
{
  const unique_fd unsealed = make_memfd(page, 0);
  EXPECT_EQ(reason_of(unsealed.get(), input(0, page)), fd_error::unsealed_memfd);
  // Sealed, but against growing only: it can still shrink.
  const unique_fd grow_only = make_memfd(page, F_SEAL_GROW);
  EXPECT_EQ(reason_of(grow_only.get(), input(0, page)), fd_error::unsealed_memfd);
  // A memfd made without MFD_ALLOW_SEALING can never be sealed.
  const unique_fd unsealable = make_memfd(page, 0, false);
  EXPECT_EQ(reason_of(unsealable.get(), input(0, page)), fd_error::unsealed_memfd);

  const unique_fd sealed = make_memfd(3 * page, F_SEAL_SHRINK);
  const checked_fd c = check_fd(sealed.get(), output(8, std::nullopt));
  EXPECT_EQ(c.kind, fd_kind::sealed_memory);
  EXPECT_EQ(c.file_size, 3 * page);
  EXPECT_EQ(c.offset, 8u);
  EXPECT_EQ(c.length, 3 * page - 8);

  // A write-sealed memfd is a fine input and no output.
  const unique_fd frozen = make_memfd(page, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
  EXPECT_EQ(reason_of(frozen.get(), input(0, page)), std::nullopt);
  EXPECT_EQ(reason_of(frozen.get(), output(0, page)), fd_error::not_writable);
}

TEST(FdCheck, TmpfsFilesAreStagedLikePlainFiles)
{
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != 0x01021994 /* TMPFS_MAGIC */)
    GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  const temp_dir dir{"/dev/shm"};
  const unique_fd fd = write_file(dir.path() / "keys.bin", 64);
  ASSERT_GE(::fcntl(fd.get(), F_GET_SEALS), 0) << "tmpfs answers F_GET_SEALS like a memfd";
  const checked_fd c = check_fd(fd.get(), input(0, std::nullopt));
  EXPECT_EQ(c.kind, fd_kind::plain_file);
  EXPECT_EQ(c.length, 64u);
}

TEST(FdCheck, RangeIsCheckedAgainstTheSizeFromFstat)
{
  const temp_dir dir;
  const unique_fd fd = write_file(dir.path() / "keys.bin", 800);
  {
    const checked_fd c = check_fd(fd.get(), input(0, std::nullopt));
    EXPECT_EQ(c.kind, fd_kind::plain_file);
    EXPECT_EQ(c.file_size, 800u);
    EXPECT_EQ(c.length, 800u);
  }
  EXPECT_EQ(reason_of(fd.get(), input(800, 0)), std::nullopt);  // empty, at the end
  EXPECT_EQ(reason_of(fd.get(), input(800, std::nullopt)), std::nullopt);
  EXPECT_EQ(reason_of(fd.get(), input(808, 0)), fd_error::bad_offset);
  EXPECT_EQ(reason_of(fd.get(), input(808, std::nullopt)), fd_error::bad_offset);
  EXPECT_EQ(reason_of(fd.get(), input(4, 8)), fd_error::bad_offset);  // misaligned
  EXPECT_EQ(reason_of(fd.get(), input(8, 800)), fd_error::too_small);
  EXPECT_EQ(reason_of(fd.get(), input(0, 808)), fd_error::too_small);
  EXPECT_EQ(reason_of(fd.get(), input(0, 12)), fd_error::not_multiple);
  EXPECT_EQ(reason_of(fd.get(), input(0, std::nullopt, 3)), fd_error::not_multiple);  // 800 % 3
  EXPECT_EQ(reason_of(fd.get(), input(0, 792)), std::nullopt);
  // offset + length wrapping past 2^64 would look small: it must be caught before anything.
  EXPECT_EQ(reason_of(fd.get(), input(8, u64_max - 7)), fd_error::overflow);
  EXPECT_EQ(reason_of(fd.get(), input(u64_max - 7, 16)), fd_error::overflow);
  EXPECT_EQ(reason_of(fd.get(), input(u64_max - 15, 8)), fd_error::bad_offset);  // no wrap
  EXPECT_EQ(reason_of(fd.get(), input(16, u64_max - 16)), fd_error::too_small);  // no wrap
  EXPECT_THROW((void)check_fd(fd.get(), input(0, 8, 0)), logic_error);
}

TEST(FdCheck, MapsExactlyTheCheckedRangeAtAnUnalignedOffset)
{
  const unique_fd fd = make_memfd(4 * page, F_SEAL_SHRINK | F_SEAL_GROW);
  std::vector<std::uint64_t> all(4 * page / 8);
  std::iota(all.begin(), all.end(), 1000);
  ASSERT_EQ(::pwrite(fd.get(), all.data(), 4 * page, 0), static_cast<ssize_t>(4 * page));

  const std::uint64_t offset = page + 24;
  const std::uint64_t count = 300;
  {
    const mapped_region r = map_region(check_fd(fd.get(), input(offset, count * 8)));
    EXPECT_FALSE(r.writable());
    ASSERT_EQ(r.size(), count * 8);
    std::vector<std::uint64_t> seen(count);
    std::memcpy(seen.data(), r.data(), r.size());
    for (std::uint64_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], 1000 + offset / 8 + i) << i;
  }
  {
    const mapped_region r = map_region(check_fd(fd.get(), output(offset, count * 8)));
    EXPECT_TRUE(r.writable());
    const std::uint64_t mark = 0xDEADBEEFCAFEF00DULL;
    std::memcpy(r.data(), &mark, 8);
    std::memcpy(r.data() + r.size() - 8, &mark, 8);
    std::uint64_t before = 0, first = 0, last = 0, after = 0;
    ASSERT_EQ(::pread(fd.get(), &before, 8, static_cast<off_t>(offset - 8)), 8);
    ASSERT_EQ(::pread(fd.get(), &first, 8, static_cast<off_t>(offset)), 8);
    ASSERT_EQ(::pread(fd.get(), &last, 8, static_cast<off_t>(offset + count * 8 - 8)), 8);
    ASSERT_EQ(::pread(fd.get(), &after, 8, static_cast<off_t>(offset + count * 8)), 8);
    EXPECT_EQ(first, mark);
    EXPECT_EQ(last, mark);
    EXPECT_EQ(before, 1000 + offset / 8 - 1);
    EXPECT_EQ(after, 1000 + offset / 8 + count);
  }
  const mapped_region empty = map_region(check_fd(fd.get(), input(page, 0)));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
}

// Plain files are read and written by the engine (gpusort::file_array, tested with the
// pipeline), never mapped here: a truncation must not be able to SIGBUS the daemon.
TEST(FdCheck, PlainFilesAreNeverMapped)
{
  const temp_dir dir;
  const unique_fd fd = write_file(dir.path() / "keys.bin", 4096);
  const checked_fd in = check_fd(fd.get(), input(1024, 2048));
  EXPECT_EQ(in.kind, fd_kind::plain_file);
  EXPECT_EQ(in.offset, 1024u);
  EXPECT_EQ(in.length, 2048u);
  EXPECT_THROW((void)map_region(in), logic_error);
  EXPECT_THROW((void)map_region(check_fd(fd.get(), output(0, 4096))), logic_error);
}

TEST(FdCheck, ChecksAndMappingsLeakNoDescriptor)
{
  const temp_dir dir;
  const unique_fd file = write_file(dir.path() / "keys.bin", 800);
  const unique_fd mem = make_memfd(page, F_SEAL_SHRINK);
  const unique_fd unsealed = make_memfd(page, 0);
  const std::size_t before = open_fd_count();
  for (int i = 0; i < 50; ++i) {
    (void)reason_of(file.get(), input(0, 12));
    (void)reason_of(unsealed.get(), input(0, 8));
    const mapped_region r = map_region(check_fd(mem.get(), output(0, page)));
    (void)check_fd(file.get(), input(0, 800));
  }
  EXPECT_EQ(open_fd_count(), before);
}

}  // namespace
}  // namespace gpusort::service
