// corral: run untrusted code in Linux sandboxes. Dispatches on the verb.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: corral <command> [options]\n"
    "\n"
    "commands:\n"
    "  run [options] -- CMD [ARGS...]   run one command in a new sandbox\n"
    "  image build|import|ls|rm ...     manage base images\n"
    "  doctor                           check that this host can run sandboxes\n"
    "  version                          print the version\n"
    "\n"
    "`corral <command> --help` describes each command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fputs(kUsage, stderr);
    return 2;
  }
  std::string_view verb = argv[1];
  if (verb == "run") return corral::cli::run_command(argc - 1, argv + 1);
  if (verb == "image") return corral::cli::image_command(argc - 1, argv + 1);
  if (verb == "doctor") return corral::cli::doctor_command(argc - 1, argv + 1);
  if (verb == "version" || verb == "--version") {
    puts("corral 0.1.0");
    return 0;
  }
  if (verb == "help" || verb == "--help" || verb == "-h") {
    fputs(kUsage, stdout);
    return 0;
  }
  fprintf(stderr, "corral: unknown command \"%s\"\n\n%s", argv[1], kUsage);
  return 2;
}
