// A task's bounds on its broker tokens (issue 15, S4; docs/secrets.md
// "Lifetime"): a deadline that only shortens (SecretBroker::limit_sandbox)
// and revocation before the sandbox ends (revoke_sandbox), driven by an
// injected clock; the refusal text the proxy and the gateway answer with;
// the stored limits (daemon/token_limits.h); and SecretService's
// limit_token_lifetime / revoke_tokens, which survive a daemon restart
// (reattach issues new tokens and they come out already bounded).
#include <gtest/gtest.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/metrics.h"
#include "daemon/secret_service.h"
#include "daemon/token_limits.h"
#include "secrets/broker.h"
#include "support/temp_dir.h"

namespace corral {
namespace {

using secrets::BrokerEvent;
using secrets::OutboundRequest;
using secrets::ResolvedSecret;
using secrets::SecretBroker;
using secrets::SwapOutcome;
using std::chrono::seconds;
using Clock = std::chrono::system_clock;

std::string random_text(std::size_t n) {
  EXPECT_TRUE(secrets::sodium_ready());
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(kChars[randombytes_uniform(62)]);
  return v;
}

std::string head_for(const std::string& token) {
  return "GET /v1/models HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " + token +
         "\r\n\r\n";
}

OutboundRequest to_api(std::string_view sandbox) {
  return OutboundRequest{sandbox, "api.example.com", 443, "http"};
}

class TokenLifetimeTest : public ::testing::Test {
 protected:
  TokenLifetimeTest()
      : broker_(
            [this](const BrokerEvent& e) {
              std::lock_guard lock(mu_);
              events_.push_back(e);
            },
            [this] { return base_ + seconds(tick_.load()); }) {}

  ResolvedSecret secret(const std::string& name, seconds ttl = seconds(300)) {
    ResolvedSecret s;
    s.name = name;
    s.key = name;
    s.mode = secrets::SecretMode::kBroker;
    s.tier = secrets::SecretTier::kHigh;
    s.env_var = "TOKEN";
    s.hosts = {{"api.example.com", 443, false}};
    s.ttl = ttl;
    values_.push_back("sk-" + random_text(40));
    s.value = secrets::SecretValue(values_.back());
    return s;
  }
  std::string issue(const std::string& sandbox, const ResolvedSecret& s) {
    auto t = broker_.issue(sandbox, s);
    EXPECT_TRUE(t) << t.error().to_string();
    return t ? *t : std::string();
  }
  // Swaps one request carrying `token` for `sandbox`: the outcome, the
  // reason, and whether the head that would go upstream holds a value.
  struct Sent {
    SwapOutcome outcome;
    std::string reason;
    bool value_in_head = false;
    bool token_in_head = false;
  };
  Sent send(const std::string& sandbox, const std::string& token) {
    std::string head = head_for(token);
    auto r = broker_.swap(to_api(sandbox), head);
    Sent out{r.outcome, r.reason};
    for (const auto& v : values_) out.value_in_head |= head.find(v) != std::string::npos;
    out.token_in_head = head.find(token) != std::string::npos;
    return out;
  }
  std::vector<BrokerEvent> events_of(std::string_view kind) {
    std::lock_guard lock(mu_);
    std::vector<BrokerEvent> out;
    for (const auto& e : events_)
      if (e.kind == kind) out.push_back(e);
    return out;
  }
  Clock::time_point at(long tick) const { return base_ + seconds(tick); }

