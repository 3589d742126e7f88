#include "client/files.hpp"

#include "client/args.hpp"
#include "core/checks.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>

#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <optional>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
#include <random>
#include <string_view>

namespace gpusort::cli {

namespace sys = detail::sys;

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Temporaries a signal handler must remove. Plain lock-free atomics: the only state a
// handler may touch. A command has at most two outputs, each with a temporary and, where
// RENAME_EXCHANGE is missing, a kept link to the file it replaces; the rest is headroom.
constexpr int max_temporaries = 8;
std::array<std::atomic<const char*>, max_temporaries> temporaries{};
static_assert(std::atomic<const char*>::is_always_lock_free);

int register_temporary(const char* path) noexcept
{
  for (int i = 0; i < max_temporaries; ++i) {
    const char* expected = nullptr;
    if (temporaries[static_cast<std::size_t>(i)].compare_exchange_strong(expected, path))
      return i;
  }
  return -1;
}

void unregister_temporary(int slot) noexcept
{
  if (slot >= 0) temporaries[static_cast<std::size_t>(slot)].store(nullptr);
}

extern "C" void on_fatal_signal(int sig)
{
  for (auto& t : temporaries)
    if (const char* p = t.load()) ::unlink(p);
  if (sig == SIGBUS) {
    static constexpr char message[] =
        "gpusort: I/O error in a mapped file (an input shrank while being read, or the disk "
        "failed)\n";
    if (::write(STDERR_FILENO, message, sizeof message - 1) < 0) {
    }
    ::_exit(exit_io);
  }
  // SA_RESETHAND restored the default action: terminate by the same signal, as the caller
  // (a shell, a job runner) expects.
  ::raise(sig);
}

/// Makes a file named after `path` in its folder (".NAME.gpusort-PID-RANDOM" + suffix) by
/// `create(name)`, which fails with EEXIST when the name is taken (another name is then tried),
/// and registers it for the signal cleanup. Returns what create returned: -1 with errno set
/// when it failed. The registry holds `name`'s characters: `name` must outlive `slot`.
template <class Create>
int create_beside(const fs::path& path, const char* suffix, std::string& name, int& slot,
                  Create create)
{
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path{"."};
  std::random_device random;
  // A fatal signal between making the file and registering it would leave it behind: hold
  // those signals until the registry knows the file.
  sigset_t fatal{}, previous{};
  sigemptyset(&fatal);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&fatal, sig);
  ::pthread_sigmask(SIG_BLOCK, &fatal, &previous);
  int rc = -1;
  for (int attempt = 0; rc < 0; ++attempt) {
    name = (dir / ("." + path.filename().string() + ".gpusort-" + std::to_string(::getpid()) +
                   "-" + std::to_string(random()) + suffix))
               .string();
    rc = create(name.c_str());
    if (rc < 0 && (errno != EEXIST || attempt == 16)) break;
  }
  const int err = errno;
  if (rc >= 0) slot = register_temporary(name.c_str());
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = err;
  return rc;
}

/// Whether process `pid` exists: one of another user's answers EPERM, and counts.
bool process_exists(pid_t pid) noexcept { return ::kill(pid, 0) == 0 || errno != ESRCH; }

/// The PID in `name` when it is a temporary create_beside() made for `prefix` (".NAME.gpusort-")
/// with suffix ".tmp", or the Python client's (its N in hex): ".NAME.gpusort-PID-N.tmp".
std::optional<pid_t> temporary_pid(std::string_view name, std::string_view prefix)
{
  constexpr std::string_view suffix = ".tmp";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view middle = name.substr(prefix.size(), name.size() - prefix.size() -
                                                                 suffix.size());
  const std::size_t dash = middle.find('-');
  if (dash == std::string_view::npos || dash + 1 == middle.size()) return std::nullopt;
  const std::string_view tail = middle.substr(dash + 1);
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (!std::all_of(tail.begin(), tail.end(), hex)) return std::nullopt;
  pid_t pid = 0;
  const auto [end, err] = std::from_chars(middle.data(), middle.data() + dash, pid);
  if (err != std::errc{} || end != middle.data() + dash || pid <= 0) return std::nullopt;
  return pid;
}

