#include "service/buffer_pool.hpp"

#include "fd_test_support.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::service {
namespace {

using testing::open_fd_count;

const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));

bool all_bytes(const std::byte* p, std::uint64_t n, std::byte v)
{
  return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

TEST(BufferPool, AllocateGivesSealedSharedMemoryOfWholePages)
{
  buffer_pool pool{64 * page};
  const buffer_grant g = pool.allocate(page + 1, {.session = 1, .uid = 1000});
  EXPECT_EQ(g.size, 2 * page);
  EXPECT_FALSE(g.reused);
  ASSERT_TRUE(g.client_fd);
  ASSERT_NE(g.data, nullptr);
  EXPECT_TRUE(all_bytes(g.data, g.size, std::byte{0}));

  struct stat st {};
  ASSERT_EQ(::fstat(g.client_fd.get(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), g.size);
  EXPECT_NE(::fcntl(g.client_fd.get(), F_GETFD) & FD_CLOEXEC, 0);

  const int seals = ::fcntl(g.client_fd.get(), F_GET_SEALS);
  ASSERT_GE(seals, 0);
  EXPECT_NE(seals & F_SEAL_SHRINK, 0);
  EXPECT_NE(seals & F_SEAL_GROW, 0);
  EXPECT_NE(seals & F_SEAL_SEAL, 0);
  // The client cannot change the size, nor take off or add seals.
  errno = 0;
  EXPECT_EQ(::ftruncate(g.client_fd.get(), 0), -1);
  EXPECT_EQ(errno, EPERM);
  errno = 0;
  EXPECT_EQ(::ftruncate(g.client_fd.get(), static_cast<off_t>(4 * page)), -1);
  EXPECT_EQ(errno, EPERM);
  errno = 0;
  EXPECT_EQ(::fcntl(g.client_fd.get(), F_ADD_SEALS, F_SEAL_WRITE), -1);
  EXPECT_EQ(errno, EPERM);

  // The client's own mapping and the daemon's are the same memory, both ways.
  void* client = ::mmap(nullptr, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, g.client_fd.get(), 0);
  ASSERT_NE(client, MAP_FAILED);
  auto* c = static_cast<unsigned char*>(client);
  for (std::uint64_t i = 0; i < g.size; ++i) g.data[i] = static_cast<std::byte>(i * 7 + 3);
  for (std::uint64_t i = 0; i < g.size; ++i)
    ASSERT_EQ(c[i], static_cast<unsigned char>(i * 7 + 3)) << i;
  c[5] = 0xEE;
  EXPECT_EQ(g.data[5], std::byte{0xEE});
  ::munmap(client, g.size);
}

TEST(BufferPool, ReusedBufferIsZeroedAndGetsANewId)
{
  buffer_pool pool{64 * page};
  const buffer_owner alice{.session = 1, .uid = 1000};
  std::uint64_t first_id = 0;
  {
    buffer_grant g = pool.allocate(3 * page, alice);
    first_id = g.id;
    std::memset(g.data, 0xAB, g.size);
    pool.release(g.id, alice.session);
  }
  EXPECT_EQ(pool.stats().buffers_cached, 1u);
  // Another session of the same user reuses it, and sees none of the old bytes.
  const buffer_grant g = pool.allocate(3 * page - 100, {.session = 2, .uid = 1000});
  EXPECT_TRUE(g.reused);
  EXPECT_EQ(g.size, 3 * page);
  EXPECT_NE(g.id, first_id);
  EXPECT_TRUE(all_bytes(g.data, g.size, std::byte{0}));
  // Through the client's descriptor too (pread goes through the page cache, not our mapping).
  std::vector<unsigned char> seen(g.size, 0xFF);
  ASSERT_EQ(::pread(g.client_fd.get(), seen.data(), seen.size(), 0),
            static_cast<ssize_t>(seen.size()));
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](unsigned char b) { return b == 0; }));
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.created, 1u);
  EXPECT_EQ(s.reused, 1u);
  // The old id is gone for everyone.
  EXPECT_THROW(pool.release(first_id, alice.session), invalid_argument);
}

