// Files sorted where they lie, within a host memory limit (issue 39): the lean path's journal
// beside the file while it runs, and what the next command does with one that a kill left.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace gpusort::cli {

/// `.NAME.gpusort-journal` in the folder of `data`: where a lean in-place sort of it keeps its
/// journal and its room.
std::filesystem::path journal_path_of(const std::filesystem::path& data);

/// Where a lean sort of `keys` (and `values`) was killed, puts every element back into the files
/// from the journal it left, removes the journal and says so on stderr (unless `quiet`).
/// Returns whether there was one. Throws cli_error where the journal cannot be used (another
/// file's, damaged: it stays, and nothing is written) or a file cannot be opened for writing.
bool restore_interrupted(const std::filesystem::path& keys,
                         const std::optional<std::filesystem::path>& values, bool quiet);

/// Throws cli_error (exit_data) naming the way out where `data` has a journal of an interrupted
/// sort: some of its elements may lie in the journal, not in the file.
void refuse_if_interrupted(const std::filesystem::path& data);

/// Whether the file system that holds `path` keeps its files in memory (tmpfs, ramfs), so that
/// a temporary there costs host memory.
bool in_memory_file_system(const std::filesystem::path& path);

/// A regular file opened for reading and writing: an in-place sort's keys or values.
class writable_file {
 public:
  explicit writable_file(const std::filesystem::path& path);
  ~writable_file();
  writable_file(const writable_file&) = delete;
  writable_file& operator=(const writable_file&) = delete;
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// fsync, unless `durable` is false; throws cli_error (exit_io).
  void sync(bool durable) const;

 private:
  std::filesystem::path path_;
  int fd_{-1};
};

/// A new journal beside `keys` for one lean in-place sort (O_EXCL: one sort of a file at a
/// time). Removed when this goes, unless keep() was called (a restore that failed).
class lean_journal {
 public:
  explicit lean_journal(const std::filesystem::path& keys);
  ~lean_journal();
  lean_journal(const lean_journal&) = delete;
  lean_journal& operator=(const lean_journal&) = delete;
  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  /// After a failed sort: puts every element back (the engine has done so unless it could
  /// not; this is idempotent) so that the journal may go. False, and the journal is kept, where
  /// that failed too.
  bool restore(int keys_fd, int values_fd) noexcept;
  void keep() noexcept { keep_ = true; }

 private:
  std::filesystem::path path_;
  int fd_{-1};
  bool keep_{};
};

}  // namespace gpusort::cli