/// Removes the temporaries of output `path` that a writer killed before it could (kill -9, the
/// OOM killer) left in its folder; issue 43: full-size hidden files that no later run removed,
/// holding the room the next output needs. Only this user's regular files of our names, only
/// of processes that no longer exist, and only when nobody holds the lock every writer takes
/// on its temporary (it lasts as long as a descriptor of the file: a writer of another PID
/// namespace, or a daemon still writing, keeps it). Each removal is a warning on stderr.
void remove_stale_temporaries(const fs::path& path)
{
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path{"."};
  const std::string prefix = "." + path.filename().string() + ".gpusort-";
  DIR* const folder = ::opendir(dir.c_str());
  if (folder == nullptr) return;  // creating the temporary will say what is wrong
  const int dfd = ::dirfd(folder);
  while (const dirent* entry = ::readdir(folder)) {
    const std::optional<pid_t> pid = temporary_pid(entry->d_name, prefix);
    if (!pid || process_exists(*pid)) continue;
    const int fd = ::openat(dfd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {}, now {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
        ::fstatat(dfd, entry->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == st.st_dev && now.st_ino == st.st_ino &&
        ::unlinkat(dfd, entry->d_name, 0) == 0)
      spdlog::warn("removed {}, a temporary ({}) left by process {}, which no longer runs",
                   (dir / entry->d_name).string(),
                   format_bytes(static_cast<std::uint64_t>(st.st_size)), *pid);
    ::close(fd);
  }
  ::closedir(folder);
}

}  // namespace

int create_temporary_beside(const fs::path& path, std::string& name, int& slot)
{
  return create_beside(path, ".tmp", name, slot, [](const char* n) {
    return sys::open(n, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  });
}

void release_temporary(int slot) noexcept { unregister_temporary(slot); }

mapped_input::mapped_input(const fs::path& path) : path_{path}
{
  const int fd = sys::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw cli_error{exit_no_input, "cannot read " + path.string() + ": " + errno_text(err)};
  }
  struct stat st {};
  std::string failure;
  if (sys::fstat(fd, &st) != 0) {
    const int err = errno;
    failure = "cannot read " + path.string() + ": " + errno_text(err);
  } else if (!S_ISREG(st.st_mode)) {
    failure = "cannot read " + path.string() + ": not a regular file";
  } else if (st.st_size > 0) {
    size_ = static_cast<std::uint64_t>(st.st_size);
    void* p = sys::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    if (p == MAP_FAILED)
      failure = "cannot map " + path.string() + ": " + errno_text(err);
    else
      data_ = p;
  }
  ::close(fd);  // the mapping holds the file
  if (!failure.empty()) throw cli_error{exit_no_input, failure};
}

input_file::input_file(const fs::path& path) : path_{path}
{
  fd_ = sys::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    throw cli_error{exit_no_input, "cannot read " + path.string() + ": " + errno_text(err)};
  }
  struct stat st {};
  std::string failure;
  if (sys::fstat(fd_, &st) != 0) {
    const int err = errno;
    failure = "cannot read " + path.string() + ": " + errno_text(err);
  } else if (!S_ISREG(st.st_mode)) {
    failure = "cannot read " + path.string() + ": not a regular file";
  }
  if (!failure.empty()) {
    ::close(fd_);
    throw cli_error{exit_no_input, failure};
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

input_file::~input_file()
{
  if (fd_ >= 0) ::close(fd_);
}

mapped_input::~mapped_input()
{
  if (data_ != nullptr) ::munmap(data_, size_);
}

atomic_output::atomic_output(const fs::path& path, std::uint64_t size)
    : shown_{path.string()}, size_{size}
{
  const std::string& shown = shown_;
  std::error_code ec;
  path_ = fs::weakly_canonical(path, ec);
  if (ec || path_.empty()) path_ = path;
  if (path_.filename().empty())
    throw cli_error{exit_cant_create, "cannot write " + shown + ": not a file name"};

  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  // Renaming over a device or a folder would replace it rather than write into it.
  if (exists && S_ISDIR(st.st_mode))
    throw cli_error{exit_cant_create, "cannot write " + shown + ": it is a directory"};
  if (exists && !S_ISREG(st.st_mode))
    throw cli_error{exit_cant_create, "cannot write " + shown + ": not a regular file"};

  remove_stale_temporaries(path_);  // before the room check: their room counts
  fd_ = create_beside(path_, ".tmp", temp_, slot_, [](const char* name) {
    return sys::open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  });
  if (fd_ < 0) {
    const int err = errno;
    throw cli_error{denied_or(err, exit_cant_create),
                    "cannot write " + shown + ": " + errno_text(err)};
  }
  // Held as long as this process or the daemon it hands the descriptor to may write the file,
  // so that remove_stale_temporaries() of a later run leaves it alone. A filesystem without
  // locks (some NFS) keeps the check of the PID alone.
  static_cast<void>(::flock(fd_, LOCK_EX | LOCK_NB));

  std::string failure;
  if (exists && ::fchmod(fd_, st.st_mode & 07777) != 0) {
    const int err = errno;
    failure = "cannot write " + shown + ": " + errno_text(err);
  } else if (size_ > 0) {
    // Room for the whole output now turns a full disk into an error before the sort rather
    // than after it. Not posix_fallocate: on tmpfs it allocates and zeroes every page on this
    // thread before the sort starts; the engine makes them beside the sort instead.
    struct statvfs fs_info {};
    if (::fstatvfs(fd_, &fs_info) == 0 && fs_info.f_bavail * fs_info.f_frsize < size_) {
      failure = "cannot write " + shown + " (" + std::to_string(size_) + " bytes): only " +
                std::to_string(fs_info.f_bavail * fs_info.f_frsize) +
                " bytes free on its filesystem";
    } else if (sys::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      const int err = errno;
      failure = "cannot write " + shown + " (" + std::to_string(size_) + " bytes): " +
                errno_text(err);
    }
  }
  if (!failure.empty()) {
    ::close(fd_);
    ::unlink(temp_.c_str());
    unregister_temporary(slot_);
    throw cli_error{exit_cant_create, failure};
  }
}

stream_input::stream_input(int fd, std::string shown)
{
  // Reserved in steps that double (at least 64 MiB): mremap moves the pages, not their bytes.
  constexpr std::size_t first = std::size_t{64} << 20;
  const auto grow = [&](std::size_t want) {
    void* p = data_ == nullptr
                  ? sys::mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0)
                  : sys::mremap(data_, capacity_, want, MREMAP_MAYMOVE);
    if (p == MAP_FAILED)
      throw cli_error{exit_runtime, "out of memory reading " + shown + " (" +
                                        std::to_string(want) + " bytes)"};
    data_ = static_cast<char*>(p);
    capacity_ = want;
  };
  try {
    grow(first);
    for (;;) {
      if (size_ == capacity_) grow(capacity_ * 2);
      const ssize_t got = sys::read(fd, data_ + size_, std::min<std::size_t>(capacity_ - size_,
                                                                           std::size_t{1} << 30));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;
        throw cli_error{exit_io, "cannot read " + shown + ": " + errno_text(err)};
      }
      if (got == 0) break;
      size_ += static_cast<std::uint64_t>(got);
    }
  } catch (...) {
    if (data_ != nullptr) ::munmap(data_, capacity_);
    throw;
  }
}

