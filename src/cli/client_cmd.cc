#include <cstdio>

#include "cli/commands.h"

namespace corral::cli {
int client_command(int, char**) {
  fputs("corral: client commands are being written\n", stderr);
  return 2;
}
}  // namespace corral::cli
