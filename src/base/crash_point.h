// A test-only crash point. CORRAL_TEST_CRASH_AT=<name> in the daemon's
// environment makes it SIGKILL itself when it reaches crash_point(name):
// the kill -9 that crash tests cannot time into the window between two
// writes from outside (tests/integration/daemon_restart_processes_test.cc).
// Unset (production): one getenv at first use, then a null check.
#pragma once

#include <signal.h>

#include <cstdlib>
#include <cstring>

namespace corral {

inline void crash_point(const char* name) {
  static const char* const armed = std::getenv("CORRAL_TEST_CRASH_AT");
  if (armed != nullptr && std::strcmp(armed, name) == 0) ::raise(SIGKILL);
}

}  // namespace corral