stream_input::~stream_input()
{
  if (data_ != nullptr) ::munmap(data_, capacity_);
}

namespace {

/// Writes every byte, in pieces of at most 1 GiB and again after EINTR: with write() at the
/// descriptor's position (a stream), or with pwrite() from `offset` on.
void write_fully(int fd, const void* data, std::uint64_t bytes,
                 std::optional<std::uint64_t> offset, const std::string& shown)
{
  const auto* p = static_cast<const char*>(data);
  for (std::uint64_t done = 0; done < bytes;) {
    const std::size_t piece = std::min<std::uint64_t>(bytes - done, 1U << 30);
    const ssize_t put = offset
                            ? sys::pwrite(fd, p + done, piece, static_cast<off_t>(*offset + done))
                            : sys::write(fd, p + done, piece);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      const int err = errno;
      throw cli_error{exit_io, "cannot write " + shown + ": " + errno_text(err)};
    }
    done += static_cast<std::uint64_t>(put);
  }
}

}  // namespace

void write_all(int fd, const void* data, std::uint64_t bytes, const std::string& shown)
{
  write_fully(fd, data, bytes, std::nullopt, shown);
}

void write_all_at(int fd, const void* data, std::uint64_t bytes, std::uint64_t offset,
                  const std::string& shown)
{
  write_fully(fd, data, bytes, offset, shown);
}

void* atomic_output::map()
{
  if (data_ != nullptr || size_ == 0) return data_;
  void* p = sys::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw cli_error{exit_cant_create, "cannot map " + shown_ + ": " + errno_text(err)};
  }
  data_ = p;
  return data_;
}

