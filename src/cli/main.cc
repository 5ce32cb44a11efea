// corral: run untrusted code in Linux sandboxes. Dispatches on the verb.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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
    "  audit verify|tail ...            check or show the daemon's audit log\n"
    "  serve [options]                  run the daemon (HTTP API)\n"
    "  secrets keygen|encrypt|check     manage the daemon's secret store files\n"
    "  create|ls|inspect|exec|cp|rm     talk to the daemon (see `corral create --help`)\n"
    "  task run|get|ls|cancel|outputs   tasks of the daemon (`corral task --help`)\n"
    "  volume create|ls|rm              the daemon's named persistent volumes\n"
    "  snapshot ls|get|rm ...           the daemon's failure snapshots\n"
    "  diagnose ID                      why a sandbox failed (live or destroyed)\n"
    "  mcp                              an MCP server on stdio for agent hosts\n"
    "  version                          print the version\n"
    "\n"
    "`corral <command> --help` describes each command.\n";

}  // namespace

int main(int argc, char** argv) {
  // A closed stdin/stdout/stderr would be reused by the next open(), and
  // that host fd would then be handed to the sandbox as its stdio.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (null_fd < 0) return 125;
      if (null_fd != fd) {
        dup2(null_fd, fd);
        close(null_fd);
      }
    }
  }
  if (argc < 2) {
    fputs(kUsage, stderr);
    return 2;
  }
  std::string_view verb = argv[1];
  if (verb == "run") return corral::cli::run_command(argc - 1, argv + 1);
  if (verb == "image") return corral::cli::image_command(argc - 1, argv + 1);
  if (verb == "audit") return corral::cli::audit_command(argc - 1, argv + 1);
  if (verb == "doctor") return corral::cli::doctor_command(argc - 1, argv + 1);
  if (verb == "serve") return corral::cli::serve_command(argc - 1, argv + 1);
  if (verb == "secrets") return corral::cli::secrets_command(argc - 1, argv + 1);
  if (verb == "snapshot") return corral::cli::snapshot_command(argc - 1, argv + 1);
  if (verb == "create" || verb == "ls" || verb == "inspect" || verb == "exec" || verb == "cp" ||
      verb == "rm" || verb == "task" || verb == "volume" || verb == "diagnose" || verb == "mcp")
    return corral::cli::client_command(argc, argv);
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
