// corral serve: the daemon (docs/operations.md, docs/api.md).
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_output.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
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
    "  --api-key-file FILE  accepted API keys, one per line (mode 0600)\n"
    "  --node-id ID         this node's id in a fleet (serve.node.id); a host\n"
    "                       name is taken up to its first '.'\n"
    "  --node-address IP:PORT  where other nodes reach this one (serve.node.address)\n";

}  // namespace

int serve_command(int argc, char** argv) {
  daemon::ServeFlags flags;
  FlagParser parser(kServeUsage,
                    [](const FlagError& e) { return usage_error(e.message, kServeUsage); });
  // A value stored in `into`; `missing` says what the flag needs.
  auto value = [&parser](std::string_view name, std::string& into, const char* missing) {
    parser.option(name,
                  [&into](const std::string& v) -> Refusal {
                    into = v;
                    return std::nullopt;
                  },
                  {.missing = missing});
  };
  value("--config", flags.config_path, "--config needs a file");
  value("--listen", flags.listen, "--listen needs HOST:PORT");
  value("--socket", flags.socket_path, "--socket needs a path");
  value("--data-dir", flags.data_dir, "--data-dir needs a directory");
  value("--node-id", flags.node_id, "--node-id needs an id");
  value("--node-address", flags.node_address, "--node-address needs IP:PORT");
  parser.option("--api-key-file",
                [&](const std::string& v) -> Refusal {
                  flags.api_key_files.push_back(v);
                  return std::nullopt;
                },
                {.missing = "--api-key-file needs a file"});
  parser.flag({"--no-tcp"}, flags.no_tcp);
  if (auto status = parser.parse(std::vector<std::string_view>(argv + 1, argv + argc)))
    return *status;
  return daemon::serve(flags);
}

}  // namespace corral::cli
