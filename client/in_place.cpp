#include "client/in_place.hpp"

#include "client/args.hpp"
#include "client/files.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace gpusort::cli {

namespace fs = std::filesystem;
namespace sys = detail::sys;

fs::path journal_path_of(const fs::path& data)
{
  return data.parent_path() / ("." + data.filename().string() + ".gpusort-journal");
}

bool in_memory_file_system(const fs::path& path)
{
  struct statfs st{};
  const fs::path folder = path.parent_path().empty() ? fs::path{"."} : path.parent_path();
  if (::statfs(folder.c_str(), &st) != 0) return false;
  return st.f_type == TMPFS_MAGIC || st.f_type == RAMFS_MAGIC;
}

writable_file::writable_file(const fs::path& path) : path_{path}
{
  fd_ = sys::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw cli_error{denied_or(err, exit_no_input),
                    "cannot sort " + path.string() + " in place: " + std::strerror(err)};
  }
}

writable_file::~writable_file()
{
  if (fd_ >= 0) ::close(fd_);
}

void writable_file::sync(bool durable) const
{
  if (durable && sys::fsync(fd_) != 0)
    throw cli_error{exit_io, "cannot sync " + path_.string() + ": " + std::strerror(errno)};
}

lean_journal::lean_journal(const fs::path& keys) : path_{journal_path_of(keys)}
{
  // Made under a temporary name (create_temporary_beside: removed by a fatal signal, or by the
  // next command if this one dies before it is gone) and locked before it takes the journal's
  // name: a second command must never find the journal unlocked while this sort lives, or it
  // would take it for a killed sort's, put the elements "back" and sort the file beside this
  // one.
  std::string temporary;
  int slot = -1;
  fd_ = create_temporary_beside(keys, temporary, slot);
  if (fd_ < 0) {
    const int err = errno;
    throw cli_error{denied_or(err, exit_cant_create),
                    "cannot create the journal " + path_.string() + ": " + std::strerror(err)};
  }
  const auto give_up = [&](exit_code code, const std::string& why) {
    ::unlink(temporary.c_str());
    release_temporary(slot);
    ::close(fd_);
    fd_ = -1;
    throw cli_error{code, why};
  };
  // Held while the sort runs: a second command finds the journal locked and leaves it alone
  // (restore_interrupted).
  if (::lockf(fd_, F_TLOCK, 0) != 0)
    give_up(exit_try_later, "cannot lock the journal " + path_.string() + ": " +
                                std::strerror(errno));
  if (::link(temporary.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    if (err == EEXIST)
      give_up(exit_try_later, keys.string() + " is being sorted by another command (its "
                                              "journal " +
                                  path_.string() + " exists)");
    give_up(denied_or(err, exit_cant_create),
            "cannot create the journal " + path_.string() + ": " + std::strerror(err));
  }
  ::unlink(temporary.c_str());
  release_temporary(slot);
}

lean_journal::~lean_journal()
{
  if (fd_ < 0) return;
  if (!keep_) ::unlink(path_.c_str());
  ::close(fd_);
}

bool lean_journal::restore(int keys_fd, int values_fd) noexcept
{
  try {
    restore_interrupted_sort(fd_, path_.string(), keys_fd, values_fd);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpusort: the sorted files could not be restored (%s); %s keeps where "
                         "every element is: run gpusort recover\n",
                 e.what(), path_.c_str());
    keep_ = true;
    return false;
  }
}

bool restore_interrupted(const fs::path& keys, const std::optional<fs::path>& values, bool quiet)
{
  const fs::path journal = journal_path_of(keys);
  const int fd = sys::open(journal.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return false;
    const int err = errno;
    throw cli_error{denied_or(err, exit_io),
                    "cannot open the journal " + journal.string() + ": " + std::strerror(err)};
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } guard{fd};
  // One sort of a file at a time: a journal another command holds open is its live one.
  if (::lockf(fd, F_TLOCK, 0) != 0)
    throw cli_error{exit_try_later, keys.string() + " is being sorted by another command (its "
                                                    "journal " +
                                        journal.string() + " is in use)"};
  const writable_file k{keys};
  std::optional<writable_file> v;
  if (values) v.emplace(*values);
  if (!quiet)
    std::fprintf(stderr, "gpusort: a sort of %s was interrupted; putting its elements back from "
                         "%s\n",
                 keys.c_str(), journal.c_str());
  try {
    restore_interrupted_sort(fd, journal.string(), k.fd(), v ? v->fd() : -1);
  } catch (const invalid_argument& e) {
    throw cli_error{exit_usage, e.what()};
  } catch (const std::exception& e) {
    throw cli_error{exit_io, std::string{"cannot restore "} + keys.string() + ": " + e.what()};
  }
  k.sync(true);
  if (v) v->sync(true);
  if (::unlink(journal.c_str()) != 0 && errno != ENOENT)
    throw cli_error{exit_io, "cannot remove " + journal.string() + ": " + std::strerror(errno)};
  if (!quiet)
    std::fprintf(stderr, "gpusort: %s holds its elements again (not sorted)\n", keys.c_str());
  return true;
}

void refuse_if_interrupted(const fs::path& data)
{
  const fs::path journal = journal_path_of(data);
  if (::access(journal.c_str(), F_OK) != 0) return;
  throw cli_error{exit_data, "a sort of " + data.string() + " was interrupted and " +
                                 journal.string() + " holds some of its elements: run gpusort "
                                                    "recover " +
                                 data.string() + " (or sort it again)"};
}

}  // namespace gpusort::cli
