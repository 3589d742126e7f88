// A temporary folder for a benchmark's daemon, files and sockets, removed with everything in it
// when the benchmark ends (also by an exception: bench_cli.hpp's run_main catches it after the
// destructors ran). `prefix` names it under $TMPDIR: gpusort-bench-XXXXXX by default.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace gpusort::bench {

class temp_folder {
 public:
  explicit temp_folder(const std::string& prefix = "gpusort-bench")
  {
    std::string name = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(name.data()) == nullptr)
      throw std::system_error{errno, std::generic_category(), "mkdtemp " + name};
    path_ = name;
  }
  ~temp_folder()
  {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  temp_folder(const temp_folder&) = delete;
  temp_folder& operator=(const temp_folder&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace gpusort::bench
