// Broker tokens (src/secrets/broker.h): issue, swap in headers and the
// request line, each refusal reason, revoke, expiry with an injected clock,
// runtime reads, TLS interception, audit events without values or tokens,
// and swaps racing revokes on several threads.
#include "secrets/broker.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace corral::secrets {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::system_clock;

std::string random_value() {
  EXPECT_TRUE(sodium_ready());
  static constexpr char kChars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  std::string v = "sk-";
  for (int i = 0; i < 40; ++i) v.push_back(kChars[randombytes_uniform(62)]);
  return v;
}

ResolvedSecret broker_secret(std::string name, const std::string& value,
                             std::vector<SecretHost> hosts, SecretTier tier = SecretTier::kHigh) {
  ResolvedSecret s;
  s.name = std::move(name);
  s.key = s.name;
  s.mode = SecretMode::kBroker;
  s.tier = tier;
  s.env_var = "TOKEN";
  s.hosts = std::move(hosts);
  s.ttl = seconds(300);
  s.value = SecretValue(value);
  return s;
}

class BrokerTest : public ::testing::Test {
 protected:
  BrokerTest()
      : broker_([this](const BrokerEvent& e) { record(e); },
                [this] { return base_ + seconds(offset_.load()); }) {}

  void record(const BrokerEvent& e) {
    std::lock_guard lock(mu_);
    events_.push_back(e);
  }
  std::vector<BrokerEvent> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<BrokerEvent> events_of(std::string_view kind) {
    std::vector<BrokerEvent> out;
    for (auto& e : events()) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  // No event field holds a value or a token issued in this test.
  void expect_clean_events() {
    for (const auto& e : events()) {
      for (const std::string& field :
           {e.sandbox, e.secret, e.kind, e.host, e.via, e.reason, e.token_hash}) {
        for (const auto& v : values_) EXPECT_EQ(field.find(v), std::string::npos) << field;
        for (const auto& t : tokens_) EXPECT_EQ(field.find(t), std::string::npos) << field;
        EXPECT_EQ(field.find("corral_tok_"), std::string::npos) << field;
      }
    }
  }
  std::string issue(const std::string& sandbox, const ResolvedSecret& s) {
    auto t = broker_.issue(sandbox, s);
    EXPECT_TRUE(t) << t.error().to_string();
    if (!t) return {};
    tokens_.push_back(*t);
    return *t;
  }
  ResolvedSecret secret(std::string name, std::vector<SecretHost> hosts,
                        SecretTier tier = SecretTier::kHigh) {
    values_.push_back(random_value());
    return broker_secret(std::move(name), values_.back(), std::move(hosts), tier);
  }

  Clock::time_point base_ = Clock::time_point(seconds(1'800'000'000));
  std::atomic<long> offset_{0};
  std::mutex mu_;
  std::vector<BrokerEvent> events_;
  std::vector<std::string> values_;
  std::vector<std::string> tokens_;
  SecretBroker broker_;
};

std::string head_with(std::string_view field_line, std::string_view host = "api.example.com") {
  return "POST /v1/chat HTTP/1.1\r\nHost: " + std::string(host) + "\r\n" + std::string(field_line) +
         "\r\nContent-Length: 2\r\n\r\n";
}

OutboundRequest to(std::string_view sandbox, std::string_view host, std::uint16_t port = 443,
                   std::string_view via = "gateway") {
  return OutboundRequest{sandbox, host, port, via};
}

TEST_F(BrokerTest, TokenShape) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  std::string t1 = issue("sb-1", s);
  std::string t2 = issue("sb-1", s);
  EXPECT_TRUE(looks_like_token(t1)) << t1;
  EXPECT_EQ(t1.size(), kTokenPrefix.size() + 43);
  EXPECT_EQ(t1.rfind("corral_tok_", 0), 0u);
  EXPECT_NE(t1, t2);
  EXPECT_EQ(t1.find(values_[0]), std::string::npos);
  EXPECT_FALSE(looks_like_token(t1.substr(0, t1.size() - 1)));
  auto ev = events_of("issued");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].sandbox, "sb-1");
  EXPECT_EQ(ev[0].secret, "openai");
  EXPECT_EQ(ev[0].host, "api.example.com:443");
  EXPECT_EQ(ev[0].token_hash.size(), 12u);
  EXPECT_NE(ev[0].token_hash, ev[1].token_hash);
  expect_clean_events();
}

