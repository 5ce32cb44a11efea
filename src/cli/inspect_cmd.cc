// corral inspect: one sandbox as JSON (docs/cli.md).
#include <string>
#include <string_view>
#include <vector>

#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

constexpr const char* kInspectUsage =
    "usage: corral inspect ID\n"
    "\n"
    "Prints a sandbox's state, spec, live usage and timestamps as JSON.\n"
    "\n"
    "options:\n";

}  // namespace

int inspect_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kInspectUsage);
  std::string id;
  flags.positional([&](std::string_view a) -> Refusal {
    if (!id.empty()) return "one sandbox ID at a time";
    id = std::string(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (id.empty()) return flags.usage_error("which sandbox? give its ID");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  return print_json((*provider)->call("GET", sdk::sandbox_path(id)));
}

}  // namespace corral::cli
