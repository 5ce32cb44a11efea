// AuditBudget (src/daemon/audit_budget.h): the token bucket, the budget of
// records each sandbox may make the host write, the summary of what was
// left out, the counter, and that the budget covers every record type a
// sandbox's own actions make (a type not known to be an API client's is
// budgeted too).
#include "daemon/audit_budget.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

namespace corral::daemon {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Every record type a sandbox makes the host write by its own actions,
// with what makes it: the class under test. A new one belongs here.
const std::vector<std::string> kSandboxTriggered = {
    "network.dns",         // every DNS query (src/egress/dns_server.h)
    "network.connection",  // every proxied or refused connection, rate-limited ones too
    "network.gateway",     // every gateway request, refused or served
    "secret.swapped",      // a broker token swapped in a request
    "secret.refused",      // a token used where it may not go
    "secret.read",         // a secret file read (file mode) or a runtime-API read
    "some.future.kind",    // a type nobody classified: budgeted by default
};
// What API requests make (create, exec, destroy, token lifetime).
const std::vector<std::string> kApiTriggered = {"secret.inject",  "secret.wipe",
                                                "secret.issued",  "secret.revoked",
                                                "secret.expired", "secret.lifetime"};

struct Sink {
  std::mutex mu;
  std::vector<json> records;
  bool accept = true;  // false: the journal's queue is full
  AuditBudget::Sink fn() {
    return [this](json e, bool droppable) {
      std::lock_guard lock(mu);
      if (droppable && !accept) return false;
      records.push_back(std::move(e));
      return true;
    };
  }
  std::size_t of_type(const std::string& type) {
    std::lock_guard lock(mu);
    std::size_t n = 0;
    for (const auto& r : records) n += r.value("type", "") == type;
    return n;
  }
  std::vector<json> summaries() {
    std::lock_guard lock(mu);
    std::vector<json> out;
    for (const auto& r : records)
      if (r.value("type", "") == "audit.suppressed") out.push_back(r);
    return out;
  }
};

json record(const std::string& type, const std::string& sandbox) {
  return json{{"type", type}, {"sandbox", sandbox}, {"name", "x.test"}};
}

TEST(TokenBucket, SpendsTheBurstThenRefillsAtTheRate) {
  const auto t0 = Clock::now();
  TokenBucket b(10, 5, t0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(b.take(t0)) << i;
  EXPECT_FALSE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 50ms)) << "half a token";
  EXPECT_TRUE(b.take(t0 + 100ms));
  EXPECT_FALSE(b.take(t0 + 100ms));
  // Never more than the burst, however long it was quiet.
  int taken = 0;
  const auto later = t0 + 1h;
  while (b.take(later)) ++taken;
  EXPECT_EQ(taken, 5);
  EXPECT_FALSE(b.full(later));
  EXPECT_TRUE(b.full(later + 500ms));
  // A clock that goes back takes nothing extra.
  EXPECT_FALSE(b.take(t0));
}

TEST(AuditBudget, EverySandboxTriggeredKindIsBudgetedAndSummarized) {
  for (const std::string& type : kSandboxTriggered) {
    SCOPED_TRACE(type);
    Sink sink;
    MetricsRegistry metrics;
    AuditBudget budget({/*rate=*/1, /*burst=*/10, 10s}, sink.fn(), &metrics);
    const auto t0 = Clock::now();
    for (int i = 0; i < 1000; ++i) budget.submit(record(type, "sb1"), t0);
    EXPECT_EQ(sink.of_type(type), 10u) << "the burst";
    // 5 s later: 5 more tokens.
    for (int i = 0; i < 1000; ++i) budget.submit(record(type, "sb1"), t0 + 5s);
    EXPECT_EQ(sink.of_type(type), 15u);
    budget.tick(t0 + 10s);
    auto sums = sink.summaries();
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums[0]["sandbox"], "sb1");
    EXPECT_EQ(sums[0]["over_budget"][type], 1985) << sums[0].dump();
    EXPECT_EQ(sums[0]["suppressed"], 1985);
    EXPECT_EQ(sums[0]["budget"]["burst"], 10);
    EXPECT_EQ(sums[0].value("period_ms", -1), 10'000 - 0) << "since the first suppression";
    const std::string text = metrics.render();
    EXPECT_NE(
        text.find("corral_audit_suppressed_total{kind=\"" + type + "\",reason=\"budget\"} 1985"),
        std::string::npos)
        << text;
    // Nothing more suppressed: no summary at the next tick.
    budget.tick(t0 + 20s);
    EXPECT_EQ(sink.summaries().size(), 1u);
  }
}

TEST(AuditBudget, ApiTriggeredKindsAreNeverBudgeted) {
  for (const std::string& type : kApiTriggered) {
    SCOPED_TRACE(type);
    EXPECT_FALSE(sandbox_triggered(type));
    Sink sink;
    AuditBudget budget({1, 1, 10s}, sink.fn(), nullptr);
    const auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) budget.submit(record(type, "sb1"), t0);
    EXPECT_EQ(sink.of_type(type), 100u);
    budget.tick(t0 + 10s);
    EXPECT_TRUE(sink.summaries().empty());
  }
  for (const std::string& type : kSandboxTriggered) EXPECT_TRUE(sandbox_triggered(type)) << type;
}