TEST_F(BrokerTest, IssueRefusesNonBrokerSecretsAndPastExpiry) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  s.mode = SecretMode::kEnv;
  EXPECT_FALSE(broker_.issue("sb-1", s));
  s.mode = SecretMode::kBroker;
  EXPECT_FALSE(broker_.issue("sb-1", s, base_));  // not in the future
  EXPECT_FALSE(broker_.issue("", s));
  s.hosts.clear();
  EXPECT_FALSE(broker_.issue("sb-1", s));
}

TEST_F(BrokerTest, SwapsInAuthorizationHeader) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  std::string t = issue("sb-1", s);
  std::string head = head_with("Authorization: Bearer " + t);
  SwapResult r = broker_.swap(to("sb-1", "api.example.com"), head);
  ASSERT_EQ(r.outcome, SwapOutcome::kSwapped) << r.reason;
  EXPECT_EQ(head, head_with("Authorization: Bearer " + values_[0]));
  EXPECT_EQ(r.secrets, std::vector<std::string>{"openai"});
  wipe(head);
  auto ev = events_of("swapped");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].host, "api.example.com:443");
  EXPECT_EQ(ev[0].via, "gateway");
  EXPECT_EQ(broker_.counters().swaps, 1u);
  expect_clean_events();
}

TEST_F(BrokerTest, SwapsInXApiKeyAndQueryStringAndTwoTokensInOneHead) {
  auto a = secret("anthropic", {{"api.example.com", 443, false}});
  auto b = secret("search", {{"*.example.com", 443, false}});
  std::string ta = issue("sb-1", a);
  std::string tb = issue("sb-1", b);
  std::string head = "GET /search?key=" + tb + "&q=x HTTP/1.1\r\nHost: api.example.com\r\n" +
                     "x-api-key: " + ta + "\r\nX-Other: " + tb + "\r\n\r\n";
  SwapResult r = broker_.swap(to("sb-1", "api.example.com"), head);
  ASSERT_EQ(r.outcome, SwapOutcome::kSwapped) << r.reason;
  EXPECT_EQ(head, "GET /search?key=" + values_[1] + "&q=x HTTP/1.1\r\nHost: api.example.com\r\n" +
                      "x-api-key: " + values_[0] + "\r\nX-Other: " + values_[1] + "\r\n\r\n");
  EXPECT_EQ(r.secrets, (std::vector<std::string>{"anthropic", "search"}));
  EXPECT_EQ(events_of("swapped").size(), 3u);
  EXPECT_EQ(broker_.counters().swaps, 3u);
  EXPECT_EQ(broker_.counters().swapped_requests, 1u);
  expect_clean_events();
}

// Swaps `head` and expects a refusal with `reason`; the head unchanged.
#define EXPECT_REFUSED(request, head_in, why)     \
  do {                                            \
    std::string h_ = (head_in);                   \
    const std::string before_ = h_;               \
    SwapResult r_ = broker_.swap((request), h_);  \
    EXPECT_EQ(r_.outcome, SwapOutcome::kRefused); \
    EXPECT_EQ(r_.reason, (why));                  \
    EXPECT_EQ(h_, before_);                       \
  } while (0)

