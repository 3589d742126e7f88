// Whether a test runs under a sanitizer, for tests too long for its slowdown (ASan about 2x,
// TSan 5-15x) to run a shorter variant there (scripts/test.sh).
#pragma once

#include <cstdlib>

namespace gpusort::test_support {

/// True in a program built with ASan or TSan (the asan and tsan presets), and wherever the
/// sanitizer test presets set GPUSORT_TEST_SANITIZER (for programs a test starts, and scripts).
inline bool under_sanitizer()
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return std::getenv("GPUSORT_TEST_SANITIZER") != nullptr;
}

}  // namespace gpusort::test_support
