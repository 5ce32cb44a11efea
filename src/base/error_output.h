// How corral reports an error on stderr: "corral: error: <message>" and,
// when known, "hint: <what to do>" (docs/error-handling.md). In base so
// that the CLI's verbs and `corral serve` (src/daemon) print the same
// lines without the daemon depending on the CLI.
#pragma once

#include <string_view>

#include "base/result.h"

namespace corral {

void print_error(std::string_view message, std::string_view hint);
inline void print_error(const Error& e) { print_error(e.message, e.hint); }

}  // namespace corral
