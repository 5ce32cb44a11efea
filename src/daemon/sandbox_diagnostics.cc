#include "daemon/sandbox_diagnostics.h"

#include <signal.h>

#include <algorithm>

#include "store/state_store.h"

namespace corral::daemon {

using nlohmann::json;

namespace {

// Free text from a sandbox's traffic (names, the policy's sentences) is
// cut: one entry must not hold much of the daemon's memory or the row.
constexpr std::size_t kMaxText = 256;

std::string cut(std::string s) {
  if (s.size() > kMaxText) s.resize(kMaxText);
  return s;
}

std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? cut(it->get<std::string>()) : std::string();
}

template <typename T>
void keep(std::deque<T>& last, T item, std::size_t n) {
  if (n == 0) return;
  last.push_back(std::move(item));
  while (last.size() > n) last.pop_front();
}

}  // namespace

void DiagnosticsBook::open(const std::string& id, const std::string& ns) {
  std::lock_guard lock(mu_);
  SandboxCounters c;
  c.ns = ns;
  sandboxes_.try_emplace(id, std::move(c));
}

void DiagnosticsBook::blocked(const std::string& id, BlockedRequest request) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return;
  SandboxCounters& c = it->second;
  ++c.blocked;
  ++c.blocked_by_reason[request.layer + ":" + request.reason];
  keep(c.blocked_last, std::move(request), keep_last_);
}

void DiagnosticsBook::observe(const json& event) {
  if (!event.is_object()) return;
  const std::string type = text_of(event, "type");
  const std::string id = text_of(event, "sandbox");
  if (id.empty()) return;
  const std::int64_t now = StateStore::now_ms();
  if (type == "network.dns" || type == "network.connection" || type == "network.gateway") {
    if (text_of(event, "decision") != "deny") return;
    // The self-check's own probes (T3, self_check_probes.h): not the sandbox's.
    if (auto sc = event.find("self_check"); sc != event.end() && *sc == true) return;
    BlockedRequest r;
    r.at_ms = now;
    r.detail = text_of(event, "reason");
    if (type == "network.dns") {
      r.layer = "dns";
      r.host = text_of(event, "name");
      r.port = 53;
      r.reason = text_of(event, "outcome");
    } else if (type == "network.connection") {
      r.layer = "proxy";
      r.host = text_of(event, "name");
      if (r.host.empty()) r.host = text_of(event, "original_address");
      if (r.host.empty()) r.host = text_of(event, "address");
      if (auto it = event.find("port"); it != event.end() && it->is_number_integer())
        r.port = static_cast<std::uint16_t>(std::clamp<std::int64_t>(it->get<std::int64_t>(), 0, 65535));
      r.reason = text_of(event, "refusal");
    } else {
      r.layer = "gateway";
      r.host = text_of(event, "service");
      r.reason = "refused";
    }
    if (r.reason.empty()) r.reason = "refused";
    blocked(id, std::move(r));
    return;
  }
  if (type == "secret.refused") {
    SecretFailure f;
    f.at_ms = now;
    f.secret = text_of(event, "secret");
    f.reason = text_of(event, "reason");
    f.via = text_of(event, "via");
    f.host = text_of(event, "host");
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end()) return;
    SandboxCounters& c = it->second;
    ++c.secret_failures;
    // The broker's reasons are a closed set (broker.h): the map stays small.
    ++c.secret_failures_by_reason[f.reason.empty() ? "refused" : f.reason];
    keep(c.secret_last, std::move(f), keep_last_);
  }
}

void DiagnosticsBook::process_ended(const std::string& id, bool timed_out,
                                    std::optional<int> signal, bool layer_full) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return;
  SandboxCounters& c = it->second;
  if (timed_out) ++c.process_timeouts;
  if (signal && *signal == SIGXFSZ) ++c.sigxfsz_kills;
  if (layer_full) ++c.layer_full_at_exit;
}

void DiagnosticsBook::set_final_limit_counters(const std::string& id,
                                               const CgroupLimitCounters& counters) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it != sandboxes_.end()) it->second.final_limit_counters = counters;
}

std::optional<SandboxCounters> DiagnosticsBook::snapshot(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return std::nullopt;
  return it->second;
}

std::optional<SandboxCounters> DiagnosticsBook::close(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end()) return std::nullopt;
  SandboxCounters c = std::move(it->second);
  sandboxes_.erase(it);
  return c;
}