  Clock::time_point base_ = Clock::time_point(seconds(1'900'000'000));
  std::atomic<long> tick_{0};
  std::mutex mu_;
  std::vector<BrokerEvent> events_;
  std::vector<std::string> values_;
  SecretBroker broker_;
};

TEST_F(TokenLifetimeTest, ADeadlineExpiresTheTokenOnTheTickItIsReached) {
  std::string token = issue("sb-task", secret("openai"));
  EXPECT_EQ(broker_.limit_sandbox("sb-task", at(10)), 1u);
  tick_ = 9;
  Sent before = send("sb-task", token);
  EXPECT_EQ(before.outcome, SwapOutcome::kSwapped);
  EXPECT_TRUE(before.value_in_head);
  tick_ = 10;
  Sent after = send("sb-task", token);
  EXPECT_EQ(after.outcome, SwapOutcome::kRefused);
  EXPECT_EQ(after.reason, "expired");
  EXPECT_FALSE(after.value_in_head) << "a refused head is left as it was";
  EXPECT_TRUE(after.token_in_head);
  ASSERT_EQ(events_of("expired").size(), 1u);
  auto refused = events_of("refused");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].reason, "expired");
  EXPECT_EQ(broker_.counters().refusals_by_reason["expired"], 1u);
  EXPECT_EQ(broker_.counters().expired, 1u);
}

TEST_F(TokenLifetimeTest, ADeadlineNeverLengthensAToken) {
  // The secret's own ttl (5 s) is shorter than the task's deadline.
  std::string short_lived = issue("sb-task", secret("search", seconds(5)));
  std::string long_lived = issue("sb-task", secret("openai", seconds(300)));
  EXPECT_EQ(broker_.limit_sandbox("sb-task", at(60)), 1u) << "only the 300 s token is shortened";
  // A later, longer deadline changes nothing.
  EXPECT_EQ(broker_.limit_sandbox("sb-task", at(120)), 0u);
  tick_ = 5;
  EXPECT_EQ(send("sb-task", short_lived).reason, "expired");
  tick_ = 59;
  EXPECT_EQ(send("sb-task", long_lived).outcome, SwapOutcome::kSwapped);
  tick_ = 60;
  EXPECT_EQ(send("sb-task", long_lived).reason, "expired");
}

TEST_F(TokenLifetimeTest, ADeadlineAlreadyPastExpiresAtOnce) {
  tick_ = 100;
  std::string token = issue("sb-task", secret("openai"));
  EXPECT_EQ(broker_.limit_sandbox("sb-task", at(50)), 1u);
  EXPECT_EQ(events_of("expired").size(), 1u) << "expired when limited, not at the next use";
  EXPECT_EQ(broker_.counters().active_tokens, 0u);
  Sent s = send("sb-task", token);
  EXPECT_EQ(s.outcome, SwapOutcome::kRefused);
  EXPECT_EQ(s.reason, "expired");
  EXPECT_FALSE(s.value_in_head);
}

TEST_F(TokenLifetimeTest, RevocationIsIdempotentAndRefusesEveryTokenOfTheSandbox) {
  std::string a = issue("sb-task", secret("openai"));
  std::string b = issue("sb-task", secret("search"));
  EXPECT_EQ(send("sb-task", a).outcome, SwapOutcome::kSwapped);
  EXPECT_EQ(broker_.revoke_sandbox("sb-task"), 2u);
  EXPECT_EQ(broker_.revoke_sandbox("sb-task"), 0u) << "revoked twice: nothing more to do";
  EXPECT_EQ(events_of("revoked").size(), 2u) << "one record per token, not per call";
  for (const auto& t : {a, b}) {
    Sent s = send("sb-task", t);
    EXPECT_EQ(s.outcome, SwapOutcome::kRefused);
    EXPECT_EQ(s.reason, "revoked");
    EXPECT_FALSE(s.value_in_head);
  }
  // A deadline after revocation does not bring a token back, nor does time.
  EXPECT_EQ(broker_.limit_sandbox("sb-task", at(1000)), 0u);
  tick_ = 4000;  // past the tombstone's hour: still refused, now as unknown
  broker_.sweep();
  EXPECT_EQ(send("sb-task", a).outcome, SwapOutcome::kRefused);
  EXPECT_EQ(broker_.counters().revoked, 2u);
  EXPECT_EQ(broker_.counters().active_tokens, 0u);
}

TEST_F(TokenLifetimeTest, OtherSandboxesTokensAreUnaffected) {
  std::string mine = issue("sb-task", secret("openai"));
  std::string other = issue("sb-other", secret("openai"));
  std::string third = issue("sb-third", secret("openai"));
  broker_.limit_sandbox("sb-task", at(5));
  broker_.revoke_sandbox("sb-other-not-this");  // a prefix-like id: no match
  EXPECT_EQ(broker_.revoke_sandbox("sb-task"), 1u);
  tick_ = 200;
  EXPECT_EQ(send("sb-task", mine).reason, "revoked");
  EXPECT_EQ(send("sb-other", other).outcome, SwapOutcome::kSwapped);
  EXPECT_EQ(send("sb-third", third).outcome, SwapOutcome::kSwapped);
  // The sandbox's revoked token sent by another sandbox is still that
  // other sandbox's attempt, refused.
  EXPECT_EQ(send("sb-other", mine).outcome, SwapOutcome::kRefused);
}

// A request whose head was swapped before the revocation has left with the
// value (the proxy sends one request per upstream connection on a swapped
// path, so its body and answer finish); every head swapped after
// revoke_sandbox() returns is refused. Checked on several threads: a swap
// that started after the revocation finished never gets a value.
TEST_F(TokenLifetimeTest, NoSwapStartedAfterTheRevocationGetsTheValue) {
  std::string token = issue("sb-task", secret("openai"));
  std::atomic<bool> revoked{false}, stop{false};
  std::atomic<int> late_swaps{0}, early_swaps{0}, refusals{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        const bool after = revoked.load();
        std::string head = head_for(token);
        auto r = broker_.swap(to_api("sb-task"), head);
        if (r.outcome == SwapOutcome::kSwapped) {
          (after ? late_swaps : early_swaps)++;
          secrets::wipe(head);
        } else {
          EXPECT_EQ(r.reason, "revoked");
          refusals++;
        }
      }
    });
  }
  while (early_swaps.load() == 0) std::this_thread::yield();
  broker_.revoke_sandbox("sb-task");
  revoked = true;
  while (refusals.load() < 200) std::this_thread::yield();
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(late_swaps.load(), 0);
  EXPECT_GT(refusals.load(), 0);
}

