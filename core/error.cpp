#include <gpusort/error.hpp>

#include <spdlog/spdlog.h>

namespace gpusort::detail {

void throw_expects(const char* condition, const char* message, const char* file, int line)
{
  throw logic_error{std::string{"gpusort: "} + message + " (expected " + condition + " at " +
                    file + ":" + std::to_string(line) + ")"};
}

void log_destructor_error(const char* what, const char* file, int line) noexcept
{
  try {
    spdlog::error("CUDA call failed in a destructor at {}:{}: {}", file, line, what);
  } catch (...) {  // logging must not throw out of a destructor
  }
}

}  // namespace gpusort::detail
