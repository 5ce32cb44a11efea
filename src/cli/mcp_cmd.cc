// corral mcp: an MCP server on stdio for agent hosts (issue 17,
// docs/mcp.md). A client of the daemon like the other client verbs: the
// unix socket, or --url and --api-key-file. Only JSON-RPC goes to stdout;
// it ends when stdin ends, after destroying the sandboxes it created.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/daemon_client.h"
#include "cli/mcp_server.h"
#include "spec/units.h"

namespace corral::cli {

namespace {

constexpr const char* kMcpUsage =
    "usage: corral mcp [options]\n"
    "\n"
    "Serves the Model Context Protocol on stdin/stdout for an agent host (Claude\n"
    "Desktop, an IDE, ...): tools to create sandboxes, run commands and read and\n"
    "write files in them, and destroy them. Sandboxes it creates are destroyed\n"
    "when the session ends (stdin closes). See docs/mcp.md.\n"
    "\n"
    "options:\n"
    "  --lifetime DURATION  a created sandbox's lifetime unless the tool call says (30m)\n"
    "  --keep               leave created sandboxes when the session ends\n";

}  // namespace

int mcp_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kMcpUsage);
  std::string lifetime = "30m";
  bool keep = false;
  flags.option("--lifetime", [&](const std::string& v) -> Refusal {
    if (auto d = parse_duration(v); !d || d->count() < 1000)
      return std::string("--lifetime needs a duration of at least 1s, such as 30m");
    lifetime = v;
    return std::nullopt;
  });
  flags.flag({"--keep"}, keep);
  if (auto status = flags.parse(args)) return *status;
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  const auto lifetime_s = parse_duration(lifetime)->count() / 1000;
  McpSession session(std::move(*provider));
  McpServer server(sandbox_tools(session, lifetime_s));
  std::string line;
  while (std::getline(std::cin, line)) {
    auto answer = server.handle_line(line);
    if (!answer) continue;
    std::cout << *answer << '\n';
    std::cout.flush();
  }
  if (!keep) {
    const std::size_t n = session.destroy_all();
    if (n > 0) fprintf(stderr, "corral mcp: destroyed %zu sandbox(es) of this session\n", n);
  }
  return 0;
}

}  // namespace corral::cli