std::string b64(std::string_view text) {
  std::string out(sodium_base64_ENCODED_LEN(text.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(text.data()),
                    text.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);
  return out;
}

TEST_F(BrokerTest, SwapsInsideBasicCredentials) {
  auto s = secret("github", {{"github.com", 443, true}});
  std::string t = issue("sb-1", s);
  // git sends https://x-access-token:TOKEN@github.com/... as Basic auth.
  std::string head =
      "GET /o/r.git/info/refs HTTP/1.1\r\nHost: github.com\r\n"
      "authorization:  basic " +
      b64("x-access-token:" + t) + " \r\nAccept: */*\r\n\r\n";
  SwapResult r = broker_.swap(to("sb-1", "github.com", 443, "tls-intercept"), head);
  ASSERT_EQ(r.outcome, SwapOutcome::kSwapped) << r.reason;
  EXPECT_EQ(head,
            "GET /o/r.git/info/refs HTTP/1.1\r\nHost: github.com\r\n"
            "authorization:  basic " +
                b64("x-access-token:" + values_[0]) + " \r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(r.secrets, std::vector<std::string>{"github"});
  wipe(head);
  // The same credentials toward another host are refused, head unchanged.
  EXPECT_REFUSED(to("sb-1", "evil.example.org"),
                 "GET / HTTP/1.1\r\nAuthorization: Basic " + b64("u:" + t) + "\r\n\r\n",
                 kReasonHost);
  // Basic credentials without a token, and a field that is not base64, are
  // left alone.
  std::string plain = "GET / HTTP/1.1\r\nAuthorization: Basic " + b64("user:password") +
                      "\r\nX-Note: Basic !!\r\n\r\n";
  const std::string before = plain;
  EXPECT_EQ(broker_.swap(to("sb-1", "github.com"), plain).outcome, SwapOutcome::kNoToken);
  EXPECT_EQ(plain, before);
  // A byte above 0x7f in place of a digit: a strict server cannot decode
  // the field, so neither does the broker (libsodium alone would, and swap).
  std::string blob = b64("x-access-token:" + t);
  blob[0] = '\xc3';
  std::string high = "GET / HTTP/1.1\r\nAuthorization: Basic " + blob + "\r\n\r\n";
  const std::string high_before = high;
  EXPECT_EQ(broker_.swap(to("sb-1", "github.com"), high).outcome, SwapOutcome::kNoToken);
  EXPECT_EQ(high, high_before);
  expect_clean_events();
}

TEST_F(BrokerTest, NoTokenLeavesTheHeadAlone) {
  std::string head = head_with("Authorization: Bearer sk-plain");
  const std::string before = head;
  EXPECT_EQ(broker_.swap(to("sb-1", "api.example.com"), head).outcome, SwapOutcome::kNoToken);
  EXPECT_EQ(head, before);
}

TEST_F(BrokerTest, RefusesUnknownAndMalformedTokens) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  std::string t = issue("sb-1", s);
  std::string forged = t;
  forged.back() = forged.back() == 'a' ? 'b' : 'a';
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head_with("Authorization: Bearer " + forged),
                 kReasonUnknown);
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head_with("Authorization: Bearer corral_tok_abc"),
                 kReasonUnknown);
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head_with("Authorization: Bearer " + t + "x"),
                 kReasonUnknown);
  auto ev = events_of("refused");
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].secret, "");
  EXPECT_EQ(ev[0].reason, "unknown token");
  EXPECT_EQ(broker_.counters().refusals_by_reason["unknown token"], 3u);
  expect_clean_events();
}

TEST_F(BrokerTest, RefusesATokenOfAnotherSandbox) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  std::string t = issue("sb-1", s);
  EXPECT_REFUSED(to("sb-2", "api.example.com"), head_with("Authorization: Bearer " + t),
                 kReasonOtherSandbox);
  auto ev = events_of("refused");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].sandbox, "sb-2");
  EXPECT_EQ(ev[0].secret, "openai");
  auto read = broker_.read_value(t, "sb-2");
  EXPECT_FALSE(read);
  expect_clean_events();
}

TEST_F(BrokerTest, RefusesAnExpiredTokenWithAnInjectedClock) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  s.ttl = seconds(60);
  std::string t = issue("sb-1", s);
  std::string head = head_with("Authorization: Bearer " + t);
  offset_ = 59;
  std::string h = head;
  EXPECT_EQ(broker_.swap(to("sb-1", "api.example.com"), h).outcome, SwapOutcome::kSwapped);
  wipe(h);
  offset_ = 60;
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head, kReasonExpired);
  EXPECT_EQ(events_of("expired").size(), 1u);
  // Still "expired" (not "unknown") later, within the tombstone retention.
  offset_ = 60 + 1800;
  broker_.sweep();
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head, kReasonExpired);
  // After the retention it is gone: unknown.
  offset_ = 60 + 3600 + 1;
  broker_.sweep();
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head, kReasonUnknown);
  EXPECT_EQ(broker_.counters().expired, 1u);
  expect_clean_events();
}

// The self-check's question (T3): was this token issued to this sandbox for
// this secret? Yes while active and after its own TTL ended it (a short TTL
// is the client's choice); no once revoked, for another sandbox or secret,
// or for a token the broker never issued.
TEST_F(BrokerTest, IssuedToHoldsThroughExpiryButNotRevocation) {
  auto s = secret("openai", {{"api.example.com", 443, false}});
  s.ttl = seconds(1);
  std::string t = issue("sb-1", s);
  EXPECT_TRUE(broker_.issued_to(t, "sb-1", "openai"));
  EXPECT_FALSE(broker_.issued_to(t, "sb-2", "openai"));
  EXPECT_FALSE(broker_.issued_to(t, "sb-1", "github"));
  EXPECT_FALSE(broker_.issued_to("corral_tok_nonsense", "sb-1", "openai"));
  std::string other = t;
  other.back() = other.back() == 'a' ? 'b' : 'a';
  EXPECT_FALSE(broker_.issued_to(other, "sb-1", "openai"));
  offset_ = 2;  // past its TTL, before a sweep marks it
  EXPECT_TRUE(broker_.issued_to(t, "sb-1", "openai"));
  broker_.sweep();  // now a tombstone
  EXPECT_TRUE(broker_.issued_to(t, "sb-1", "openai"));
  EXPECT_FALSE(broker_.issued_to(t, "sb-2", "openai"));

  std::string r = issue("sb-1", secret("github", {{"api.github.com", 443, false}}));
  EXPECT_TRUE(broker_.issued_to(r, "sb-1", "github"));
  EXPECT_TRUE(broker_.revoke(r));
  EXPECT_FALSE(broker_.issued_to(r, "sb-1", "github"));
  EXPECT_TRUE(events_of("swapped").empty()) << "issued_to emits nothing of its own";
  expect_clean_events();
}

