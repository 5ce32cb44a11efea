// serve.diagnostics (REQUIREMENTS.md T1; docs/config.md): how long a
// destroyed sandbox's diagnostics are kept and how many refusals in full.
#pragma once

#include <chrono>
#include <cstddef>

namespace corral::daemon {

struct DiagnosticsConfig {
  // How long a destroyed sandbox's diagnostics are kept (then pruned).
  std::chrono::milliseconds retention{std::chrono::hours(24)};
  // How many blocked requests and secret failures are kept in full.
  std::size_t keep_last = 20;
};

}  // namespace corral::daemon
