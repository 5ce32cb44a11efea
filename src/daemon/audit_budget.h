// AuditBudget: the per-sandbox limit on the audit records a sandbox's own
// actions make the host write (issue 12; docs/audit.md, "Budget").
//
// Every record the network engine (DNS queries, proxied and refused
// connections, gateway requests) and the secret service (broker swaps and
// refusals, secret file reads) emit passes submit(). Records an API client
// causes (secret injection at create, revocation and wipe at destroy,
// token expiry) are written as they are; every other type is budgeted, so
// a record type added later is bounded unless someone decides otherwise.
// A budgeted record takes one token per started KiB (its size as written,
// roughly) from its sandbox's bucket (`rate` tokens per second, up to
// `burst`), so the budget bounds bytes, not only records; without enough
// tokens it is not written but counted, and
// one `audit.suppressed` record per sandbox and interval says how many of
// which type were left out. The same counts go to /metrics as
// corral_audit_suppressed_total{kind, reason}.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>

#include "daemon/metrics.h"

namespace corral::daemon {

struct AuditBudgetConfig {
  double rate = 20;           // tokens (KiB of records) per second per sandbox, sustained
  std::uint32_t burst = 200;  // tokens a quiet sandbox may spend at once
  std::chrono::milliseconds summary_interval{10'000};
};

// Tokens refill at `rate` per second up to `burst`; take() spends one.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  TokenBucket(double rate, double burst, Clock::time_point now)
      : rate_(rate), burst_(burst), tokens_(burst), at_(now) {}
  bool take(Clock::time_point now, double cost = 1);
  // At least one token left by `now`.
  bool any(Clock::time_point now) const { return level(now) >= 1.0; }
  // Back at `burst` by `now` (a sandbox that has been quiet long enough).
  bool full(Clock::time_point now) const;

 private:
  double level(Clock::time_point now) const;
  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point at_;
};

// Whether a record of `type` is one a sandbox makes on its own (budgeted),
// rather than one an API client's request makes.
bool sandbox_triggered(std::string_view type);

inline constexpr std::string_view kAuditSuppressedType = "audit.suppressed";

// Tokens a record costs: one per started KiB of its line (the event, plus
// about 220 bytes the log adds), at least 1.
double audit_record_cost(const nlohmann::json& event);

class AuditBudget {
 public:
  using Clock = std::chrono::steady_clock;
  // Where records go. `droppable`: the record may be dropped there (the
  // journal's queue is full); returns false if it was.
  using Sink = std::function<bool(nlohmann::json event, bool droppable)>;

  AuditBudget(AuditBudgetConfig config, Sink sink, MetricsRegistry* metrics);
  ~AuditBudget();  // stop()
  AuditBudget(const AuditBudget&) = delete;
  AuditBudget& operator=(const AuditBudget&) = delete;

  // A thread that writes the summaries every summary_interval.
  void start();
  // Writes the summaries still owed and stops the thread. Records
  // submitted afterwards are still budgeted; their summaries are written
  // by the next tick() or stop().
  void stop();

  void submit(nlohmann::json event) { submit(std::move(event), Clock::now()); }
  void submit(nlohmann::json event, Clock::time_point now);
  // Writes a summary for every sandbox that had records suppressed since
  // its last one, and forgets sandboxes quiet long enough that their
  // bucket is full again (the state is per active sandbox only).
  void tick(Clock::time_point now);

  std::size_t tracked() const;  // sandboxes with state now (tests)
  const AuditBudgetConfig& config() const { return config_; }

 private:
  struct PerSandbox {
    explicit PerSandbox(const AuditBudgetConfig& c, Clock::time_point now)
        : bucket(c.rate, c.burst, now) {}
    TokenBucket bucket;
    Clock::time_point since{};  // first suppression since the last summary
    std::map<std::string, std::uint64_t, std::less<>> over_budget;  // by type
    std::map<std::string, std::uint64_t, std::less<>> queue_full;   // by type
    bool owes_summary() const { return !over_budget.empty() || !queue_full.empty(); }
  };
  void count(std::string_view kind, std::string_view reason);
  void run();

  const AuditBudgetConfig config_;
  Sink sink_;
  MetricsRegistry* metrics_;
  mutable std::mutex mu_;
  std::map<std::string, PerSandbox, std::less<>> sandboxes_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace corral::daemon
