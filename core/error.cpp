#include <gpusort/error.hpp>

#include "core/checks.hpp"
#include "core/log.hpp"

namespace gpusort::detail {

void throw_expects(const char* condition, const char* message, const char* file, int line)
{
  throw logic_error{std::string{"gpusort: "} + message + " (expected " + condition + " at " +
                    file + ":" + std::to_string(line) + ")"};
}

void log_destructor_error(const char* what, const char* file, int line) noexcept
{
  log(log_level::error, "CUDA call failed in a destructor at {}:{}: {}", file, line, what);
}

}  // namespace gpusort::detail
