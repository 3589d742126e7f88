// Files of the command line: inputs mapped read-only, outputs written beside their final path
// and renamed over it only when complete, so that no failure leaves a partly written output.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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

/// All of a stream (standard input: a pipe, a terminal or a redirected file), read to its end
/// into anonymous memory that grows by mremap, so that growing never copies what was read.
/// Throws cli_error (exit_io, or exit_runtime when memory runs out) naming `shown`.
class stream_input {
 public:
  stream_input(int fd, std::string shown);
  ~stream_input();
  stream_input(const stream_input&) = delete;
  stream_input& operator=(const stream_input&) = delete;

  [[nodiscard]] char* data() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

 private:
  char* data_{};
  std::size_t capacity_{};
  std::uint64_t size_{};
};

/// Writes `bytes` to `fd`, a piece at a time where it is a pipe; throws cli_error (exit_io)
/// naming `shown` when a write fails.
void write_all(int fd, const void* data, std::uint64_t bytes, const std::string& shown);

/// Writes `bytes` to the file `fd` at `offset` (pwrite: the descriptor's position stays where it
/// was); throws cli_error (exit_io) naming `shown` when a write fails.
void write_all_at(int fd, const void* data, std::uint64_t bytes, std::uint64_t offset,
                  const std::string& shown);

/// Creates an empty file beside `path` under a temporary name (".NAME.gpusort-PID-N.tmp",
/// in `name`, which must outlive `slot`), open read-write, private to this user: a fatal signal
/// removes it until release_temporary(slot), and a later command removes it if this process
/// died with it (remove_stale_temporaries). Returns the descriptor, or -1 with errno set.
int create_temporary_beside(const std::filesystem::path& path, std::string& name, int& slot);
/// The signal cleanup forgets the temporary of `slot` (removed or renamed by the caller).
void release_temporary(int slot) noexcept;

/// An output of `size` bytes that lives in a temporary file in the final path's folder until
/// publish() renames it over the final path. Until then the final path is untouched; the
/// destructor removes an unpublished temporary, and so does a fatal signal (SIGINT, SIGTERM,
/// SIGHUP, SIGQUIT, SIGBUS) once install_signal_cleanup() has run.
///
/// The temporary is written through its descriptor (by the engine, which maps it when it lies
/// in tmpfs, or by the daemon); map() maps it for callers that fill it in memory. Its
/// filesystem must have room for `size` bytes when it is created; a disk that fills up later is
/// the writer's error.
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
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The temporary file, open read-write: what the engine or the daemon writes the sorted data to.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The path as given, for messages.
  [[nodiscard]] const std::string& shown() const noexcept { return shown_; }

  /// Starts writing the temporary's dirty pages back to its disk every 200 ms until sync(), so
  /// that the final fsync waits for the last part only, not for the whole output (a 4 GiB
  /// output on the H100 host's disk: 1.47 s of fsync after the sort). Nothing on tmpfs.
  void write_back_meanwhile();

  /// Makes the written bytes durable (msync, fsync; with `durable` false only a mapping's
  /// msync, for scratch files that need not survive a crash); throws cli_error on an I/O error.
  void sync(bool durable = true);
  /// Renames the temporary over the final path and syncs the folder. Call sync() first.
  void publish();

 private:
  friend void publish_all(const std::vector<atomic_output*>& outputs);
  /// Moves the output into place. With `undoable`, what it replaces is kept (at the
  /// temporary's path after RENAME_EXCHANGE, else under a hard link beside it) so that
  /// undo_swap_in() can put it back until commit() removes it; where neither works it throws
  /// and replaces nothing.
  void swap_in(bool undoable);
  void keep_replaced();
  void drop_kept() noexcept;    ///< removes the kept file and forgets it
  void forget_kept() noexcept;  ///< forgets the kept file (renamed back, or removed)
  void undo_swap_in() noexcept;
  void commit() noexcept;
  void stop_write_back() noexcept;

  std::filesystem::path path_;  ///< the final path, symbolic links resolved
  std::string shown_;           ///< the path as given, for messages
  std::string temp_;
  int fd_{-1};
  int slot_{-1};  ///< in the signal cleanup registry
  void* data_{};
  std::uint64_t size_{};
  bool synced_{};
  bool published_{};
  bool replaced_old_{};  ///< swap_in() exchanged: the temporary's path holds the old file
  std::string kept_;     ///< without the exchange: a hard link to the replaced file, or empty
  int kept_slot_{-1};    ///< kept_'s slot in the signal cleanup registry
  std::atomic<bool> stop_write_back_{false};
  std::thread write_back_;
};

/// Publishes several outputs of one job as one: each is swapped in, keeping the file it
/// replaces, and when one fails, those already in place are put back (an in-place sort of keys
/// and values must not leave sorted keys beside unsorted values), then the error is thrown.
/// Where the filesystem has neither RENAME_EXCHANGE nor hard links, an output that replaces a
/// file and is not the last is refused (cli_error, nothing replaced) rather than published
/// without a way back.
void publish_all(const std::vector<atomic_output*>& outputs);

/// Installs handlers that remove unpublished temporaries on fatal signals: SIGINT, SIGTERM,
/// SIGHUP and SIGQUIT then terminate by the same signal; SIGBUS (an I/O error in a mapped
/// file: the input was truncated, or the disk is full) prints one line and exits 74 (EX_IOERR).
void install_signal_cleanup();

/// Whether two paths name the same file, for existing files, or the same location otherwise.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace gpusort::cli