TEST(AuditBudget, ARecordCostsOneTokenPerStartedKiB) {
  EXPECT_EQ(audit_record_cost(record("network.dns", "sb")), 1);
  json big = record("network.gateway", "sb");
  big["path"] = std::string(5000, 'p');
  EXPECT_EQ(audit_record_cost(big), 6) << "5000 + ~270 bytes: 6 KiB started";
  Sink sink;
  AuditBudget budget({1, 60, 10s}, sink.fn(), nullptr);
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) budget.submit(big, t0);
  EXPECT_EQ(sink.of_type("network.gateway"), 10u) << "60 tokens buy ten 6-KiB records";
  // Bytes written stay within burst KiB, whatever the record size.
  std::size_t bytes = 0;
  for (const auto& r : sink.records) bytes += r.dump().size() + 220;
  EXPECT_LE(bytes, 60u * 1024u);
  // One dearer than the whole burst still passes from a full bucket.
  json huge = record("network.gateway", "other");
  huge["path"] = std::string(100'000, 'p');
  budget.submit(huge, t0);
  EXPECT_EQ(sink.of_type("network.gateway"), 11u);
  budget.submit(huge, t0);
  EXPECT_EQ(sink.of_type("network.gateway"), 11u);
}

TEST(AuditBudget, EachSandboxHasItsOwnBudget) {
  Sink sink;
  AuditBudget budget({1, 3, 10s}, sink.fn(), nullptr);
  const auto t0 = Clock::now();
  for (int i = 0; i < 100; ++i) budget.submit(record("network.dns", "noisy"), t0);
  for (int i = 0; i < 3; ++i) budget.submit(record("network.dns", "quiet"), t0);
  std::size_t quiet = 0;
  for (const auto& r : sink.records) quiet += r["sandbox"] == "quiet";
  EXPECT_EQ(quiet, 3u) << "a noisy sandbox does not spend another's budget";
  budget.tick(t0 + 1s);
  auto sums = sink.summaries();
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0]["sandbox"], "noisy");
  // Kinds are counted apart, in one summary per sandbox and interval.
  for (int i = 0; i < 4; ++i) budget.submit(record("network.connection", "noisy"), t0 + 1s);
  for (int i = 0; i < 6; ++i) budget.submit(record("network.dns", "noisy"), t0 + 1s);
  budget.tick(t0 + 2s);
  sums = sink.summaries();
  ASSERT_EQ(sums.size(), 2u);
  EXPECT_EQ(sums[1]["over_budget"]["network.connection"], 3) << sums[1].dump();
  EXPECT_EQ(sums[1]["over_budget"]["network.dns"], 6) << sums[1].dump();
  EXPECT_EQ(sums[1]["suppressed"], 9);
}

TEST(AuditBudget, RecordsTheFullJournalDroppedAreInTheSummaryAndCounter) {
  Sink sink;
  MetricsRegistry metrics;
  AuditBudget budget({1000, 1000, 10s}, sink.fn(), &metrics);
  const auto t0 = Clock::now();
  sink.accept = false;
  for (int i = 0; i < 7; ++i) budget.submit(record("network.connection", "sb"), t0);
  sink.accept = true;
  budget.tick(t0 + 1s);
  auto sums = sink.summaries();
  ASSERT_EQ(sums.size(), 1u) << "the summary itself is never dropped";
  EXPECT_EQ(sums[0]["queue_full"]["network.connection"], 7) << sums[0].dump();
  EXPECT_NE(
      metrics.render().find(
          "corral_audit_suppressed_total{kind=\"network.connection\",reason=\"queue_full\"} 7"),
      std::string::npos)
      << metrics.render();
}

TEST(AuditBudget, StateIsKeptOnlyForActiveSandboxes) {
  Sink sink;
  AuditBudget budget({10, 10, 1s}, sink.fn(), nullptr);
  const auto t0 = Clock::now();
  for (int s = 0; s < 500; ++s) budget.submit(record("network.dns", "sb" + std::to_string(s)), t0);
  EXPECT_EQ(budget.tracked(), 500u);
  // Their buckets are full again 1 s later (10 per second, burst 10).
  budget.tick(t0 + 2s);
  EXPECT_EQ(budget.tracked(), 0u);
}

TEST(AuditBudget, StopWritesTheSummariesStillOwed) {
  Sink sink;
  AuditBudget budget({1, 1, 1h}, sink.fn(), nullptr);
  budget.start();
  budget.submit(record("network.dns", "sb"));
  budget.submit(record("network.dns", "sb"));
  budget.stop();
  auto sums = sink.summaries();
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0]["over_budget"]["network.dns"], 1);
}

}  // namespace
}  // namespace corral::daemon