TEST(BufferPool, LargeReusedBufferIsZeroedInParallel)
{
  const std::uint64_t bytes = std::uint64_t{48} << 20;  // many 4 MiB pieces
  buffer_pool pool{bytes * 2};
  {
    buffer_grant g = pool.allocate(bytes, {.session = 1, .uid = 5});
    std::memset(g.data, 0x5A, g.size);
    g.data[g.size - 1] = std::byte{1};
    pool.release(g.id, 1);
  }
  const buffer_grant g = pool.allocate(bytes, {.session = 2, .uid = 5});
  ASSERT_TRUE(g.reused);
  EXPECT_TRUE(all_bytes(g.data, g.size, std::byte{0}));
}

TEST(BufferPool, NoReuseAcrossUsers)
{
  buffer_pool pool{64 * page};
  {
    const buffer_grant g = pool.allocate(page, {.session = 1, .uid = 1000});
    pool.release(g.id, 1);
  }
  const buffer_grant g = pool.allocate(page, {.session = 2, .uid = 1001});
  EXPECT_FALSE(g.reused);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.created, 2u);
  EXPECT_EQ(s.buffers_cached, 1u);
  EXPECT_EQ(s.buffers_in_use, 1u);
}

TEST(BufferPool, ReuseTakesTheSmallestFitNoMoreThanTwiceTheNeed)
{
  buffer_pool pool{256 * page};
  const buffer_owner o{.session = 1, .uid = 7};
  {
    std::vector<buffer_grant> made;
    for (const std::uint64_t pages : {8u, 3u, 5u}) made.push_back(pool.allocate(pages * page, o));
    for (const auto& g : made) pool.release(g.id, o.session);
    ASSERT_EQ(pool.stats().buffers_cached, 3u);
  }
  // 4 pages: 5 fits (and 8 too, but 5 is smaller; 3 is too small).
  {
    const buffer_grant g = pool.allocate(4 * page, o);
    EXPECT_TRUE(g.reused);
    EXPECT_EQ(g.size, 5 * page);
  }
  // 1 page: every cached buffer is more than twice as large.
  {
    const buffer_grant g = pool.allocate(page, o);
    EXPECT_FALSE(g.reused);
    EXPECT_EQ(g.size, page);
  }
  // 9 pages: none is large enough.
  const buffer_grant g = pool.allocate(9 * page, o);
  EXPECT_FALSE(g.reused);
}

TEST(BufferPool, CapEvictsCachedBuffersOldestFirstThenRefuses)
{
  buffer_pool pool{6 * page};
  const buffer_owner o{.session = 1, .uid = 1};
  EXPECT_THROW((void)pool.allocate(0, o), invalid_argument);
  EXPECT_THROW((void)pool.allocate(6 * page + 1, o), invalid_argument);
  EXPECT_THROW((void)pool.allocate(~std::uint64_t{0}, o), invalid_argument);

  const buffer_grant a = pool.allocate(2 * page, o);
  const buffer_grant b = pool.allocate(2 * page, o);
  const buffer_grant c = pool.allocate(2 * page, o);
  // Full of buffers in use: nothing to evict.
  EXPECT_THROW((void)pool.allocate(page, o), out_of_memory);
  pool_stats s = pool.stats();
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.bytes_in_use, 6 * page);

  pool.release(b.id, o.session);  // cached first: oldest
  pool.release(a.id, o.session);
  s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 2 * page);
  EXPECT_EQ(s.bytes_cached, 4 * page);
  // 4 pages for another user: both cached buffers must go, b first.
  const buffer_grant d = pool.allocate(4 * page, {.session = 2, .uid = 2});
  s = pool.stats();
  EXPECT_EQ(s.evicted, 2u);
  EXPECT_EQ(s.bytes_in_use, 6 * page);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_THROW((void)pool.allocate(page, o), out_of_memory);

  pool.release(c.id, o.session);
  pool.release(d.id, 2);
  // 3 pages for user 3: c goes first (older), but 2 pages are short of 3, so d goes too.
  const buffer_grant e = pool.allocate(3 * page, {.session = 3, .uid = 3});
  s = pool.stats();
  EXPECT_EQ(s.evicted, 4u);
  EXPECT_EQ(s.bytes_in_use, 3 * page);
  EXPECT_EQ(s.bytes_cached, 0u);
  // Only one of them has to go when it is enough: cache two 1-page buffers of user 3, then
  // ask for 3 pages with 1 free (6 - 3 - 2 = 1).
  const buffer_grant f = pool.allocate(page, {.session = 3, .uid = 3});
  const buffer_grant g = pool.allocate(page, {.session = 3, .uid = 3});
  pool.release(f.id, 3);
  pool.release(g.id, 3);
  pool.release(e.id, 3);  // cached last
  const buffer_grant h = pool.allocate(2 * page, {.session = 4, .uid = 4});
  s = pool.stats();
  EXPECT_EQ(s.evicted, 5u);  // f only: 1 free + f's page = 2
  EXPECT_EQ(s.buffers_cached, 2u);
  EXPECT_EQ(s.bytes_cached, 4 * page);
  EXPECT_EQ(s.bytes_in_use, 2 * page);
}

