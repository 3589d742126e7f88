// The host I/O calls of the tree, each behind a fault-injection seam (core/fault.hpp): the same
// signature and errno convention as the system call, and when a test armed a plan that picks
// this call, the call is not made and it fails with the plan's errno. Unarmed, one relaxed
// atomic load before the call. No CUDA here: service/ and client/ use it.
#pragma once

#include "core/fault.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

namespace gpusort::detail::sys {

namespace seam {
/// True (errno set) when this call of class `s` is to fail.
inline bool fails(fault::site s) noexcept
{
  if (!fault::hit(s)) [[likely]]
    return false;
  errno = fault::error_for(s);
  return true;
}
}  // namespace seam

inline int open(const char* path, int flags, mode_t mode = 0) noexcept
{
  return seam::fails(fault::site::open) ? -1 : ::open(path, flags, mode);
}
inline ssize_t read(int fd, void* buf, size_t n) noexcept
{
  return seam::fails(fault::site::read) ? -1 : ::read(fd, buf, n);
}
inline ssize_t pread(int fd, void* buf, size_t n, off_t at) noexcept
{
  return seam::fails(fault::site::read) ? -1 : ::pread(fd, buf, n, at);
}
inline ssize_t write(int fd, const void* buf, size_t n) noexcept
{
  return seam::fails(fault::site::write) ? -1 : ::write(fd, buf, n);
}
inline ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) noexcept
{
  return seam::fails(fault::site::write) ? -1 : ::pwrite(fd, buf, n, at);
}
inline void* mmap(void* addr, size_t n, int prot, int flags, int fd, off_t off) noexcept
{
  return seam::fails(fault::site::mmap) ? MAP_FAILED : ::mmap(addr, n, prot, flags, fd, off);
}
inline void* mremap(void* old, size_t old_n, size_t n, int flags) noexcept
{
  return seam::fails(fault::site::mmap) ? MAP_FAILED : ::mremap(old, old_n, n, flags);
}
inline int fstat(int fd, struct stat* st) noexcept
{
  return seam::fails(fault::site::stat) ? -1 : ::fstat(fd, st);
}
inline int fsync(int fd) noexcept { return seam::fails(fault::site::sync) ? -1 : ::fsync(fd); }
inline int fdatasync(int fd) noexcept
{
  return seam::fails(fault::site::sync) ? -1 : ::fdatasync(fd);
}
inline int rename(const char* from, const char* to) noexcept
{
  return seam::fails(fault::site::rename) ? -1 : ::rename(from, to);
}
/// renameat2 with RENAME_EXCHANGE: both paths must exist; each then names the other's file.
inline int rename_exchange(const char* a, const char* b) noexcept
{
  return seam::fails(fault::site::exchange)
             ? -1
             : ::renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
}
/// A second name for a file: where RENAME_EXCHANGE is missing, what keeps a replaced file.
inline int link(const char* existing, const char* name) noexcept
{
  return seam::fails(fault::site::link) ? -1 : ::link(existing, name);
}
inline int ftruncate(int fd, off_t n) noexcept
{
  return seam::fails(fault::site::truncate) ? -1 : ::ftruncate(fd, n);
}
inline int fallocate(int fd, int mode, off_t at, off_t n) noexcept
{
  return seam::fails(fault::site::truncate) ? -1 : ::fallocate(fd, mode, at, n);
}
/// posix_fallocate returns the error instead of setting errno.
inline int posix_fallocate(int fd, off_t at, off_t n) noexcept
{
  return fault::hit(fault::site::truncate) ? fault::error_for(fault::site::truncate)
                                           : ::posix_fallocate(fd, at, n);
}
inline int memfd_create(const char* name, unsigned flags) noexcept
{
  return seam::fails(fault::site::memfd) ? -1 : ::memfd_create(name, flags);
}
inline ssize_t sendmsg(int fd, const msghdr* msg, int flags) noexcept
{
  return seam::fails(fault::site::send) ? -1 : ::sendmsg(fd, msg, flags);
}
inline ssize_t recvmsg(int fd, msghdr* msg, int flags) noexcept
{
  return seam::fails(fault::site::recv) ? -1 : ::recvmsg(fd, msg, flags);
}

}  // namespace gpusort::detail::sys