bool layer_full(std::uint64_t used_bytes, std::uint64_t limit_bytes, std::uint64_t used_inodes,
                std::uint64_t inode_limit) {
  constexpr std::uint64_t kPage = 4096;
  if (limit_bytes != 0 && used_bytes + kPage > limit_bytes) return true;
  return inode_limit != 0 && used_inodes >= inode_limit;
}

json diagnostics_json(const DiagnosticsInput& in) {
  const SandboxCounters& c = in.counters;
  const CgroupStats* s = in.stats ? &*in.stats : nullptr;
  auto or_null = [s](std::uint64_t CgroupStats::*field) {
    return s != nullptr ? json(s->*field) : json(nullptr);
  };
  json out;
  out["id"] = in.id;
  out["state"] = in.state;
  out["final"] = in.final;
  out["recorded_at_ms"] = in.recorded_at_ms;
  out["cgroup_version"] = in.cgroup_version ? json(*in.cgroup_version) : json(nullptr);

  // Unexplained failure: the cgroup's events (the design source's "查 cgroup 事件、OOM 记录").
  out["oom_kills"] = or_null(&CgroupStats::oom_kills);
  out["memory_peak_bytes"] = or_null(&CgroupStats::memory_peak_bytes);
  out["memory_limit_bytes"] = in.limits.memory_bytes;
  const CgroupLimitCounters* l = in.limit_counters ? &*in.limit_counters : nullptr;
  out["memory_limit_hits"] = l != nullptr ? json(l->memory_limit_hits) : json(nullptr);
  out["pids_limit_hits"] = or_null(&CgroupStats::pids_max_hits);
  out["pids_limit"] = in.limits.pids;
  out["cpu_throttled"] =
      l != nullptr ? json{{"periods", l->cpu_throttled_periods},
                          {"seconds", static_cast<double>(l->cpu_throttled_ns) / 1e9}}
                   : json(nullptr);
  out["cpu_limit"] = in.limits.cpus;

  // Write failures: the writable layer's limit.
  // A full layer no process end saw counts once (one seen at an exit and
  // still full now is the same hit).
  const std::uint64_t full_now = in.layer_full_now && c.layer_full_at_exit == 0 ? 1 : 0;
  out["disk_quota_hits"] = c.sigxfsz_kills + c.layer_full_at_exit + full_now;
  out["disk"] = json{{"limit_bytes", in.limits.disk_bytes},
                     {"used_bytes", in.disk_used_bytes ? json(*in.disk_used_bytes) : json(nullptr)},
                     {"full", in.layer_full_now},
                     {"sigxfsz_kills", c.sigxfsz_kills},
                     {"full_at_process_exit", c.layer_full_at_exit}};

  // Network timeouts: what the DNS server, the proxy and the gateway refused.
  json blocked_last = json::array();
  for (const auto& b : c.blocked_last)
    blocked_last.push_back(json{{"at_ms", b.at_ms},
                                {"layer", b.layer},
                                {"host", b.host},
                                {"port", b.port},
                                {"reason", b.reason},
                                {"detail", b.detail}});
  out["network_blocked"] = json{{"total", c.blocked},
                                {"by_reason", c.blocked_by_reason},
                                {"last", std::move(blocked_last)}};

  // Secret read failures: the broker's refusals (names and reasons, never a value).
  json secret_last = json::array();
  for (const auto& f : c.secret_last)
    secret_last.push_back(json{{"at_ms", f.at_ms},
                               {"secret", f.secret},
                               {"reason", f.reason},
                               {"via", f.via},
                               {"host", f.host}});
  out["secret_read_failures"] = json{{"total", c.secret_failures},
                                     {"by_reason", c.secret_failures_by_reason},
                                     {"last", std::move(secret_last)}};

  out["self_check"] = in.self_check;
  out["timeouts"] = json{{"process_timeouts", c.process_timeouts},
                         {"lifetime_expired", in.lifetime_expired}};
  out["destroy_reason"] = in.destroy_reason ? json(*in.destroy_reason) : json(nullptr);
  // Residue after destroy: known once the teardown has run.
  out["residue"] = in.final ? json{{"items", in.residue}, {"bytes", in.residue_bytes}}
                            : json(nullptr);
  return out;
}

}  // namespace corral::daemon
