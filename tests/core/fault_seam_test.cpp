// The fault-injection module itself (core/fault.hpp, core/sys_io.hpp): plans as GPUSORT_FAULT
// spells them, counting per class, the nth call failing once or for good, the errno or
// cudaError_t returned, CUDA calls classified by name, and the wrappers failing without making
// the call.
#include "core/fault.hpp"
#include "core/sys_io.hpp"
#include "tests/support/open_fds.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace gpusort::detail::fault {
namespace {

static_assert(cuda_site("cudaMalloc(&p, n)") == site::device_alloc);
static_assert(cuda_site("cudaMallocAsync(&p, n, s)") == site::device_alloc);
static_assert(cuda_site("cudaMallocHost(&p, n)") == site::pinned_alloc);
static_assert(cuda_site("cudaHostAlloc(&p, n, f)") == site::pinned_alloc);
static_assert(cuda_site("cudaHostRegister(p, n, f)") == site::host_register);
static_assert(cuda_site("cudaMemcpyAsync(d, s, n, k, st)") == site::copy);
static_assert(cuda_site("cudaMemsetAsync(d, 0, n, st)") == site::copy);
static_assert(cuda_site("cudaPeekAtLastError()") == site::launch);
static_assert(cuda_site("cub::DeviceRadixSort::SortKeys(...)") == site::launch);
static_assert(cuda_site("cudaStreamSynchronize(s)") == site::stream);
static_assert(cuda_site("cudaEventRecord(e, s)") == site::event);
static_assert(cuda_site("cudaGetDeviceProperties(&p, 0)") == site::cuda_other);
static_assert(cuda_site("cudaFree(p)") == site::none, "releases are not seams");
static_assert(cuda_site("cudaHostUnregister(p)") == site::none);
static_assert(cuda_site("e") == site::none, "a status already returned is not a call");

TEST(FaultPlan, ParsesWhatGpusortFaultAccepts)
{
  plan p = parse("read:3");
  EXPECT_EQ(p.group, scope::one);
  EXPECT_EQ(p.target, site::read);
  EXPECT_EQ(p.nth, 3U);
  EXPECT_FALSE(p.sticky);
  EXPECT_EQ(p.error, 0);
  p = parse("write:1:sticky:ENOSPC");
  EXPECT_TRUE(p.sticky);
  EXPECT_EQ(p.error, ENOSPC);
  p = parse("cuda:7:700");
  EXPECT_EQ(p.group, scope::cuda);
  EXPECT_EQ(p.error, 700);
  EXPECT_EQ(parse("io:2").group, scope::io);
  EXPECT_EQ(parse("all:9").group, scope::all);
  EXPECT_EQ(parse("count").nth, 0U);
  for (const char* bad : {"", "read", "reed:1", "read:x", "read:1:sticky:EWHAT", "read:1:2:3",
                          "read:-1", "all:1:sticky:5:6"})
    EXPECT_THROW((void)parse(bad), invalid_argument) << bad;
}

TEST(FaultPlan, SeveralPlansAreSeparatedByCommas)
{
  const std::vector<plan> ps = parse_all("exchange:1:sticky:EINVAL,rename:2");
  ASSERT_EQ(ps.size(), 2U);
  EXPECT_EQ(ps[0].target, site::exchange);
  EXPECT_TRUE(ps[0].sticky);
  EXPECT_EQ(ps[0].error, EINVAL);
  EXPECT_EQ(ps[1].target, site::rename);
  EXPECT_EQ(ps[1].nth, 2U);
  EXPECT_EQ(parse_all("link:1:EOPNOTSUPP").front().error, EOPNOTSUPP);
  EXPECT_EQ(parse_all("count").size(), 1U);
  for (const char* bad : {"read:1,", ",read:1", "read:1,,write:2", "read:1,reed:2",
                          "open:1,read:1,write:1,sync:1,stat:1"})
    EXPECT_THROW((void)parse_all(bad), invalid_argument) << bad;
}

TEST(FaultPlan, EveryClassHasAName)
{
  for (std::size_t i = 0; i < site_count; ++i) {
    const auto s = static_cast<site>(i);
    EXPECT_EQ(site_named(name_of(s)), s) << name_of(s);
  }
  EXPECT_FALSE(site_named("none"));
}

TEST(FaultSeam, CountsEveryCallAndFailsOnlyTheNth)
{
  const armed a{plan{.group = scope::one, .target = site::read, .nth = 3}};
  std::vector<bool> failed;
  for (int i = 0; i < 5; ++i) failed.push_back(hit(site::read));
  EXPECT_FALSE(hit(site::write));
  EXPECT_EQ(failed, (std::vector<bool>{false, false, true, false, false}));
  EXPECT_EQ(calls(site::read), 5U);
  EXPECT_EQ(calls(site::write), 1U);
  EXPECT_EQ(injected(), 1U);
  EXPECT_EQ(error_for(site::read), EIO);
  EXPECT_EQ(summary(), "read=5 write=1");
}

TEST(FaultSeam, StickyFailsEveryMatchingCallFromTheNth)
{
  const armed a{plan{.group = scope::io, .nth = 2, .sticky = true, .error = ENOSPC}};
  EXPECT_FALSE(hit(site::copy)) << "a CUDA call is outside the io group";
  EXPECT_FALSE(hit(site::open));
  EXPECT_TRUE(hit(site::write));
  EXPECT_TRUE(hit(site::read));
  EXPECT_FALSE(hit(site::launch));
  EXPECT_EQ(error_for(site::read), ENOSPC);
  EXPECT_EQ(calls_in(plan{.group = scope::io}), 3U);
  EXPECT_EQ(calls_in(plan{.group = scope::cuda}), 2U);
}

TEST(FaultSeam, DefaultErrorsPerClass)
{
  const armed a{plan{.group = scope::all, .nth = 1}};
  EXPECT_EQ(error_for(site::device_alloc), 2) << "cudaErrorMemoryAllocation";
  EXPECT_EQ(error_for(site::copy), 1) << "cudaErrorInvalidValue: not sticky";
  EXPECT_EQ(error_for(site::truncate), ENOSPC);
  arm(plan{.group = scope::cuda, .nth = 1, .sticky = true});
  EXPECT_EQ(error_for(site::launch), 700) << "sticky: cudaErrorIllegalAddress, a lost context";
}

TEST(FaultSeam, PlansCountOnTheirOwnAndTheFirstInScopeGivesTheError)
{
  // A filesystem without RENAME_EXCHANGE, and its second plain rename failing.
  const armed a{std::vector<plan>{
      {.group = scope::one, .target = site::exchange, .nth = 1, .sticky = true, .error = EINVAL},
      {.group = scope::one, .target = site::rename, .nth = 2}}};
  std::vector<bool> failed;
  for (const site s : {site::exchange, site::rename, site::exchange, site::rename, site::rename})
    failed.push_back(hit(s));
  EXPECT_EQ(failed, (std::vector<bool>{true, false, true, true, false}));
  EXPECT_EQ(error_for(site::exchange), EINVAL);
  EXPECT_EQ(error_for(site::rename), EIO) << "the rename plan's default, not the exchange's";
  EXPECT_EQ(injected(), 3U);
  EXPECT_EQ(summary(), "rename=3 exchange=2");
}

TEST(FaultSeam, ACallTwoPlansPickFailsOnceAndCountsInBoth)
{
  const armed a{std::vector<plan>{{.group = scope::one, .target = site::link, .nth = 1},
                                  {.group = scope::io, .nth = 1, .error = ENOSPC}}};
  EXPECT_TRUE(hit(site::link));
  EXPECT_EQ(injected(), 1U);
  EXPECT_FALSE(hit(site::link)) << "each plan counted the first call: neither picks the second";
  EXPECT_EQ(error_for(site::link), EIO) << "the first plan whose scope holds the call";
  EXPECT_EQ(error_for(site::write), ENOSPC);
}

TEST(FaultSeam, TheLinkWrapperFailsWithoutMakingALink)
{
  const std::string from = ::testing::TempDir() + "/gpusort-link-seam-a";
  const std::string to = ::testing::TempDir() + "/gpusort-link-seam-b";
  ::unlink(to.c_str());
  const int fd = ::open(from.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    const armed a{plan{.group = scope::one, .target = site::link, .nth = 1, .error = EPERM}};
    errno = 0;
    EXPECT_EQ(sys::link(from.c_str(), to.c_str()), -1);
    EXPECT_EQ(errno, EPERM);
    struct stat st {};
    EXPECT_NE(::stat(to.c_str(), &st), 0) << "the failed link made the name";
    EXPECT_EQ(sys::link(from.c_str(), to.c_str()), 0) << "only the first call fails";
  }
  ::unlink(to.c_str());
  ::unlink(from.c_str());
}

TEST(FaultSeam, DisarmedCountsNothing)
{
  arm(plan{.group = scope::all, .nth = 1});
  disarm();
  EXPECT_FALSE(hit(site::open));
  EXPECT_EQ(calls(site::open), 0U);
}

TEST(FaultSeam, AWrapperFailsWithoutMakingTheCall)
{
  const std::size_t fds = test_support::open_fd_count();
  {
    const armed a{plan{.group = scope::one, .target = site::open, .nth = 1, .error = EACCES}};
    errno = 0;
    EXPECT_EQ(sys::open("/dev/null", O_RDONLY | O_CLOEXEC), -1);
    EXPECT_EQ(errno, EACCES);
    EXPECT_EQ(test_support::open_fd_count(), fds) << "the failed open opened something";
    const int fd = sys::open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << "only the first call fails";
    ::close(fd);
  }
  const armed a{plan{.group = scope::one, .target = site::truncate, .nth = 1}};
  EXPECT_EQ(sys::posix_fallocate(0, 0, 1), ENOSPC) << "posix_fallocate returns its error";
}

TEST(FaultSeam, AHostDeviceFaultIsTheErrorOfItsStatus)
{
  const armed a{plan{.group = scope::one, .target = site::launch, .nth = 1, .error = 2}};
  EXPECT_THROW(throw_device_fault(site::launch, "cpu"), out_of_memory);
  arm(plan{.group = scope::one, .target = site::launch, .nth = 1, .error = 1});
  EXPECT_THROW(throw_device_fault(site::launch, "cpu"), cuda_error);
  EXPECT_FALSE(device_lost()) << "cudaErrorInvalidValue leaves the context usable";
  arm(plan{.group = scope::one, .target = site::launch, .nth = 1, .sticky = true});
  EXPECT_THROW(throw_device_fault(site::launch, "cpu"), cuda_error);
  EXPECT_TRUE(device_lost()) << "a sticky status marks the devices lost for good";
}

}  // namespace
}  // namespace gpusort::detail::fault
