#include "cli/cli_output.h"

#include <cstdio>

namespace corral::cli {

int usage_error(std::string_view message, std::string_view usage) {
  fprintf(stderr, "corral: error: %.*s\n\n%.*s", static_cast<int>(message.size()), message.data(),
          static_cast<int>(usage.size()), usage.data());
  return 2;
}

}  // namespace corral::cli