TEST(StaleTokenRefusal, NamesRevokedAndExpiredAndLeavesOtherReasonsToTheCaller) {
  secrets::SwapResult r;
  r.outcome = SwapOutcome::kRefused;
  r.secrets = {"openai"};
  r.reason = "revoked";
  std::string text = secrets::stale_token_refusal(r, "api.example.com:443");
  EXPECT_EQ(text.rfind("broker token revoked: the token of secret openai", 0), 0u) << text;
  EXPECT_NE(text.find("api.example.com:443"), std::string::npos);
  r.reason = "expired";
  EXPECT_EQ(secrets::stale_token_refusal(r, "x:1").rfind("broker token expired:", 0), 0u);
  for (const char* other : {"host not allowed", "unknown token", "token of another sandbox"}) {
    r.reason = other;
    EXPECT_EQ(secrets::stale_token_refusal(r, "x:1"), "") << other;
  }
  r.outcome = SwapOutcome::kSwapped;
  r.reason = "revoked";
  EXPECT_EQ(secrets::stale_token_refusal(r, "x:1"), "");
}

// A scratch directory removed at the end.
class TempDir : public ::corral::testing::TempDir {
 public:
  TempDir() : ::corral::testing::TempDir("corral-token-lifetime") {}
};

TEST(TokenLimits, StoresReadsAndForgetsALimitAndRefusesWhatItCannotTrust) {
  TempDir dir;
  daemon::TokenLimits limits(dir.path() + "/token-limits");
  ASSERT_TRUE(limits.open());
  auto none = limits.get("sb-1");
  ASSERT_TRUE(none) << none.error().to_string();
  EXPECT_FALSE(none->any());
  const auto deadline = Clock::time_point(std::chrono::milliseconds(1'900'000'000'123));
  ASSERT_TRUE(limits.put("sb-1", {deadline, false}));
  ASSERT_TRUE(limits.put("sb-1", {deadline, true}));
  auto back = limits.get("sb-1");
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->deadline && *back->deadline == deadline);
  EXPECT_TRUE(back->revoked);
  struct stat st {};
  ASSERT_EQ(::stat((limits.dir() + "/sb-1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(limits.erase("sb-1"));
  EXPECT_TRUE(limits.erase("sb-1")) << "absent is no error";
  EXPECT_FALSE(limits.get("sb-1")->any());
  for (const char* bad : {"", "../x", "a/b", ".hidden"}) {
    EXPECT_FALSE(limits.get(bad)) << bad;
    EXPECT_FALSE(limits.put(bad, {})) << bad;
  }
  for (const char* corrupt : {"not json", "[]", R"({"revoked": "yes"})", R"({"not_after_ms": 1.5})"}) {
    std::ofstream(limits.dir() + "/sb-2.json") << corrupt;
    EXPECT_FALSE(limits.get("sb-2")) << corrupt;
  }
}

// SecretService over a real store file: limit and revoke, then a second
// service on the same data dir (a restarted daemon) re-attaches the
// sandbox, and its new tokens come out revoked (or bounded).
class SecretServiceLifetime : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(secrets::sodium_ready());
    value_ = "sk-" + random_text(40);
    store_file_ = dir_.path() + "/store";
    std::ofstream(store_file_) << "openai=" << value_ << "\n";
    ::chmod(store_file_.c_str(), 0600);
    spec_.limits.max_lifetime = std::chrono::hours(1);
    SecretSpec s;
    s.name = "openai";
    s.tier = "high";
    s.hosts.push_back({"api.example.com", 443, false});
    spec_.secrets.push_back(s);
  }
  std::unique_ptr<daemon::SecretService> start_service() {
    secrets::SecretStoreConfig config;
    config.file = store_file_;
    auto svc = std::make_unique<daemon::SecretService>(config, dir_.path() + "/data", metrics_);
    auto st = svc->start();
    EXPECT_TRUE(st) << st.error().to_string();
    svc->set_audit([this](nlohmann::json j) {
      std::lock_guard lock(mu_);
      audit_.push_back(std::move(j));
    });
    return svc;
  }
  // The sandbox's token (from its environment) and what a swap of it does.
  std::string token_of(daemon::SecretService& svc, const std::string& id) {
    for (auto& kv : svc.env(id))
      if (kv.rfind("OPENAI=", 0) == 0) return kv.substr(7);
    return {};
  }
  secrets::SwapResult send(daemon::SecretService& svc, const std::string& id) {
    std::string head = head_for(token_of(svc, id));
    auto r = svc.broker()->swap(to_api(id), head);
    EXPECT_EQ(head.find(value_) != std::string::npos, r.outcome == SwapOutcome::kSwapped);
    secrets::wipe(head);
    return r;
  }
  void inject(daemon::SecretService& svc, const std::string& id) {
    auto resolved = svc.prepare(spec_);
    ASSERT_TRUE(resolved) << resolved.error().to_string();
    auto st = svc.inject(id, *resolved);
    ASSERT_TRUE(st) << st.error().to_string();
  }

  TempDir dir_;
  std::string value_, store_file_;
  SandboxSpec spec_;
  MetricsRegistry metrics_;
  std::mutex mu_;
  std::vector<nlohmann::json> audit_;
};

