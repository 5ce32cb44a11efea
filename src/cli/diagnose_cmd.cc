// corral diagnose ID: a sandbox's diagnostics (REQUIREMENTS.md T1; docs/cli.md),
// as a readable summary, or the API's JSON with --json.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_text.h"
#include "cli/daemon_client.h"

namespace corral::cli {

namespace {

using nlohmann::json;

constexpr const char* kDiagnoseUsage =
    "usage: corral diagnose ID [--json]\n"
    "\n"
    "Why a sandbox failed: OOM kills and memory peak, pids and CPU limits hit,\n"
    "disk quota hits, network requests refused (and why), secret uses refused,\n"
    "timeouts, and what its destroy left behind. Works while it lives and for\n"
    "serve.diagnostics.retention (24h) after it is destroyed.\n"
    "\n"
    "options:\n"
    "  --json               the API's JSON\n";

// j[key] without nlohmann's assertion on a missing key (another daemon's
// answer may lack one): null then.
const json& at(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string num(const json& v) {
  if (v.is_null()) return "unknown";
  if (v.is_number_float()) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.2f", v.get<double>());
    return buf;
  }
  return json_text(v);
}

std::string mib(const json& v) {
  if (!v.is_number()) return "unknown";
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f MiB", v.get<double>() / (1024.0 * 1024.0));
  return buf;
}

// One line per symptom; "!" marks one that happened.
void line(bool hit, const std::string& what, const std::string& text) {
  printf("%s %-18s %s\n", hit ? "!" : " ", what.c_str(), text.c_str());
}

// "85% (17 of 20 pool creates served warm)": the daemon-wide pool hit rate.
std::string pool_rate(const json& rate, const json& hits, const json& misses) {
  if (!rate.is_number()) return "unknown";
  char buf[96];
  const bool counts = hits.is_number_unsigned() && misses.is_number_unsigned();
  if (!counts) {
    snprintf(buf, sizeof buf, "%.0f%%", rate.get<double>() * 100.0);
    return buf;
  }
  const auto h = hits.get<std::uint64_t>();
  snprintf(buf, sizeof buf, "%.0f%% (%llu of %llu pool creates served warm, daemon-wide)",
           rate.get<double>() * 100.0, static_cast<unsigned long long>(h),
           static_cast<unsigned long long>(h + misses.get<std::uint64_t>()));
  return buf;
}

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

bool positive(const json& v) { return v.is_number() && v.get<double>() > 0; }

void print_summary(const json& d) {
  printf("sandbox %s: %s%s\n", text(at(d, "id")).c_str(), text(at(d, "state")).c_str(),
         at(d, "final") == true ? " (recorded at destroy)" : " (live)");
  line(positive(at(d, "oom_kills")), "memory",
       "oom_kills " + num(at(d, "oom_kills")) + ", peak " + mib(at(d, "memory_peak_bytes")) + " of " +
           mib(at(d, "memory_limit_bytes")) + ", limit reached " + num(at(d, "memory_limit_hits")) +
           " times");
  line(positive(at(d, "pids_limit_hits")), "pids",
       "forks refused by the limit (" + num(at(d, "pids_limit")) + "): " + num(at(d, "pids_limit_hits")));
  const json& cpu = at(d, "cpu_throttled");
  line(cpu.is_object() && positive(at(cpu, "periods")), "cpu",
       cpu.is_object() ? "throttled in " + num(at(cpu, "periods")) + " periods, " +
                             num(at(cpu, "seconds")) + " s (limit " + num(at(d, "cpu_limit")) + " cores)"
                       : "unknown");
  const json& disk = at(d, "disk");
  line(positive(at(d, "disk_quota_hits")), "disk",
       "quota hits " + num(at(d, "disk_quota_hits")) + " (SIGXFSZ kills " +
           num(at(disk, "sigxfsz_kills")) + ", full at a process exit " +
           num(at(disk, "full_at_process_exit")) + ", full now " +
           (at(disk, "full") == true ? "yes" : "no") + "), used " + mib(at(disk, "used_bytes")) +
           " of " + mib(at(disk, "limit_bytes")));
  const json& net = at(d, "network_blocked");
  line(positive(at(net, "total")), "network", "requests refused: " + num(at(net, "total")));
  for (const auto& b : at(net, "last"))
    if (b.is_object())
    printf("    %s %s:%s %s (%s)\n", text(at(b, "layer")).c_str(), text(at(b, "host")).c_str(),
           num(at(b, "port")).c_str(), text(at(b, "reason")).c_str(), text(at(b, "detail")).c_str());
  const json& sec = at(d, "secret_read_failures");
  line(positive(at(sec, "total")), "secrets", "uses refused: " + num(at(sec, "total")));
  for (const auto& f : at(sec, "last"))
    if (f.is_object())
    printf("    %s via %s: %s\n", text(at(f, "secret")).c_str(), text(at(f, "via")).c_str(),
           text(at(f, "reason")).c_str());
  const json& sc = at(d, "self_check");
  line(sc.is_object() && at(sc, "ok") == false, "self-check",
       sc.is_null() ? "not recorded" : json_text(sc));
  const json& t = at(d, "timeouts");
  line(positive(at(t, "process_timeouts")) || at(t, "lifetime_expired") == true, "timeouts",
       "processes killed by their timeout " + num(at(t, "process_timeouts")) +
           (at(t, "lifetime_expired") == true ? "; ended by max_lifetime" : ""));
  const json& r = at(d, "residue");
  if (r.is_object()) {
    bool left = !at(r, "items").empty() || positive(at(r, "bytes"));
    line(left, "residue",
         left ? std::to_string(at(r, "items").size()) + " items, " + num(at(r, "bytes")) + " bytes"
              : "none: every host resource verified gone");
    for (const auto& item : at(r, "items"))
      if (item.is_string()) printf("    %s\n", item.get<std::string>().c_str());
  } else {
    line(false, "residue", "not destroyed yet");
  }
  const json& daemon = at(d, "daemon");
  if (daemon.is_object())
    line(false, "pool hit rate",
         at(daemon, "pool_hit_rate").is_null()
             ? "no create named or matched a pool yet"
             : pool_rate(at(daemon, "pool_hit_rate"), at(daemon, "pool_hits"),
                         at(daemon, "pool_misses")));
}

}  // namespace

int diagnose_command(const std::vector<std::string_view>& args) {
  ClientFlags flags(kDiagnoseUsage);
  bool as_json = false;
  flags.flag({"--json"}, as_json);
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
  auto reply = (*provider)->call("GET", sdk::sandbox_path(id) + "/diagnostics");
  return print_reply(
      reply, as_json,
      [](const std::string& body) -> Result<json> {
        json j = json::parse(body, nullptr, false);
        if (!j.is_object()) return make_error(ErrorCode::kInvalidArgument, "not a JSON object");
        return j;
      },
      print_summary);
}

}  // namespace corral::cli