TEST_F(BrokerTest, RefusesRevokedTokens) {
  auto a = secret("openai", {{"api.example.com", 443, false}});
  auto b = secret("github", {{"api.github.com", 443, false}});
  std::string ta = issue("sb-1", a);
  std::string tb = issue("sb-1", b);
  std::string tc = issue("sb-2", a);
  EXPECT_TRUE(broker_.revoke(ta));
  EXPECT_FALSE(broker_.revoke(ta));  // already
  EXPECT_FALSE(broker_.revoke("corral_tok_nonsense"));
  EXPECT_REFUSED(to("sb-1", "api.example.com"), head_with("Authorization: Bearer " + ta),
                 kReasonRevoked);
  EXPECT_EQ(broker_.revoke_sandbox("sb-1"), 1u);  // tb; ta was already revoked
  EXPECT_REFUSED(to("sb-1", "api.github.com"),
                 head_with("Authorization: Bearer " + tb, "api.github.com"), kReasonRevoked);
  // Another sandbox's token is untouched.
  std::string h = head_with("Authorization: Bearer " + tc);
  EXPECT_EQ(broker_.swap(to("sb-2", "api.example.com"), h).outcome, SwapOutcome::kSwapped);
  wipe(h);
  EXPECT_EQ(events_of("revoked").size(), 2u);
  EXPECT_EQ(broker_.counters().revoked, 2u);
  expect_clean_events();
}

TEST_F(BrokerTest, RefusesAnotherHostAnotherPortAndChecksGlobs) {
  auto s = secret("openai", {{"api.example.com", 443, false}, {"*.cdn.example.net", 8443, false}});
  std::string t = issue("sb-1", s);
  const std::string field = "Authorization: Bearer " + t;
  EXPECT_REFUSED(to("sb-1", "evil.example.org"), head_with(field, "evil.example.org"), kReasonHost);
  EXPECT_REFUSED(to("sb-1", "api.example.com", 8443), head_with(field), kReasonHost);
  EXPECT_REFUSED(to("sb-1", "api.example.com.evil.org"), head_with(field), kReasonHost);
  EXPECT_REFUSED(to("sb-1", "cdn.example.net", 8443), head_with(field), kReasonHost);
  EXPECT_REFUSED(to("sb-1", "a.cdn.example.net", 443), head_with(field), kReasonHost);
  for (const char* ok : {"a.cdn.example.net", "x.y.cdn.example.net"}) {
    std::string h = head_with(field, ok);
    EXPECT_EQ(broker_.swap(to("sb-1", ok, 8443), h).outcome, SwapOutcome::kSwapped) << ok;
    wipe(h);
  }
  auto ev = events_of("refused");
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0].host, "evil.example.org:443");
  EXPECT_EQ(ev[0].reason, "host not allowed");
  EXPECT_EQ(broker_.counters().refusals_by_reason["host not allowed"], 5u);
  expect_clean_events();
}

TEST_F(BrokerTest, OneRefusedTokenRefusesTheWholeRequest) {
  auto a = secret("openai", {{"api.example.com", 443, false}});
  auto b = secret("github", {{"api.github.com", 443, false}});
  std::string ta = issue("sb-1", a);
  std::string tb = issue("sb-1", b);
  std::string head = "GET /?k=" + tb + " HTTP/1.1\r\nAuthorization: Bearer " + ta + "\r\n\r\n";
  const std::string before = head;
  SwapResult r = broker_.swap(to("sb-1", "api.example.com"), head);
  EXPECT_EQ(r.outcome, SwapOutcome::kRefused);
  EXPECT_EQ(r.reason, kReasonHost);
  EXPECT_EQ(r.secrets, std::vector<std::string>{"github"});
  EXPECT_EQ(head, before);
  EXPECT_TRUE(events_of("swapped").empty());
  EXPECT_EQ(broker_.counters().swaps, 0u);
  expect_clean_events();
}

