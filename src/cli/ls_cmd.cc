// corral ls: the daemon's sandboxes, as a table or as JSON (docs/cli.md).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

constexpr const char* kLsUsage =
    "usage: corral ls [--all] [--json]\n"
    "\n"
    "Lists the daemon's sandboxes: ID STATE AGE EXPIRES MEM DISK (used/limit).\n"
    "\n"
    "options:\n"
    "  --all                also destroyed (cleaned) sandboxes\n"
    "  --json               the API's JSON ({\"sandboxes\": [...]})\n";

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "45s", "12m", "3h", "2d".
std::string short_duration(std::int64_t ms) {
  std::int64_t s = ms / 1000;
  if (s < 0) s = 0;
  char buf[32];
  if (s < 120) {
    snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 120 * 60) {
    snprintf(buf, sizeof buf, "%lldm", static_cast<long long>(s / 60));
  } else if (s < 48 * 3600) {
    snprintf(buf, sizeof buf, "%lldh", static_cast<long long>(s / 3600));
  } else {
    snprintf(buf, sizeof buf, "%lldd", static_cast<long long>(s / 86400));
  }
  return buf;
}

// "512Mi", "1.5Gi", "16Ki", "0".
std::string short_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti"};
  double v = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0 || v >= 100 || v == static_cast<double>(static_cast<std::uint64_t>(v))) {
    snprintf(buf, sizeof buf, "%.0f%s", v, kUnits[unit]);
  } else {
    snprintf(buf, sizeof buf, "%.1f%s", v, kUnits[unit]);
  }
  return buf;
}

}  // namespace

// ID STATE AGE EXPIRES MEM DISK, one sandbox a line.
void print_sandbox_table(const std::vector<api::SandboxInfo>& list) {
  const std::int64_t now = now_ms();
  printf("%-16s %-12s %-6s %-8s %-15s %s\n", "ID", "STATE", "AGE", "EXPIRES", "MEM", "DISK");
  for (const api::SandboxInfo& s : list) {
    std::string expires = "-";
    const bool alive = s.state != "cleaned" && s.state != "failed";
    if (s.expires_at_ms && alive)
      expires = *s.expires_at_ms > now ? "in " + short_duration(*s.expires_at_ms - now) : "now";
    std::string mem = "-", disk = "-";
    if (s.usage) {
      mem = short_size(s.usage->memory_bytes) + "/" + short_size(s.spec.limits.memory_bytes);
      disk = short_size(s.usage->disk_bytes) + "/" + short_size(s.spec.limits.disk_bytes);
    }
    printf("%-16s %-12s %-6s %-8s %-15s %s\n", s.id.c_str(), s.state.c_str(),
           short_duration(now - s.created_at_ms).c_str(), expires.c_str(), mem.c_str(),
           disk.c_str());
  }
}

int ls_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kLsUsage);
  bool all = false, as_json = false;
  flags.flag({"--all", "-a"}, all);
  flags.flag({"--json"}, as_json);
  flags.unknown_message(
      [](std::string_view a) { return "unknown argument \"" + std::string(a) + "\""; });
  if (auto status = flags.parse(args)) return *status;
  auto provider = connect(flags.endpoint());
  if (!provider) return command_failure(provider.error());
  auto reply = (*provider)->call("GET", all ? "/v1/sandboxes?all=true" : "/v1/sandboxes");
  return print_reply(reply, as_json, api::parse_sandbox_list, print_sandbox_table);
}

}  // namespace corral::cli
