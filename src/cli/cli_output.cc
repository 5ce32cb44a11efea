#include "cli/cli_output.h"

#include <cstdio>

namespace corral::cli {

void print_error(std::string_view message, std::string_view hint) {
  fprintf(stderr, "corral: error: %.*s\n", static_cast<int>(message.size()), message.data());
  if (!hint.empty()) fprintf(stderr, "hint: %.*s\n", static_cast<int>(hint.size()), hint.data());
}

int usage_error(std::string_view message, std::string_view usage) {
  fprintf(stderr, "corral: error: %.*s\n\n%.*s", static_cast<int>(message.size()), message.data(),
          static_cast<int>(usage.size()), usage.data());
  return 2;
}

}  // namespace corral::cli