TEST_F(BrokerTest, InterceptsOnlyHostsMarkedForIt) {
  auto s = secret("openai", {{"api.example.com", 443, true}, {"other.example.com", 443, false}});
  std::string t = issue("sb-1", s);
  EXPECT_TRUE(broker_.intercepts("sb-1", "api.example.com", 443));
  EXPECT_FALSE(broker_.intercepts("sb-1", "api.example.com", 8443));
  EXPECT_FALSE(broker_.intercepts("sb-1", "other.example.com", 443));
  EXPECT_FALSE(broker_.intercepts("sb-2", "api.example.com", 443));
  offset_ = 24 * 3600;  // expired: still intercepted, so a late use is refused
  EXPECT_TRUE(broker_.intercepts("sb-1", "api.example.com", 443));
  // Revoked (a kept sandbox after its task, issue 15): still intercepted,
  // so the late use is seen and refused rather than tunneled blind.
  broker_.revoke_sandbox("sb-1");
  EXPECT_TRUE(broker_.intercepts("sb-1", "api.example.com", 443));
  EXPECT_FALSE(broker_.intercepts("sb-1", "other.example.com", 443));
}

TEST_F(BrokerTest, RuntimeReadForLowAndMediumOnly) {
  auto m = secret("db", {{"db.example.com", 5432, false}}, SecretTier::kMedium);
  auto h = secret("openai", {{"api.example.com", 443, false}}, SecretTier::kHigh);
  std::string tm = issue("sb-1", m);
  std::string th = issue("sb-1", h);
  auto v = broker_.read_value(tm, "sb-1");
  ASSERT_TRUE(v) << v.error().to_string();
  EXPECT_TRUE(v->equals(values_[0]));
  auto refused = broker_.read_value(th, "sb-1");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("tier high"), std::string::npos);
  EXPECT_FALSE(broker_.read_value("corral_tok_x", "sb-1"));
  broker_.revoke(tm);
  auto late = broker_.read_value(tm, "sb-1");
  ASSERT_FALSE(late);
  EXPECT_NE(late.error().message.find("revoked"), std::string::npos);
  auto reads = events_of("read");
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].secret, "db");
  EXPECT_EQ(reads[0].via, "runtime-api");
  EXPECT_EQ(broker_.counters().reads, 1u);
  for (const auto& e : std::vector<Error>{refused.error(), late.error()}) {
    for (const auto& val : values_) EXPECT_EQ(e.message.find(val), std::string::npos);
  }
  expect_clean_events();
}

TEST_F(BrokerTest, ConcurrentSwapsWhileRevoking) {
  constexpr int kSandboxes = 8;
  std::vector<std::string> tokens;
  std::vector<ResolvedSecret> secrets;
  for (int i = 0; i < kSandboxes; ++i) {
    secrets.push_back(secret("s" + std::to_string(i), {{"api.example.com", 443, false}}));
    tokens.push_back(issue("sb-" + std::to_string(i), secrets.back()));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> swapped{0};
  std::atomic<int> refused{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      int i = w;
      while (!stop.load()) {
        const int sb = i % kSandboxes;
        ++i;
        const std::string id = "sb-" + std::to_string(sb);
        std::string head = head_with("Authorization: Bearer " + tokens[sb]);
        SwapResult r = broker_.swap(to(id, "api.example.com"), head);
        if (r.outcome == SwapOutcome::kSwapped) {
          if (head != head_with("Authorization: Bearer " + values_[sb])) ++wrong;
          ++swapped;
        } else if (r.outcome == SwapOutcome::kRefused && r.reason == kReasonRevoked) {
          ++refused;
        } else {
          ++wrong;
        }
        wipe(head);
        broker_.intercepts(id, "api.example.com", 443);
      }
    });
  }
  // Progress, not time: wait for swaps before revoking and for refusals
  // after (bounded, so a wedged broker fails instead of hanging).
  auto wait_for = [](const std::atomic<int>& n, int at_least) {
    for (int spin = 0; spin < 20000 && n.load() < at_least; ++spin) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  };
  wait_for(swapped, 50);
  for (int i = 0; i < kSandboxes; ++i) {
    EXPECT_EQ(broker_.revoke_sandbox("sb-" + std::to_string(i)), 1u);
    std::this_thread::yield();
  }
  wait_for(refused, 50);
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(swapped.load(), 0);
  EXPECT_GT(refused.load(), 0);
  const BrokerCounters c = broker_.counters();
  EXPECT_EQ(c.swaps, static_cast<std::uint64_t>(swapped.load()));
  EXPECT_EQ(c.refusals_by_reason.at("revoked"), static_cast<std::uint64_t>(refused.load()));
  EXPECT_EQ(c.active_tokens, 0u);
  expect_clean_events();
}

}  // namespace
}  // namespace corral::secrets
