// Destroy (DELETE, the reaper's expiry) and the teardown every end of a
// sandbox goes through: its host resources removed and verified, its
// processes marked ended, the outcome stored and audited.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/paths.h"
#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;
using nlohmann::json;

ApiResult<api::SandboxInfo> SandboxService::destroy(std::string_view id, std::string_view reason) {
  auto e = entry(id);
  if (!e) {
    auto record = store_.get(id);
    if (!record)
      return api_fail(api::ApiErrorCode::kNotFound,
                      "no sandbox with id \"" + std::string(id) + "\"");
    return info_of(*record, nullptr);  // already gone: DELETE is idempotent
  }
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
    } else {
      e->tearing_down = true;
      (void)transition(e.get(), id, SandboxState::kDestroying, reason);
    }
  }
  {
    std::unique_lock lock(e->mu);
    if (e->torn) {
      lock.unlock();
      return get(id);
    }
  }
  api::SandboxInfo info = teardown(e, id, reason, false);
  return info;
}

api::SandboxInfo SandboxService::teardown(const std::shared_ptr<SandboxEntry>& e,
                                          std::string_view id, std::string_view reason,
                                          bool failed) {
  {
    std::lock_guard lock(e->mu);
    e->tearing_down = true;
    if (failed && e->state == SandboxState::kFailed)
      (void)transition(e.get(), id, SandboxState::kDestroying, "cleanup of a failed create");
  }
  unwatch(*e);
  DestroyReport report;
  if (e->live) {
    report = e->live->destroy();
  } else {
    // A create that failed before the daemon got the sandbox (the factory
    // hung and was stopped): what the factory made is found by the id.
    report.residue = remove_unadopted(std::string(id), std::string(id));
  }
  // After init is gone (its namespace takes the veth pair along): the
  // listeners go, and the host end must be gone too.
  if (network_ != nullptr && (e->net_slot || network_->serves(std::string(id)))) {
    for (auto& r : network_->detach(std::string(id), e->net_slot)) report.residue.push_back(r);
  }
  // Tokens revoked, the read watch stopped, the files overwritten and
  // unmounted (S6): after init, so nothing in the sandbox still reads them.
  if (secrets_ != nullptr) {
    for (auto& r : secrets_->remove(std::string(id))) report.residue.push_back(r);
  }
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
  metrics_.counter("corral_destroy_residue_bytes_total", "Bytes left in writable layers after wipe")
      .add(static_cast<double>(report.residue_bytes));
  metrics_.counter("corral_destroy_residue_items_total", "Host resources left after teardown")
      .add(static_cast<double>(report.residue.size()));
  {
    std::lock_guard lock(e->mu);
    if (report.residue.empty()) {
      (void)transition(e.get(), id, SandboxState::kCleaned, "teardown verified");
    } else {
      std::string what;
      for (const auto& r : report.residue) what += (what.empty() ? "" : "; ") + r;
      (void)transition(e.get(), id, SandboxState::kFailed, "teardown left: " + what);
    }
  }
  audit_now(json{{"type", "sandbox.destroy"},
                 {"sandbox", std::string(id)},
                 {"reason", std::string(reason)},
                 {"disk_used_bytes", report.disk_used_bytes},
                 {"residue_bytes", report.residue_bytes},
                 {"residue", report.residue}});
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