TEST_F(SecretServiceLifetime, RevokedTokensStayRevokedAcrossARestartAndTheLimitGoesWithTheSandbox) {
  auto svc = start_service();
  inject(*svc, "sb-kept");
  inject(*svc, "sb-next");
  ASSERT_EQ(send(*svc, "sb-kept").outcome, SwapOutcome::kSwapped);
  auto n = svc->revoke_tokens("sb-kept");
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 1u);
  auto again = svc->revoke_tokens("sb-kept");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(send(*svc, "sb-kept").reason, "revoked");
  EXPECT_EQ(send(*svc, "sb-next").outcome, SwapOutcome::kSwapped);
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/data/token-limits/sb-kept.json"));

  // A restart: the old daemon's tokens died with it; the new one issues
  // fresh tokens to both sandboxes, and the kept one's come out revoked.
  svc.reset();
  auto restarted = start_service();
  ASSERT_TRUE(restarted->reattach("sb-kept", spec_));
  ASSERT_TRUE(restarted->reattach("sb-next", spec_));
  ASSERT_FALSE(token_of(*restarted, "sb-kept").empty());
  EXPECT_EQ(send(*restarted, "sb-kept").reason, "revoked");
  EXPECT_EQ(send(*restarted, "sb-next").outcome, SwapOutcome::kSwapped);

  // The sandbox's end forgets its limit.
  EXPECT_TRUE(restarted->remove("sb-kept").empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data/token-limits/sb-kept.json"));
  // A sandbox without broker secrets (or gone) has nothing to revoke and
  // gets no file.
  auto gone = restarted->revoke_tokens("sb-never");
  ASSERT_TRUE(gone);
  EXPECT_EQ(*gone, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/data/token-limits/sb-never.json"));
  // No audit record holds the value or a token.
  std::lock_guard lock(mu_);
  for (const auto& j : audit_) {
    EXPECT_EQ(j.dump().find(value_), std::string::npos);
    EXPECT_EQ(j.dump().find("corral_tok_"), std::string::npos) << j.dump();
  }
}

TEST_F(SecretServiceLifetime, ADeadlineIsKeptAcrossARestartAndOnlyShortens) {
  auto svc = start_service();
  inject(*svc, "sb-task");
  const auto now = Clock::now();
  auto n = svc->limit_token_lifetime("sb-task", now + std::chrono::minutes(15));
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 1u);
  // A later deadline does not lengthen it.
  auto later = svc->limit_token_lifetime("sb-task", now + std::chrono::minutes(45));
  ASSERT_TRUE(later);
  EXPECT_EQ(*later, 0u);
  EXPECT_EQ(send(*svc, "sb-task").outcome, SwapOutcome::kSwapped);
  {
    std::lock_guard lock(mu_);
    bool recorded = false;
    for (const auto& j : audit_) recorded |= j.value("type", "") == "secret.lifetime";
    EXPECT_TRUE(recorded);
  }
  // The deadline passes while the daemon is down: the restarted daemon's
  // new token is expired at once. (The stored deadline is moved into the
  // past rather than waiting for it.)
  svc.reset();
  daemon::TokenLimits limits(dir_.path() + "/data/token-limits");
  auto stored = limits.get("sb-task");
  ASSERT_TRUE(stored && stored->deadline);
  EXPECT_TRUE(*stored->deadline == std::chrono::time_point_cast<std::chrono::milliseconds>(
                                        now + std::chrono::minutes(15)))
      << "the first, earlier deadline, to the millisecond";
  ASSERT_TRUE(limits.put("sb-task", {now - seconds(1), false}));
  auto restarted = start_service();
  ASSERT_TRUE(restarted->reattach("sb-task", spec_));
  EXPECT_EQ(send(*restarted, "sb-task").reason, "expired");
  EXPECT_EQ(restarted->broker()->counters().active_tokens, 0u);

  // An unreadable limit fails closed: the reattach fails (the sandbox is
  // then destroyed) and the new token is revoked.
  std::ofstream(dir_.path() + "/data/token-limits/sb-task.json") << "garbage";
  auto third = start_service();
  EXPECT_FALSE(third->reattach("sb-task", spec_));
  EXPECT_EQ(third->broker()->counters().active_tokens, 0u);
}

}  // namespace
}  // namespace corral