void atomic_output::write_back_meanwhile()
{
  struct statfs fs_info {};
  if (write_back_.joinable() || size_ == 0 || ::fstatfs(fd_, &fs_info) != 0 ||
      fs_info.f_type == TMPFS_MAGIC)
    return;
  write_back_ = std::thread{[this] {
    // Only a head start for fsync: an error here is fsync's to report.
    while (!stop_write_back_.load()) {
      (void)::sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
      for (int i = 0; i < 20 && !stop_write_back_.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }};
}

void atomic_output::stop_write_back() noexcept
{
  stop_write_back_ = true;
  if (write_back_.joinable()) write_back_.join();
}

void atomic_output::sync(bool durable)
{
  stop_write_back();
  if ((data_ != nullptr && ::msync(data_, size_, MS_SYNC) != 0) ||
      (durable && sys::fsync(fd_) != 0)) {
    const int err = errno;
    throw cli_error{exit_io, "cannot write " + shown_ + ": " + errno_text(err)};
  }
  synced_ = true;
}

void atomic_output::swap_in(bool undoable)
{
  GPUSORT_EXPECTS(synced_ && !published_, "publish() an output once, after sync()");
  // RENAME_EXCHANGE keeps the replaced file (at the temporary's path) for undo_swap_in(); a
  // new path, or a filesystem without the exchange, takes a plain rename.
  const auto fail = [&](int err) {
    throw cli_error{exit_cant_create, "cannot replace " + shown_ + ": " + errno_text(err)};
  };
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (exists && sys::rename_exchange(temp_.c_str(), path_.c_str()) == 0) {
    replaced_old_ = true;
  } else {
    if (exists && errno != EINVAL && errno != ENOSYS) fail(errno);
    // The plain rename destroys the file it replaces: before it, keep that file under a
    // second name, or an undo would leave nothing at the path (issue 25: an in-place sort of
    // keys and values lost the keys file when the values then failed to publish).
    if (exists && undoable) keep_replaced();
    if (sys::rename(temp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      drop_kept();
      fail(err);
    }
  }
  published_ = true;
}

void atomic_output::keep_replaced()
{
  const int rc = create_beside(path_, ".old", kept_, kept_slot_, [&](const char* name) {
    return sys::link(path_.c_str(), name);
  });
  if (rc == 0) return;
  // Without a hard link (FAT, exFAT, some FUSE and network filesystems) nothing can keep the
  // replaced file short of copying it. Replacing it anyway would make all or nothing a hope:
  // a later output that failed would leave keys sorted beside values that are not, or the
  // keys published without their values; a demanding user would rather have the files as
  // they were and be told why. So nothing is replaced; a single output (publish(), or
  // publish_all of one) never asks for this and is published as usual.
  const int err = errno;
  kept_.clear();
  throw cli_error{exit_cant_create,
                  "cannot replace " + shown_ + " together with the other outputs: its " +
                      "filesystem has no renameat2(RENAME_EXCHANGE), and a hard link to keep " +
                      "it until all are in place failed (" + errno_text(err) +
                      "); nothing was replaced (write the outputs to new files instead)"};
}

void atomic_output::drop_kept() noexcept
{
  if (kept_.empty()) return;
  ::unlink(kept_.c_str());
  forget_kept();
}

void atomic_output::forget_kept() noexcept
{
  unregister_temporary(kept_slot_);
  kept_slot_ = -1;
  kept_.clear();
}

void atomic_output::undo_swap_in() noexcept
{
  if (!published_) return;
  // A kept file goes back by a plain rename, which also drops the output (its temporary name
  // is gone; the destructor's unlink of it finds nothing).
  const int rc = replaced_old_    ? ::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, path_.c_str(),
                                                RENAME_EXCHANGE)
                 : !kept_.empty() ? ::rename(kept_.c_str(), path_.c_str())
                                  : ::rename(path_.c_str(), temp_.c_str());
  if (rc == 0) {
    published_ = false;
    replaced_old_ = false;
    forget_kept();  // renamed back into place: nothing left to remove
  }
}

void atomic_output::commit() noexcept
{
  if (replaced_old_) ::unlink(temp_.c_str());  // the file the output replaced
  replaced_old_ = false;
  drop_kept();
  unregister_temporary(slot_);
  slot_ = -1;
  // The rename is durable only once the folder is; the data already is, so a failure here
  // changes nothing the caller could act on.
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path{"."};
  if (const int dfd = sys::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    sys::fsync(dfd);
    ::close(dfd);
  }
}

void atomic_output::publish()
{
  swap_in(false);  // nothing after it can fail: no undo, nothing to keep
  commit();
}

void publish_all(const std::vector<atomic_output*>& outputs)
{
  std::size_t done = 0;
  try {
    // The last output needs no undo: when it fails it was not published.
    for (; done < outputs.size(); ++done) outputs[done]->swap_in(done + 1 < outputs.size());
  } catch (...) {
    // Found by the CLI's fault sweep (tests/client/fault_cli_test.cpp): a failed rename of
    // the values left the keys file sorted in place beside the unsorted values.
    while (done > 0) outputs[--done]->undo_swap_in();
    throw;
  }
  for (atomic_output* out : outputs) out->commit();
}

atomic_output::~atomic_output()
{
  stop_write_back();
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  if (!published_ || replaced_old_) ::unlink(temp_.c_str());
  unregister_temporary(slot_);
  // A kept file still here is one an undo failed to put back: the only copy of what the
  // output replaced, so it stays (and the signal cleanup forgets it).
  unregister_temporary(kept_slot_);
}

void install_signal_cleanup()
{
  struct sigaction action {};
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGBUS})
    ::sigaction(sig, &action, nullptr);
}

bool same_file(const fs::path& a, const fs::path& b)
{
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const fs::path ca = fs::weakly_canonical(a, ec);
  const fs::path cb = fs::weakly_canonical(b, ec);
  return ca == cb;
}

}  // namespace gpusort::cli
