// The reaper thread: every 100 ms the audit log's group commit, the
// retries of failed teardowns that are due (sandbox_teardown_retry.cc), the
// sandboxes past their max_lifetime (destroyed) and the processes past
// their timeout (killed).
#include <signal.h>

#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;

void SandboxService::reaper_loop() {
  while (!stopping_) {
    {
      std::unique_lock lock(reaper_mu_);
      reaper_cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    if (stopping_) break;
    // The audit log's group commit (a no-op cost when nothing was written).
    journal_.post([this] { (void)audit_.sync(); });
    retry_due_teardowns();
    prune_diagnostics();
    std::vector<std::shared_ptr<SandboxEntry>> all = registry_.all();
    const std::int64_t now = now_ms();
    const auto steady = Clock::now();
    for (auto& e : all) {
      bool expired = false;
      std::vector<std::shared_ptr<ProcessEntry>> late;
      {
        std::lock_guard lock(e->mu);
        if (!takes_work(e->state)) continue;
        expired = e->expires_at_ms <= now;
        for (auto& [rid, p] : e->processes) {
          if (p->deadline && *p->deadline <= steady) late.push_back(p);
        }
      }
      if (expired) {
        metrics_.counter("corral_sandbox_expired_total", "Sandboxes ended by max_lifetime").inc();
        (void)destroy(e->id, kLifetimeReason);
        continue;
      }
      for (auto& p : late) {
        {
          std::lock_guard lock(p->mu);
          if (p->finished() || p->timed_out) continue;
          // Re-attached without a pidfd (its host pid was never recorded):
          // it cannot be killed; keep the deadline for a pidfd that may
          // still arrive with its "started" report.
          if (!p->pidfd && p->phase == ProcessEntry::Phase::kRunning) continue;
          p->timed_out = true;
          p->deadline.reset();
          // Stored before the kill: if this daemon dies before the exit is
          // reported, the next one still reports the timeout's exit (124).
          if (p->background) (void)store_.mark_process_timed_out(p->id);
        }
        kill_process(*p, SIGKILL);
      }
    }
  }
}

}  // namespace corral::daemon
