// Destroy (DELETE, the reaper's expiry) and the teardown every end of a
// sandbox goes through: the requests holding its files let go, its host
// resources removed and verified, its processes marked ended, the outcome
// audited and stored. A teardown that left something is retried by the
// reaper with backoff, or at once by a DELETE (issue 14).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/paths.h"
#include "daemon/sandbox_lease.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

namespace {

// How long a teardown waits for the requests that hold fds into the
// sandbox (their transfers cut off first) before it goes on without them.
constexpr std::chrono::milliseconds kLeaseDrain{5000};

}  // namespace

ApiResult<api::SandboxInfo> SandboxService::destroy(std::string_view id, std::string_view reason) {
  auto e = entry(id);
  if (!e) e = failed_teardown(id);
  if (!e) {
    auto record = store_.get(id);
    if (!record)
      return api_fail(api::ApiErrorCode::kNotFound,
                      "no sandbox with id \"" + std::string(id) + "\"");
    return info_of(*record, nullptr);  // already gone: DELETE is idempotent
  }
  bool first = false;
  bool failed = false;
  {
    std::lock_guard lock(e->mu);
    // A create still making it ends first (C2: its capacity must not come
    // back while it builds); bounded like the wait below.
    if (!e->torn_down.wait_for(e->mu, std::chrono::seconds(30), [&] { return !e->building; }))
      return api_fail(api::ApiErrorCode::kConflict,
                      "sandbox \"" + std::string(id) + "\" is still being created", "",
                      "retry the DELETE once its create has answered");
    if (e->tearing_down) {
      // Someone else (another DELETE, the reaper) is tearing it down: wait
      // for it, bounded, and report where it is.
      e->torn_down.wait_for(e->mu, std::chrono::seconds(30), [&] { return e->torn; });
      // Torn down but not cleaned: failed, or a retry is running.
      failed = e->torn && e->state != SandboxState::kCleaned;
    } else {
      e->tearing_down = true;
      (void)transition(e.get(), id, SandboxState::kDestroying, reason);
      first = true;
    }
  }
  if (first) return teardown(e, id, reason, false);
  // A DELETE of a sandbox whose teardown failed tries again now (after the
  // attempt in progress, if any: it may have cleaned it).
  if (failed) return retry_teardown(e, "DELETE of a sandbox whose teardown failed");
  return get(id);
}

api::SandboxInfo SandboxService::teardown(const std::shared_ptr<SandboxEntry>& e,
                                          std::string_view id, std::string_view reason,
                                          bool failed) {
  std::lock_guard one_at_a_time(e->teardown_mu);
  {
    std::lock_guard lock(e->mu);
    e->tearing_down = true;  // no new lease from here on
    if (failed && e->state == SandboxState::kFailed)
      (void)transition(e.get(), id, SandboxState::kDestroying, "cleanup of a failed create");
  }
  unwatch(*e);
  DestroyReport report = remove_from_host(e, id);
  if (report.final_stats) e->final_stats = report.final_stats;
  // Every process the sandbox had is gone now.
  std::vector<std::shared_ptr<ProcessEntry>> procs;
  {
    std::lock_guard lock(e->mu);
    for (auto& [rid, p] : e->processes) procs.push_back(p);
  }
  for (auto& p : procs) {
    std::lock_guard lock(p->mu);
    if (p->finished()) continue;
    p->phase = ProcessEntry::Phase::kExited;
    p->signal = SIGKILL;
    p->ended_at_ms = now_ms();
    if (p->background)
      (void)store_.update_process(p->id, ProcessState::kExited, std::nullopt, SIGKILL);
    signal_event(*p);
  }
  if (report.final_stats) {
    if (report.final_stats->oom_kills > 0)
      metrics_.counter("corral_limit_hits_total", "Limit hits", {{"limit", "memory"}})
          .add(static_cast<double>(report.final_stats->oom_kills));
    if (report.final_stats->pids_max_hits > 0)
      metrics_.counter("corral_limit_hits_total", "Limit hits", {{"limit", "pids"}})
          .add(static_cast<double>(report.final_stats->pids_max_hits));
  }
  return record_teardown(e, id, reason, report);
}

api::SandboxInfo SandboxService::retry_teardown(const std::shared_ptr<SandboxEntry>& e,
                                                std::string_view why) {
  const std::string id = e->id;
  std::lock_guard one_at_a_time(e->teardown_mu);
  bool still_failed;
  {
    std::lock_guard lock(e->mu);
    // Another retry (the reaper's, another DELETE's) may have won.
    still_failed = e->state == SandboxState::kFailed && e->torn;
    if (still_failed)
      (void)transition(e.get(), id, SandboxState::kDestroying,
                       "teardown retry " + std::to_string(e->teardown_attempts) + ": " +
                           std::string(why));
  }
  if (!still_failed) {
    auto info = get(id);
    return info ? *info : api::SandboxInfo{};
  }
  DestroyReport report = remove_from_host(e, id);
  return record_teardown(e, id, why, report);
}

