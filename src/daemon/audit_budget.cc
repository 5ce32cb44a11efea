#include "daemon/audit_budget.h"

#include <algorithm>
#include <array>
#include <vector>

namespace corral::daemon {

using nlohmann::json;

namespace {

// What an API request makes (a create injects, a destroy or a task's end
// revokes and wipes, a task's start bounds the tokens, an issued token
// expires once): not the sandbox's doing, so never budgeted. Everything
// else that reaches submit() is.
constexpr std::array<std::string_view, 6> kApiTriggered = {
    "secret.inject",  "secret.wipe",    "secret.issued",
    "secret.revoked", "secret.expired", "secret.lifetime"};

}  // namespace

double TokenBucket::level(Clock::time_point now) const {
  if (now <= at_) return tokens_;
  const double seconds = std::chrono::duration<double>(now - at_).count();
  return std::min(burst_, tokens_ + seconds * rate_);
}

bool TokenBucket::take(Clock::time_point now, double cost) {
  tokens_ = level(now);
  if (now > at_) at_ = now;
  // A record dearer than the whole burst passes from a full bucket.
  cost = std::min(cost, burst_);
  if (tokens_ < cost) return false;
  tokens_ -= cost;
  return true;
}

double audit_record_cost(const json& event) {
  constexpr std::size_t kLogAdds = 220;  // seq, time, prev, hash
  const std::size_t bytes =
      event.dump(-1, ' ', false, json::error_handler_t::replace).size() + kLogAdds;
  return static_cast<double>((bytes + 1023) / 1024);
}

bool TokenBucket::full(Clock::time_point now) const { return level(now) >= burst_; }

bool sandbox_triggered(std::string_view type) {
  if (type == kAuditSuppressedType) return false;  // bounded by the interval
  return std::find(kApiTriggered.begin(), kApiTriggered.end(), type) == kApiTriggered.end();
}

AuditBudget::AuditBudget(AuditBudgetConfig config, Sink sink, MetricsRegistry* metrics)
    : config_(config), sink_(std::move(sink)), metrics_(metrics) {}

AuditBudget::~AuditBudget() { stop(); }

void AuditBudget::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void AuditBudget::stop() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
  tick(Clock::time_point::max());
}

void AuditBudget::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, config_.summary_interval);
    if (stop_) break;
    lock.unlock();
    tick(Clock::now());
    lock.lock();
  }
}

void AuditBudget::count(std::string_view kind, std::string_view reason) {
  if (metrics_ == nullptr) return;
  metrics_
      ->counter("corral_audit_suppressed_total",
                "Audit records a sandbox triggered that were not written, by record type and "
                "reason (budget: over the sandbox's rate; queue_full: the journal was full)",
                {{"kind", std::string(kind)}, {"reason", std::string(reason)}})
      .inc();
}

void AuditBudget::submit(json event, Clock::time_point now) {
  std::string type;
  if (auto t = event.find("type"); t != event.end() && t->is_string()) type = t->get<std::string>();
  if (!sandbox_triggered(type)) {
    (void)sink_(std::move(event), false);
    return;
  }
  std::string sandbox;
  if (auto s = event.find("sandbox"); s != event.end() && s->is_string())
    sandbox = s->get<std::string>();
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(sandbox);
    if (it == sandboxes_.end()) it = sandboxes_.try_emplace(sandbox, config_, now).first;
    PerSandbox& p = it->second;
    // The size only matters when there is a token: a flood mostly costs
    // this one check.
    if (!p.bucket.any(now) || !p.bucket.take(now, audit_record_cost(event))) {
      if (!p.owes_summary()) p.since = now;
      ++p.over_budget[type];
      count(type, "budget");
      return;
    }
  }
  if (sink_(std::move(event), true)) return;
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(sandbox);
  if (it == sandboxes_.end()) it = sandboxes_.try_emplace(sandbox, config_, now).first;
  if (!it->second.owes_summary()) it->second.since = now;
  ++it->second.queue_full[type];
  count(type, "queue_full");
}

void AuditBudget::tick(Clock::time_point now) {
  std::vector<json> summaries;
  {
    std::lock_guard lock(mu_);
    for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
      PerSandbox& p = it->second;
      if (p.owes_summary()) {
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            (now == Clock::time_point::max() ? Clock::now() : now) - p.since)
                            .count();
        json ev{{"type", std::string(kAuditSuppressedType)},
                {"sandbox", it->first},
                {"period_ms", std::max<std::int64_t>(ms, 0)},
                {"budget", {{"rate", config_.rate}, {"burst", config_.burst}}}};
        std::uint64_t total = 0;
        if (!p.over_budget.empty()) {
          ev["over_budget"] = p.over_budget;
          for (const auto& [k, n] : p.over_budget) total += n;
        }
        if (!p.queue_full.empty()) {
          ev["queue_full"] = p.queue_full;
          for (const auto& [k, n] : p.queue_full) total += n;
        }
        ev["suppressed"] = total;
        summaries.push_back(std::move(ev));
        p.over_budget.clear();
        p.queue_full.clear();
        ++it;
      } else if (now == Clock::time_point::max() || p.bucket.full(now)) {
        it = sandboxes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Never dropped: one per sandbox and interval at most.
  for (auto& s : summaries) (void)sink_(std::move(s), false);
}

std::size_t AuditBudget::tracked() const {
  std::lock_guard lock(mu_);
  return sandboxes_.size();
}

}  // namespace corral::daemon
