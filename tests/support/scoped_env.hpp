// An environment variable set for a scope (a measurement switch, core/switches.hpp), its old
// value (or its absence) restored after. Tests that set one run on the test's own thread while
// no job runs: the engine reads switches when a job starts.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace gpusort::test {

class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_{name}
  {
    if (const char* was = std::getenv(name)) was_ = was;
    set(value);
  }
  ~scoped_env()
  {
    if (was_)
      ::setenv(name_.c_str(), was_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  /// Another value within the same scope.
  void set(const char* value) { ::setenv(name_.c_str(), value, 1); }

 private:
  std::string name_;
  std::optional<std::string> was_;
};

}  // namespace gpusort::test