// The sandbox's host resources, those the last attempt left (all on the
// first): what clients hold between calls and the requests holding its
// files first, then init and its
// cgroup, its layer, its network, its secrets.
DestroyReport SandboxService::remove_from_host(const std::shared_ptr<SandboxEntry>& e,
                                               std::string_view id) {
  {
    std::map<std::string, std::shared_ptr<SandboxEntry::HeldBetweenCalls>> dropped;
    {
      std::lock_guard lock(e->mu);
      dropped.swap(e->held);
    }
  }  // their files closed here (a call using one holds a lease: waited for below)
  if (std::size_t held = drain_leases(*e, kLeaseDrain); held > 0)
    metrics_.counter("corral_teardown_lease_timeouts_total",
                     "Teardowns that went on while a request still held the sandbox's files")
        .inc();
  dry_run_book_.remove(e->id);  // X2: its report is gone with its layer
  DestroyReport report;
  if (e->host_left) {
    if (e->live) {
      record_limits_before_teardown(*e);  // diagnostics (T1): before the cgroup goes
      report = e->live->destroy();
    } else {
      // A create that failed before the daemon got the sandbox (the factory
      // hung and was stopped): what the factory made is found by the id.
      report.residue = remove_unadopted(std::string(id), std::string(id));
    }
    e->host_left = !report.residue.empty();
  }
  // After init is gone (its namespace takes the veth pair along): the
  // listeners go, and the host end must be gone too.
  if (e->network_left) {
    std::vector<std::string> left;
    if (network_ != nullptr && (e->net_slot || network_->serves(std::string(id))))
      left = network_->detach(std::string(id), e->net_slot);
    e->network_left = !left.empty();
    for (auto& r : left) report.residue.push_back(std::move(r));
  }
  // Tokens revoked, the read watch stopped, the files overwritten and
  // unmounted (S6): after init, so nothing in the sandbox still reads them.
  if (e->secrets_left) {
    std::vector<std::string> left;
    if (secrets_ != nullptr) left = secrets_->remove(std::string(id));
    e->secrets_left = !left.empty();
    for (auto& r : left) report.residue.push_back(std::move(r));
  }
  return report;
}

// The outcome: audited first, then stored, so that a sandbox the store
// says is cleaned always has its sandbox.destroy record, whenever the
// daemon is killed (docs/audit.md). A failed one is scheduled for a retry.
api::SandboxInfo SandboxService::record_teardown(const std::shared_ptr<SandboxEntry>& e,
                                                 std::string_view id, std::string_view reason,
                                                 const DestroyReport& report) {
  const int attempt = ++e->teardown_attempts;
  const bool cleaned = report.residue.empty();
  metrics_.counter("corral_destroy_residue_bytes_total", "Bytes left in writable layers after wipe")
      .add(static_cast<double>(report.residue_bytes));
  metrics_.counter("corral_destroy_residue_items_total", "Host resources left after teardown")
      .add(static_cast<double>(report.residue.size()));
  if (attempt > 1)
    metrics_
        .counter("corral_teardown_retries_total", "Retries of failed teardowns, by outcome",
                 {{"outcome", cleaned ? "cleaned" : "failed"}})
        .inc();
  audit_now(json{{"type", "sandbox.destroy"},
                 {"sandbox", std::string(id)},
                 {"reason", std::string(reason)},
                 {"attempt", attempt},
                 {"outcome", cleaned ? "cleaned" : "failed"},
                 {"disk_used_bytes", report.disk_used_bytes},
                 {"residue_bytes", report.residue_bytes},
                 {"residue", report.residue}});
  {
    std::lock_guard lock(e->mu);
    if (cleaned) {
      (void)transition(e.get(), id, SandboxState::kCleaned,
                       attempt > 1 ? "teardown verified on retry " + std::to_string(attempt - 1)
                                   : std::string("teardown verified"));
    } else {
      std::string what;
      for (const auto& r : report.residue) what += (what.empty() ? "" : "; ") + r;
      (void)transition(e.get(), id, SandboxState::kFailed, "teardown left: " + what);
    }
  }
  // Diagnostics (T1) stored before the registry lets go of it: a GET
  // finds them live or recorded, never neither.
  record_diagnostics(e, reason, report, cleaned);
  schedule_teardown_retry(e, cleaned ? 0 : attempt);
  registry_.remove(std::string(id));  // gives its capacity back
  {
    std::lock_guard lock(e->mu);
    e->torn = true;
  }
  e->torn_down.notify_all();
  api::SandboxInfo info;
  if (auto record = store_.get(id); record) {
    if (auto i = info_of(*record, nullptr); i) info = *i;
  }
  info.residue = report.residue;
  info.residue_bytes = report.residue_bytes;
  return info;
}

std::vector<std::string> SandboxService::remove_unadopted(const std::string& id,
                                                          const std::string& cgroup_name) {
  std::vector<std::string> residue;
  if (auto cg = cgroups_.open(cgroup_name); cg) {
    if (auto st = (*cg)->destroy(); !st) residue.push_back(st.error().message);
  }
  const std::string lock_path = run_dir() + "/sandboxes/" + id + ".lock";
  unlink(lock_path.c_str());
  if (secrets_ != nullptr) {
    for (auto& r : secrets_->remove(id)) residue.push_back(r);
  }
  return residue;
}

}  // namespace corral::daemon
