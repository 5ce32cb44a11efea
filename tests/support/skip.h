// One way to skip a test (STYLE.md "Tests"): a test that needs something
// the host lacks (root, a kernel feature, a tool) skips with the reason
// printed, and CORRAL_MUST_WORK=1 (set by .ci/run) turns that skip into a
// failure, so that a CI host missing a feature or an install step goes red
// instead of green. Header-only: the unit tests include it without linking
// the sandbox harness. A plain GTEST_SKIP in tests/ is only for a reason
// that holds on any host and carries a comment saying why.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace corral::testing {

// CORRAL_MUST_WORK=1: every skip is a failure.
inline bool must_work() {
  const char* v = std::getenv("CORRAL_MUST_WORK");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace corral::testing

// Skips with the reason printed, unless CORRAL_MUST_WORK=1 makes it a failure.
#define CORRAL_SKIP_OR_FAIL(reason)                                            \
  do {                                                                         \
    if (::corral::testing::must_work()) {                                      \
      FAIL() << "required feature missing (CORRAL_MUST_WORK=1): " << (reason); \
    }                                                                          \
    GTEST_SKIP() << (reason);                                                  \
  } while (0)
