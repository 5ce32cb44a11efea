// Diagnostics of the daemon's sandboxes (REQUIREMENTS.md T1, issue 16
// point 4): read from a live sandbox, recorded by its teardown (just after
// the cgroup's counters were read and before the registry lets go of it),
// kept in the state store for serve.diagnostics.retention, then pruned by
// the reaper. docs/operations.md maps each symptom to a field.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

namespace {

// The sandbox's last self-check (T3) as diagnostics show it: which checks
// ran and the first that failed, never a value; null when none ran.
json self_check_json(const std::optional<SelfCheckReport>& r) {
  if (!r) return nullptr;
  json checks = json::array();
  for (const auto& [name, ok] : r->checks) checks.push_back({{"name", name}, {"ok", ok}});
  json j = {{"ok", r->ok}, {"checks", std::move(checks)}, {"took_us", r->took.count()}};
  if (!r->ok) {
    j["failed"] = r->failed;
    j["detail"] = r->detail;
  }
  return j;
}

std::string version_name(CgroupVersion v) { return v == CgroupVersion::kV2 ? "v2" : "v1"; }

// What the daemon as a whole adds to every answer: the warm pools' hit
// rate (C4) since the daemon started, over the creates that named or
// matched a pool; null while there were none.
json daemon_part(std::uint64_t hits, std::uint64_t misses) {
  json rate = nullptr;
  if (hits + misses > 0) rate = static_cast<double>(hits) / static_cast<double>(hits + misses);
  return json{{"pool_hit_rate", std::move(rate)}, {"pool_hits", hits}, {"pool_misses", misses}};
}

api::ApiError not_found(std::string_view id) {
  return api::make_api_error(api::ApiErrorCode::kNotFound,
                             "no diagnostics for sandbox \"" + std::string(id) + "\"", "",
                             "an unknown id, a sandbox of another namespace, or one destroyed "
                             "longer ago than serve.diagnostics.retention");
}

}  // namespace

std::optional<CgroupLimitCounters> SandboxService::read_limits(const std::string& cgroup) {
  auto cg = cgroups_.open(cgroup);
  if (!cg) return std::nullopt;
  auto c = read_limit_counters((*cg)->paths());
  if (!c) return std::nullopt;
  return *c;
}

void SandboxService::record_limits_before_teardown(const SandboxEntry& e) {
  if (!e.live) return;
  if (auto c = read_limits(e.live->identity().cgroup))
    diagnostics_book_.set_final_limit_counters(e.id, *c);
}

void SandboxService::set_diagnostics(const DiagnosticsConfig& config) {
  diagnostics_config_ = config;
  diagnostics_book_.set_keep_last(config.keep_last);
}

ApiResult<json> SandboxService::diagnostics(std::string_view id, const std::string& ns) {
  // Destroyed: as recorded, while the retention lasts (the reaper prunes
  // now and then; a row past it is never served).
  auto stored = store_.get_diagnostics(id);
  if (!stored) {
    if (stored.error().code == ErrorCode::kInvalidArgument) return tl::unexpected(not_found(id));
    return api_fail(stored.error());
  }
  if (*stored) {
    const DiagnosticsRecord& r = **stored;
    if (r.ns != ns || r.recorded_at_ms < now_ms() - diagnostics_config_.retention.count())
      return tl::unexpected(not_found(id));
    json doc = json::parse(r.diagnostics_json, nullptr, false);
    if (!doc.is_object())
      return api_fail(api::ApiErrorCode::kInternal,
                      "the stored diagnostics of sandbox " + std::string(id) + " are not JSON");
    doc["daemon"] = daemon_part(pool_hits_.load(std::memory_order_relaxed),
                               pool_misses_.load(std::memory_order_relaxed));
    return doc;
  }
  // Live: read now.
  auto e = entry(id);
  if (!e || e->ns != ns) return tl::unexpected(not_found(id));
  DiagnosticsInput in;
  in.id = e->id;
  in.recorded_at_ms = now_ms();
  in.cgroup_version = version_name(cgroups_.version());
  {
    std::lock_guard lock(e->mu);
    in.state = std::string(sandbox_state_name(e->state));
    in.limits = e->spec.limits;
    in.self_check = self_check_json(e->self_check);
  }
  if (auto c = diagnostics_book_.snapshot(e->id)) in.counters = std::move(*c);
  if (e->live) {
    if (auto st = e->live->stats(); st) in.stats = *st;
    in.limit_counters = read_limits(e->live->identity().cgroup);
    if (auto u = e->live->disk_usage(); u) {
      in.disk_used_bytes = u->bytes;
      in.layer_full_now = layer_full(u->bytes, in.limits.disk_bytes, u->inodes,
                                     effective_inodes(in.limits));
    }
  }
  json doc = diagnostics_json(in);
  doc["daemon"] = daemon_part(pool_hits_.load(std::memory_order_relaxed),
                               pool_misses_.load(std::memory_order_relaxed));
  return doc;
}

void SandboxService::record_diagnostics(const std::shared_ptr<SandboxEntry>& e,
                                        std::string_view reason, const DestroyReport& report,
                                        bool cleaned) {
  // The first teardown takes the counters; a retry records them again
  // with what it found (its residue).
  if (auto c = diagnostics_book_.close(e->id)) e->diagnostics_counters = std::move(*c);
  DiagnosticsInput in;
  in.id = e->id;
  in.state = cleaned ? "cleaned" : "failed";
  in.final = true;
  in.recorded_at_ms = now_ms();
  in.cgroup_version = version_name(cgroups_.version());
  {
    std::lock_guard lock(e->mu);
    in.limits = e->spec.limits;
    in.self_check = self_check_json(e->self_check);
  }
  in.stats = e->final_stats;
  if (e->diagnostics_counters) {
    in.counters = *e->diagnostics_counters;
    in.limit_counters = in.counters.final_limit_counters;
  }
  if (report.disk_used_bytes != 0 || e->live) {
    in.disk_used_bytes = report.disk_used_bytes;
    // Measured just before the wipe: bytes only (the inodes went with it).
    in.layer_full_now = layer_full(report.disk_used_bytes, in.limits.disk_bytes, 0, 0);
  }
  in.destroy_reason = std::string(reason);
  in.lifetime_expired = reason == kLifetimeReason;
  in.residue = report.residue;
  in.residue_bytes = report.residue_bytes;
  DiagnosticsRecord record{e->id, e->ns, in.recorded_at_ms, json_text(diagnostics_json(in))};
  if (auto st = store_.put_diagnostics(record); !st)
    fprintf(stderr, "corral serve: warning: %s\n", st.error().message.c_str());
}

void SandboxService::prune_diagnostics() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_diagnostics_prune_) return;
  // A quarter of the retention, between 1 s and a minute: a row outlives
  // its retention by that at most (and is never served past it).
  auto every = std::clamp<std::chrono::milliseconds>(diagnostics_config_.retention / 4,
                                                      std::chrono::seconds(1),
                                                      std::chrono::minutes(1));
  next_diagnostics_prune_ = now + every;
  auto pruned = store_.prune_diagnostics(now_ms() - diagnostics_config_.retention.count());
  if (!pruned) {
    fprintf(stderr, "corral serve: warning: %s\n", pruned.error().message.c_str());
  } else if (*pruned > 0) {
    metrics_.counter("corral_diagnostics_pruned_total", "Stored sandbox diagnostics pruned")
        .add(static_cast<double>(*pruned));
  }
}

}  // namespace corral::daemon
