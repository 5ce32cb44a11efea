// How every verb reports an error: "corral: error: <message>" and, when
// known, "hint: <what to do>" on stderr (docs/error-handling.md).
#pragma once

#include <string_view>

#include "base/error_output.h"
#include "base/result.h"

namespace corral::cli {

// The printer lives in base (the daemon's `serve` uses it too).
using corral::print_error;

// A verb's usage mistake: the message, then the verb's usage text. Exit 2.
int usage_error(std::string_view message, std::string_view usage);
// A verb that failed after its arguments were fine. Exit 1.
inline int command_failure(const Error& e) {
  print_error(e);
  return 1;
}

}  // namespace corral::cli
