// Who may use the daemon (service/peer.hpp): the decision for given uids, gids and supplementary
// groups, and the credentials read from a real socket, supplementary groups included
// (SO_PEERGROUPS), which is how a user added to the gpusort group gets in.
#include "service/peer.hpp"

#include "service/unique_fd.hpp"

#include <gtest/gtest.h>

#include <grp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpusort::service {
namespace {

using ids = std::vector<std::uint32_t>;

config lists(ids uids, ids gids)
{
  config c;
  c.allowed_uids = std::move(uids);
  c.allowed_gids = std::move(gids);
  return c;
}

peer_credentials peer(std::uint32_t uid, std::uint32_t gid, ids groups = {})
{
  return {.pid = 42, .uid = uid, .gid = gid, .groups = std::move(groups)};
}

TEST(Peer, BothListsEmptyServeTheDaemonsUserAndRoot)
{
  const config none = lists({}, {});
  EXPECT_TRUE(allowed(peer(500, 500), none, 500));
  EXPECT_TRUE(allowed(peer(0, 0), none, 500));
  EXPECT_FALSE(allowed(peer(1000, 500, {500}), none, 500)) << "groups do not count then";
}

TEST(Peer, ListedUidOrPrimaryGid)
{
  const config c = lists({1000}, {990});
  EXPECT_TRUE(allowed(peer(1000, 1000), c, 500));
  EXPECT_TRUE(allowed(peer(1001, 990), c, 500));
  EXPECT_FALSE(allowed(peer(1001, 1001), c, 500));
  // Root and the daemon's own user are not implied once a list is set.
  EXPECT_FALSE(allowed(peer(0, 0), c, 500));
  EXPECT_FALSE(allowed(peer(500, 500), c, 500));
}

// Issue 25: a user added to the gpusort group (usermod -aG) has it as a supplementary group;
// their primary group stays their own.
TEST(Peer, ListedSupplementaryGroup)
{
  const config c = lists({}, {990});
  EXPECT_TRUE(allowed(peer(1001, 1001, {1001, 27, 990}), c, 500));
  EXPECT_FALSE(allowed(peer(1001, 1001, {1001, 27}), c, 500));
  EXPECT_TRUE(allowed(peer(1001, 1001, {990}), lists({5}, {990}), 500));
}

TEST(Peer, DescribeNamesTheGroups)
{
  EXPECT_EQ(describe(peer(1000, 1000)), "pid 42, uid 1000, gid 1000");
  EXPECT_EQ(describe(peer(1000, 1000, {1000, 27})), "pid 42, uid 1000, gid 1000, groups 1000,27");
}

ids sorted(ids v)
{
  std::sort(v.begin(), v.end());
  return v;
}

/// This process's supplementary groups, as getgroups() lists them.
ids own_groups()
{
  std::vector<gid_t> g(static_cast<std::size_t>(std::max(::getgroups(0, nullptr), 0)));
  const int n = ::getgroups(static_cast<int>(g.size()), g.data());
  g.resize(static_cast<std::size_t>(std::max(n, 0)));
  return ids(g.begin(), g.end());
}

struct socket_pair {
  socket_pair()
  {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
      a.reset(fds[0]);
      b.reset(fds[1]);
    }
  }
  unique_fd a, b;
};

TEST(Peer, ReadsTheOwnCredentialsAndGroupsOfASocketPair)
{
  const socket_pair s;
  ASSERT_TRUE(s.a);
  const peer_credentials p = peer_of(s.a.get());
  EXPECT_EQ(p.pid, ::getpid());
  EXPECT_EQ(p.uid, ::geteuid());
  EXPECT_EQ(p.gid, ::getegid());
  // The kernel supports SO_PEERGROUPS where these tests run (Linux 4.13 and later): the groups
  // are exactly this process's, possibly none beyond the primary one.
  EXPECT_EQ(sorted(p.groups), sorted(own_groups()));
  const auto groups = peer_groups(s.b.get());
  ASSERT_TRUE(groups.has_value());
  EXPECT_EQ(sorted(*groups), sorted(own_groups()));
}

// More groups than the first buffer holds: the kernel answers ERANGE with the size it needs,
// and the second call reads them all. Needs root to set the groups (in a child process).
TEST(Peer, ManySupplementaryGroupsAreReadWhole)
{
  if (::geteuid() != 0) GTEST_SKIP() << "setgroups needs root";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::vector<gid_t> many;
    for (gid_t g = 5000; g < 5100; ++g) many.push_back(g);
    if (::setgroups(many.size(), many.data()) != 0) ::_exit(2);
    const socket_pair s;
    try {
      const peer_credentials p = peer_of(s.a.get());
      ::_exit(sorted(p.groups) == ids(many.begin(), many.end()) ? 0 : 1);
    } catch (...) {
      ::_exit(3);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: groups differ, 2: setgroups failed, 3: peer_of threw";
}

}  // namespace
}  // namespace gpusort::service
