// Retries of failed teardowns (issue 14): a sandbox whose teardown left
// something (a file still held open, a process stuck in the kernel) is kept
// with its handles, and the reaper tries again with backoff: 1 s after the
// first failure, doubling to at most 60 s between attempts, for
// kMaxTeardownAttempts attempts in all. A DELETE of it tries again at once,
// whenever it comes. Each attempt is a sandbox.destroy audit record with
// its number; corral_teardowns_failed counts those waiting.
#include <algorithm>

#include "daemon/sandbox_service.h"
#include "daemon/sandbox_service_internal.h"

namespace corral::daemon {

using namespace service_internal;

namespace {

constexpr int kMaxTeardownAttempts = 12;  // about 7 minutes of retries
constexpr std::chrono::milliseconds kFirstRetry{1000};
constexpr std::chrono::milliseconds kLongestRetry{60000};

std::chrono::milliseconds retry_delay(int failed_attempts) {
  auto d = kFirstRetry;
  for (int i = 1; i < failed_attempts && d < kLongestRetry; ++i) d *= 2;
  return std::min(d, kLongestRetry);
}

}  // namespace

void SandboxService::schedule_teardown_retry(const std::shared_ptr<SandboxEntry>& e,
                                             int failed_attempts) {
  std::size_t waiting;
  {
    std::lock_guard lock(retry_mu_);
    if (failed_attempts == 0) {
      failed_teardowns_.erase(e->id);
    } else {
      // After the last automatic attempt it stays for a DELETE (or the
      // next start's reconcile) to retry.
      const auto next = failed_attempts >= kMaxTeardownAttempts
                            ? Clock::time_point::max()
                            : Clock::now() + retry_delay(failed_attempts);
      failed_teardowns_[e->id] = FailedTeardown{e, next};
    }
    waiting = failed_teardowns_.size();
  }
  metrics_.gauge("corral_teardowns_failed", "Sandboxes whose teardown failed and waits for a retry")
      .set(static_cast<double>(waiting));
  if (failed_attempts != 0) reaper_cv_.notify_all();
}

std::shared_ptr<SandboxEntry> SandboxService::failed_teardown(std::string_view id) {
  std::lock_guard lock(retry_mu_);
  auto it = failed_teardowns_.find(std::string(id));
  return it == failed_teardowns_.end() ? nullptr : it->second.sandbox;
}

void SandboxService::retry_due_teardowns() {
  std::vector<std::shared_ptr<SandboxEntry>> due;
  {
    std::lock_guard lock(retry_mu_);
    const auto now = Clock::now();
    for (auto& [id, f] : failed_teardowns_) {
      if (f.next > now) continue;
      f.next = Clock::time_point::max();  // until this attempt reschedules it
      due.push_back(f.sandbox);
    }
  }
  for (auto& e : due) {
    if (stopping_) return;
    (void)retry_teardown(e, "retry of a failed teardown");
  }
}

}  // namespace corral::daemon
