// `corral doctor`: checks the host and says what to fix.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "jail/host_check.h"

namespace corral::cli {

namespace {

constexpr const char* kDoctorUsage =
    "usage: corral doctor [--json]\n\nChecks namespaces, overlayfs, seccomp, Landlock,\n"
    "cgroups and tools; exits 1 if a required feature is missing.\n";

}  // namespace

int doctor_command(int argc, char** argv) {
  bool json = false;
  FlagParser parser(kDoctorUsage, [](const FlagError& e) {
    fprintf(stderr, "corral doctor: %s\n", e.message.c_str());
    return 2;
  });
  parser.flag({"--json"}, json);
  if (auto status = parser.parse(std::vector<std::string_view>(argv + 1, argv + argc)))
    return *status;
  auto checks = run_host_checks();
  bool all_required = true;
  nlohmann::json out = nlohmann::json::array();
  for (const HostCheck& c : checks) {
    if (!c.ok && c.required) all_required = false;
    if (json) {
      out.push_back({{"name", c.name},
                     {"ok", c.ok},
                     {"required", c.required},
                     {"detail", c.detail},
                     {"hint", c.ok ? "" : c.hint}});
      continue;
    }
    const char* status = c.ok ? "ok  " : (c.required ? "FAIL" : "warn");
    printf("%s %-14s %s\n", status, c.name.c_str(), c.detail.c_str());
    if (!c.ok) printf("     %-14s fix: %s\n", "", c.hint.c_str());
  }
  if (json) {
    printf("%s\n", json_text(out, 2).c_str());
  } else {
    printf("\n%s\n", all_required ? "this host can run corral sandboxes"
                                  : "this host cannot run corral sandboxes: fix the FAIL lines");
  }
  return all_required ? 0 : 1;
}

}  // namespace corral::cli