TEST(BufferPool, ReleaseChecksTheSession)
{
  buffer_pool pool{16 * page};
  const buffer_grant g = pool.allocate(page, {.session = 1, .uid = 1});
  EXPECT_THROW(pool.release(g.id, 2), invalid_argument);
  EXPECT_THROW(pool.release(g.id + 100, 1), invalid_argument);
  EXPECT_THROW((void)pool.lease(g.id, 2), invalid_argument);
  pool.release(g.id, 1);
  EXPECT_THROW(pool.release(g.id, 1), invalid_argument);  // twice
  EXPECT_THROW((void)pool.lease(g.id, 1), invalid_argument);
}

TEST(BufferPool, ReleaseAllFreesOneSessionsBuffers)
{
  buffer_pool pool{64 * page};
  std::vector<buffer_grant> mine;
  for (int i = 0; i < 3; ++i) mine.push_back(pool.allocate(2 * page, {.session = 7, .uid = 1}));
  const buffer_grant other = pool.allocate(page, {.session = 8, .uid = 1});
  EXPECT_EQ(pool.release_all(7), 3u);
  EXPECT_EQ(pool.release_all(7), 0u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, page);
  EXPECT_EQ(s.bytes_cached, 6 * page);
  EXPECT_EQ(s.buffers_in_use, 1u);
  EXPECT_EQ(s.buffers_cached, 3u);
  for (const auto& g : mine) EXPECT_THROW(pool.release(g.id, 7), invalid_argument);
  pool.release(other.id, 8);
  EXPECT_EQ(pool.trim(), 7 * page);
  EXPECT_EQ(pool.stats().buffers_cached, 0u);
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
}

TEST(BufferPool, LeaseKeepsAReleasedBufferOutOfTheCache)
{
  buffer_pool pool{16 * page};
  const buffer_grant g = pool.allocate(2 * page, {.session = 1, .uid = 1});
  {
    buffer_lease job = pool.lease(g.id, 1);
    EXPECT_EQ(job.data(), g.data);
    EXPECT_EQ(job.size(), g.size);
    EXPECT_EQ(pool.release_all(1), 1u);  // the client disconnects mid-job
    EXPECT_EQ(pool.stats().bytes_in_use, 2 * page);
    EXPECT_EQ(pool.stats().buffers_cached, 0u);
    // Not handed to anyone while the job still writes it.
    const buffer_grant other = pool.allocate(2 * page, {.session = 2, .uid = 1});
    EXPECT_FALSE(other.reused);
    EXPECT_NE(other.data, g.data);
    pool.release(other.id, 2);
    buffer_lease moved = std::move(job);
    EXPECT_FALSE(job);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    EXPECT_TRUE(moved);
  }
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.buffers_cached, 2u);
}

