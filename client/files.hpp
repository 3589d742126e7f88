// Files of the command line: inputs mapped read-only, outputs written beside their final path
// and renamed over it only when complete, so that no failure leaves a partly written output.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>

namespace gpusort::cli {

/// A regular file mapped read-only; an empty file maps to nothing (data() is null).
/// Throws cli_error (exit_runtime) naming the file when it cannot be opened or mapped.
class mapped_input {
 public:
  explicit mapped_input(const std::filesystem::path& path);
  ~mapped_input();
  mapped_input(const mapped_input&) = delete;
  mapped_input& operator=(const mapped_input&) = delete;

  [[nodiscard]] const void* data() const noexcept { return data_; }
  /// For the engine's type-erased arrays, which are writable views; the mapping is read-only,
  /// so a write through it would fault: only pass it as a source.
  [[nodiscard]] void* source() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  void* data_{};
  std::uint64_t size_{};
};

/// A regular file opened read-only, not mapped: its descriptor goes to the daemon, which reads
/// the file itself (the daemon never opens a path a client names). Throws cli_error
/// (exit_runtime) naming the file when it cannot be opened or is not a regular file.
class input_file {
 public:
  explicit input_file(const std::filesystem::path& path);
  ~input_file();
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int fd_{-1};
  std::uint64_t size_{};
};

/// An output of `size` bytes that lives in a temporary file in the final path's folder until
/// publish() renames it over the final path. Until then the final path is untouched; the
/// destructor removes an unpublished temporary, and so does a fatal signal (SIGINT, SIGTERM,
/// SIGHUP, SIGQUIT, SIGBUS) once install_signal_cleanup() has run.
///
/// The temporary is written through its descriptor (the engine's positioned writes, or the
/// daemon's); map() maps it for callers that fill it in memory. Its filesystem must have room
/// for `size` bytes when it is created; a disk that fills up later is the writer's error.
///
/// An existing final path keeps its permissions; a symbolic link is followed, so that sorting
/// through a link replaces the file it names rather than the link.
class atomic_output {
 public:
  atomic_output(const std::filesystem::path& path, std::uint64_t size);
  ~atomic_output();
  atomic_output(const atomic_output&) = delete;
  atomic_output& operator=(const atomic_output&) = delete;

  /// Maps the temporary read-write (once) and returns its bytes; null for an empty output.
  [[nodiscard]] void* map();
  /// Where the engine should write: the temporary mapped, when it lies in tmpfs, with its pages
  /// created by a background thread from now on; else null (write through fd()).
  ///
  /// Why: tmpfs creates a page for every 4 KiB written, under the file's lock, at 2.2-3.4 GB/s
  /// however many threads write (H100 host, bench/results/h100-20261125-489f82d-io-shm.json:
  /// pwrite from 16 threads 2.21, one thread 2.64, fallocate then pwrite 2.89, mapped with
  /// MADV_POPULATE_WRITE 3.44 GB/s). Created ahead, while the engine starts and sorts, the
  /// pages then take the sorted bytes by parallel copies at memory speed. The mapping is of
  /// this command's own temporary: a disk that fills up meanwhile is a SIGBUS, which the
  /// handler of install_signal_cleanup() turns into one line, exit 74 and no temporary.
  [[nodiscard]] void* memory_target();
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The temporary file, open read-write: what the engine or the daemon writes the sorted data to.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The path as given, for messages.
  [[nodiscard]] const std::string& shown() const noexcept { return shown_; }

  /// Makes the written bytes durable (msync, fsync; with `durable` false only a mapping's
  /// msync, for scratch files that need not survive a crash); throws cli_error on an I/O error.
  void sync(bool durable = true);
  /// Renames the temporary over the final path and syncs the folder. Call sync() first.
  void publish();

 private:
  std::filesystem::path path_;  ///< the final path, symbolic links resolved
  std::string shown_;           ///< the path as given, for messages
  std::string temp_;
  int fd_{-1};
  int slot_{-1};  ///< in the signal cleanup registry
  void* data_{};
  std::uint64_t size_{};
  bool synced_{};
  bool published_{};
  std::thread preparing_;  ///< creates the pages of a memory_target()
};

/// Installs handlers that remove unpublished temporaries on fatal signals: SIGINT, SIGTERM,
/// SIGHUP and SIGQUIT then terminate by the same signal; SIGBUS (an I/O error in a mapped
/// file: the input was truncated, or the disk is full) prints one line and exits 74 (EX_IOERR).
void install_signal_cleanup();

/// Whether two paths name the same file, for existing files, or the same location otherwise.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace gpusort::cli
