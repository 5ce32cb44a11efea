// corral rm: destroy sandboxes of the daemon (docs/cli.md).
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

constexpr const char* kRmUsage =
    "usage: corral rm ID...\n"
    "       corral rm --all\n"
    "\n"
    "Destroys sandboxes: every process is killed and the writable layer wiped;\n"
    "then the daemon checks that nothing is left on the host and reports it if\n"
    "something is. Prints each id once it is gone.\n"
    "\n"
    "options:\n"
    "  --all                every sandbox of the daemon that is not destroyed yet\n";

}  // namespace

int rm_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kRmUsage);
  std::vector<std::string> ids;
  bool all = false;
  flags.flag({"--all"}, all);
  flags.positional([&](std::string_view a) -> Refusal {
    ids.emplace_back(a);
    return std::nullopt;
  });
  if (auto status = flags.parse(args)) return *status;
  if (all && !ids.empty()) return flags.usage_error("give IDs or --all, not both");
  if (!all && ids.empty()) return flags.usage_error("which sandboxes? give their IDs (or --all)");
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  if (all) {
    auto list = (*provider)->list(false);
    if (!list) return command_failure(list.error());
    for (const auto& s : *list) {
      if (s.state != "cleaned") ids.push_back(s.id);
    }
  }
  int status = 0;
  for (const std::string& id : ids) {
    auto info = (*provider)->destroy_sandbox(id);
    if (!info) {
      print_error(info.error());
      status = 1;
      continue;
    }
    for (const std::string& r : info->residue)
      fprintf(stderr, "corral: warning: sandbox %s left behind after cleanup: %s\n", id.c_str(),
              r.c_str());
    if (info->residue_bytes > 0)
      fprintf(stderr, "corral: warning: sandbox %s: %llu bytes still allocated in its layer\n",
              id.c_str(), static_cast<unsigned long long>(info->residue_bytes));
    if (!info->residue.empty() || info->residue_bytes > 0) status = 1;
    printf("%s\n", id.c_str());
    fflush(stdout);
  }
  return status;
}

}  // namespace corral::cli