TEST(BufferPool, PinsOnceAtCreationAndUnpinsOnceAtDestruction)
{
  std::mutex m;
  std::map<void*, std::pair<std::size_t, int>> pins;  // address -> size, pin count
  std::map<void*, int> unpins;
  pin_hooks hooks{.pin =
                      [&](void* p, std::size_t n) {
                        const std::lock_guard lock{m};
                        auto& [size, count] = pins[p];
                        size = n;
                        ++count;
                      },
                  .unpin =
                      [&](void* p, std::size_t n) {
                        const std::lock_guard lock{m};
                        EXPECT_EQ(pins.at(p).first, n);
                        ++unpins[p];
                      }};
  {
    buffer_pool pool{64 * page, hooks};
    const buffer_owner o{.session = 1, .uid = 1};
    const buffer_grant a = pool.allocate(2 * page, o);
    const buffer_grant b = pool.allocate(4 * page, o);
    EXPECT_EQ(pins.size(), 2u);
    pool.release(a.id, 1);
    const buffer_grant a2 = pool.allocate(2 * page, o);  // reuse: no second pin
    EXPECT_TRUE(a2.reused);
    EXPECT_EQ(pins.at(a.data).second, 1);
    pool.release(a2.id, 1);
    EXPECT_EQ(pool.trim(), 2 * page);
    EXPECT_EQ(unpins.size(), 1u);
    EXPECT_EQ(unpins.at(a.data), 1);
    EXPECT_EQ(unpins.count(b.data), 0u);
  }
  // The pool's end unpins the rest.
  EXPECT_EQ(unpins.size(), 2u);
  for (const auto& [p, entry] : pins) {
    EXPECT_EQ(entry.second, 1);
    EXPECT_EQ(unpins.at(p), 1);
  }
}

TEST(BufferPool, FailingPinLeaksNothing)
{
  const std::size_t fds_before = open_fd_count();
  int calls = 0;
  int unpin_calls = 0;
  buffer_pool pool{4 * page, {.pin =
                                  [&](void*, std::size_t) {
                                    if (++calls == 1) throw std::runtime_error{"no pinning"};
                                  },
                              .unpin = [&](void*, std::size_t) { ++unpin_calls; }}};
  EXPECT_THROW((void)pool.allocate(4 * page, {.session = 1, .uid = 1}), std::runtime_error);
  EXPECT_EQ(open_fd_count(), fds_before);
  EXPECT_EQ(unpin_calls, 0);  // never pinned, never unpinned
  pool_stats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.buffers_in_use, 0u);
  // The whole budget is still there.
  { const buffer_grant g = pool.allocate(4 * page, {.session = 1, .uid = 1}); }
  s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 4 * page);
  EXPECT_EQ(s.created, 1u);
}

TEST(BufferPool, NoDescriptorOrMappingOutlivesThePool)
{
  const std::size_t fds_before = open_fd_count();
  {
    buffer_pool pool{64 * page};
    for (std::uint64_t i = 1; i <= 5; ++i) {
      const buffer_grant g = pool.allocate(i * page, {.session = i % 2, .uid = 1});
      EXPECT_EQ(open_fd_count(), fds_before + i + 1);  // the pool's own + this grant's
    }
    pool.release_all(0);
    EXPECT_EQ(open_fd_count(), fds_before + 5);
    pool.trim();
    EXPECT_EQ(open_fd_count(), fds_before + 3);
  }
  EXPECT_EQ(open_fd_count(), fds_before);
}

TEST(BufferPool, ConcurrentSessionsKeepTheBooksStraight)
{
  const std::uint64_t cap = 64 * page;
  buffer_pool pool{cap};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (std::uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<buffer_grant> held;
      for (std::uint64_t i = 0; i < 300; ++i) {
        try {
          const buffer_owner owner{.session = t, .uid = static_cast<std::uint32_t>(t % 2)};
          buffer_grant g = pool.allocate(((i * 7 + t) % 9 + 1) * page, owner);
          // A buffer is never handed to two holders at once: our mark must survive.
          if (!all_bytes(g.data, g.size, std::byte{0})) bad = true;
          std::memset(g.data, static_cast<int>(t + 1), g.size);
          held.push_back(std::move(g));
        } catch (const out_of_memory&) {
          ++refused;
        }
        if (held.size() > 3 || (i % 5 == 0 && !held.empty())) {
          const buffer_grant& g = held.front();
          if (!all_bytes(g.data, g.size, static_cast<std::byte>(t + 1))) bad = true;
          pool.release(g.id, t);
          held.erase(held.begin());
        }
        const pool_stats s = pool.stats();
        if (s.bytes_in_use + s.bytes_cached > cap) bad = true;
      }
      pool.release_all(t);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.buffers_in_use, 0u);
  EXPECT_LE(s.bytes_cached, cap);
  EXPECT_EQ(s.refused, refused.load());
  EXPECT_EQ(pool.trim(), s.bytes_cached);
}

}  // namespace
}  // namespace gpusort::service
