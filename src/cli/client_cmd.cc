// corral create|ls|inspect|exec|cp|rm: the daemon's client verbs, one file
// each (create_cmd.cc ...), what they share in daemon_client.h.
#include <cstdio>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/daemon_client.h"

namespace corral::cli {

int client_command(int argc, char** argv) {
  std::string_view verb = argv[1];
  std::vector<std::string_view> args(argv + 2, argv + argc);
  if (verb == "create") return create_command(args);
  if (verb == "ls") return ls_command(args);
  if (verb == "inspect") return inspect_command(args);
  if (verb == "exec") return exec_command(args);
  if (verb == "cp") return cp_command(args);
  if (verb == "rm") return rm_command(args);
  if (verb == "task") return task_command(args);
  if (verb == "volume") return volume_command(args);
  if (verb == "diagnose") return diagnose_command(args);
  if (verb == "mcp") return mcp_command(args);
  fprintf(stderr, "corral: unknown client command \"%.*s\"\n", static_cast<int>(verb.size()),
          verb.data());
  return 2;
}

}  // namespace corral::cli
