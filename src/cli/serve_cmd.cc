// corral serve: the daemon (docs/operations.md, docs/api.md).
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "daemon/daemon_main.h"

namespace corral::cli {

namespace {

constexpr const char* kServeUsage =
    "usage: corral serve [options]\n"
    "\n"
    "Runs the corral daemon in the foreground: the HTTP API on a loopback\n"
    "port (bearer key) and on a unix socket (mode 0600, no key).\n"
    "\n"
    "options:\n"
    "  --config FILE        daemon configuration (YAML; see docs/config.md)\n"
    "  --listen HOST:PORT   TCP address (default 127.0.0.1:7070)\n"
    "  --no-tcp             serve only the unix socket\n"
    "  --socket PATH        unix socket (default /run/corral/corral.sock)\n"
    "  --data-dir DIR       state, audit log and key (default /var/lib/corral)\n"
    "  --api-key-file FILE  accepted API keys, one per line (mode 0600)\n";

}  // namespace

int serve_command(int argc, char** argv) {
  daemon::ServeFlags flags;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string& out) -> bool {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      fputs(kServeUsage, stdout);
      return 0;
    }
    std::string v;
    if (a == "--config") {
      if (!value(flags.config_path)) return usage_error("--config needs a file", kServeUsage);
    } else if (a == "--listen") {
      if (!value(flags.listen)) return usage_error("--listen needs HOST:PORT", kServeUsage);
    } else if (a == "--socket") {
      if (!value(flags.socket_path)) return usage_error("--socket needs a path", kServeUsage);
    } else if (a == "--data-dir") {
      if (!value(flags.data_dir)) return usage_error("--data-dir needs a directory", kServeUsage);
    } else if (a == "--api-key-file") {
      if (!value(v)) return usage_error("--api-key-file needs a file", kServeUsage);
      flags.api_key_files.push_back(v);
    } else if (a == "--no-tcp") {
      flags.no_tcp = true;
    } else {
      return usage_error("unknown option \"" + std::string(a) + "\"", kServeUsage);
    }
  }
  return daemon::serve(flags);
}

}  // namespace corral::cli
