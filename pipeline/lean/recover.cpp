// restore_interrupted_sort: a killed lean sort's file put back from its journal (journal.hpp).
#include "core/sys_io.hpp"
#include "pipeline/lean/journal.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace gpusort {

namespace {

/// Throws io_error unless `fd` is the file `id` names and holds `bytes` from its offset.
void check_file(int fd, const detail::lean::file_identity& id, std::uint64_t bytes,
                const std::string& what, const std::string& journal_name)
{
  struct stat st{};
  if (detail::sys::fstat(fd, &st) != 0)
    throw io_error{"cannot stat the " + what + " file: " + std::strerror(errno)};
  if (static_cast<std::uint64_t>(st.st_dev) != id.dev ||
      static_cast<std::uint64_t>(st.st_ino) != id.ino)
    throw io_error{journal_name + " is the journal of another " + what + " file"};
  if (static_cast<std::uint64_t>(st.st_size) < id.offset + bytes)
    throw io_error{"the " + what + " file is shorter than the array " + journal_name +
                   " describes"};
}

}  // namespace

void restore_interrupted_sort(int journal_fd, const std::string& journal_name, int keys_fd,
                              int values_fd)
{
  if (detail::lean::journal::untouched(journal_fd)) return;
  detail::lean::journal j = detail::lean::journal::open(journal_fd, journal_name);
  const std::uint64_t n = j.n();
  check_file(keys_fd, j.keys_file(), n * j.key_bytes(), "keys", journal_name);
  if (j.has_values_file()) {
    if (values_fd < 0)
      throw invalid_argument{journal_name + " is the journal of a sort of pairs: give the "
                                            "values file too"};
    check_file(values_fd, j.values_file(), n * j.value_bytes(), "values", journal_name);
  }
  const file_array keys{keys_fd, j.keys_file().offset, n * j.key_bytes(), "the keys file"};
  std::optional<file_array> values;
  if (j.has_values_file())
    values.emplace(values_fd, j.values_file().offset, n * j.value_bytes(), "the values file");
  const detail::lean::space s{.room_keys = j.room_keys(),
                              .room_values = values ? j.room_values() : nullptr,
                              .keys = static_cast<char*>(keys.data()),
                              .values = values ? static_cast<char*>(values->data()) : nullptr,
                              .room = j.room(),
                              .n = n,
                              .key_bytes = j.key_bytes(),
                              .value_bytes = values ? j.value_bytes() : 0};
  detail::lean::restore(j, s);
}

}  // namespace gpusort
