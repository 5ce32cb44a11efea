#include "base/error_output.h"

#include <cstdio>

namespace corral {

void print_error(std::string_view message, std::string_view hint) {
  fprintf(stderr, "corral: error: %.*s\n", static_cast<int>(message.size()), message.data());
  if (!hint.empty()) fprintf(stderr, "hint: %.*s\n", static_cast<int>(hint.size()), hint.data());
}

}  // namespace corral
