// The filtering resolver (src/egress/dns_server.h) against a local test
// upstream (tests/support/test_dns_server.h), all on 127.0.0.0/8: the
// resolver listens on 127.0.0.2 for sandbox "a" and 127.0.0.3 for "b",
// the upstream on 127.0.0.1. No namespaces, no root needed.
#include "egress/dns_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "egress/dns_message.h"
#include "support/test_dns_server.h"

namespace corral::net {
namespace {

using namespace std::chrono_literals;
using corral::testing::TestDnsServer;
using Bytes = std::vector<std::uint8_t>;

// Sends `packet` from a fresh socket on 127.0.0.1 and waits for one reply.
std::optional<Bytes> exchange(const std::string& ip, std::uint16_t port, const Bytes& packet,
                              std::chrono::milliseconds wait = 3000ms) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return std::nullopt;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &to.sin_addr);
  if (::sendto(fd.get(), packet.data(), packet.size(), 0, reinterpret_cast<sockaddr*>(&to),
               sizeof to) < 0) {
    return std::nullopt;
  }
  pollfd p{fd.get(), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return std::nullopt;
  Bytes buf(4096);
  ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

std::optional<dns::Response> ask(const std::string& ip, std::uint16_t port, const std::string& name,
                                 std::uint16_t qtype, std::chrono::milliseconds wait = 3000ms) {
  std::uint16_t id = dns::random_query_id();
  auto q = dns::build_query(id, name, qtype);
  if (!q) return std::nullopt;
  auto reply = exchange(ip, port, *q, wait);
  if (!reply) return std::nullopt;
  auto r = dns::parse_response(*reply);
  if (!r || r->id != id) return std::nullopt;
  return *r;
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = 2000ms) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// Allows the names in `allowed` (and "*.suffix" entries as globs), answers
// gateway.corral.internal with a fixed address, denies the rest.
DnsPolicy allow(std::set<std::string> allowed) {
  return [allowed](const DnsQuestionContext& q) -> DnsVerdict {
    if (q.name == "gateway.corral.internal") {
      return {DnsAction::kResolve, "gateway", std::string("10.211.0.1")};
    }
    for (const auto& a : allowed) {
      if (a == q.name) return {DnsAction::kResolve, "allow " + a, std::nullopt};
      if (a.starts_with("*.") && q.name.ends_with(a.substr(1))) {
        return {DnsAction::kResolve, "allow " + a, std::nullopt};
      }
    }
    return {DnsAction::kNxDomain, "no rule for " + q.name, std::nullopt};
  };
}

class DnsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = TestDnsServer::start("127.0.0.1");
    ASSERT_TRUE(up) << up.error().to_string();
    upstream_ = std::move(*up);
    upstream_->add_a("allowed.test", "192.0.2.10", 300);
    upstream_->add_aaaa("allowed.test", "2001:db8::10", 120);
    upstream_->add_txt("allowed.test", "secret", 300);
    upstream_->add_cname("www.allowed.test", "edge.cdn.test", 600);
    upstream_->add_a("edge.cdn.test", "192.0.2.20", 45);
    upstream_->add_a("denied.test", "192.0.2.66", 300);
    config_.upstreams = {upstream_->endpoint()};
    config_.upstream_timeout = 300ms;
  }

  // The server's thread writes log_: stop it before the members go.
  void TearDown() override { server_.reset(); }

  void start(std::set<std::string> allowed = {"allowed.test", "*.allowed.test"}) {
    auto s = DnsServer::start(config_, [this](const DnsLogEntry& e) {
      std::lock_guard lock(mu_);
      log_.push_back(e);
    });
    ASSERT_TRUE(s) << s.error().to_string();
    server_ = std::move(*s);
    auto port = server_->add_sandbox("a", "127.0.0.2", 0, allow(std::move(allowed)));
    ASSERT_TRUE(port) << port.error().to_string();
    port_a_ = *port;
  }

  std::optional<dns::Response> ask_a(const std::string& name, std::uint16_t qtype = dns::kTypeA) {
    return ask("127.0.0.2", port_a_, name, qtype);
  }

  // The log entry for `name`, waiting for it (it is written after the reply).
  std::optional<DnsLogEntry> logged(const std::string& name, std::size_t nth = 0) {
    std::optional<DnsLogEntry> found;
    wait_until([&] {
      std::lock_guard lock(mu_);
      std::size_t seen = 0;
      for (const auto& e : log_) {
        if (e.name == name && seen++ == nth) {
          found = e;
          return true;
        }
      }
      return false;
    });
    return found;
  }

  std::size_t log_size() {
    std::lock_guard lock(mu_);
    return log_.size();
  }

  std::uint64_t outcome_count(DnsOutcome o, std::uint64_t expected) {
    wait_until([&] { return server_->metrics().count(o) >= expected; });
    return server_->metrics().count(o);
  }

  std::unique_ptr<TestDnsServer> upstream_;
  DnsServerConfig config_;
  std::unique_ptr<DnsServer> server_;
  std::uint16_t port_a_ = 0;
  std::mutex mu_;
  std::vector<DnsLogEntry> log_;
};

TEST_F(DnsServerTest, AllowedNameResolvesWithTheUpstreamTtl) {
  start();
  auto a = ask_a("allowed.test");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rcode(), 0u);
  ASSERT_EQ(a->answers.size(), 1u);
  EXPECT_EQ(a->answers[0].type, dns::kTypeA);
  EXPECT_EQ(a->answers[0].data, "192.0.2.10");
  EXPECT_EQ(a->answers[0].ttl, 300u);

  auto aaaa = ask_a("ALLOWED.test", dns::kTypeAaaa);
  ASSERT_TRUE(aaaa);
  EXPECT_EQ(aaaa->rcode(), 0u);
  ASSERT_EQ(aaaa->answers.size(), 1u);
  EXPECT_EQ(aaaa->answers[0].data, "2001:db8::10");
  EXPECT_EQ(aaaa->answers[0].ttl, 120u);
  // The question comes back as asked.
  EXPECT_EQ(aaaa->question->name, "allowed.test");

  EXPECT_TRUE(server_->answered("a", "allowed.test", "192.0.2.10"));
  EXPECT_TRUE(server_->answered("a", "Allowed.Test.", "2001:DB8::10"));
  EXPECT_FALSE(server_->answered("a", "allowed.test", "192.0.2.11"));
  EXPECT_FALSE(server_->answered("a", "other.test", "192.0.2.10"));
  EXPECT_EQ(server_->names_for("a", "192.0.2.10"), std::vector<std::string>{"allowed.test"});

  auto e = logged("allowed.test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sandbox_id, "a");
  EXPECT_EQ(e->qtype, dns::kTypeA);
  EXPECT_EQ(e->outcome, DnsOutcome::kAnswered);
  EXPECT_EQ(e->reason, "allow allowed.test");
  EXPECT_EQ(e->upstream_rcode, 0);
  EXPECT_EQ(e->addresses, std::vector<std::string>{"192.0.2.10"});
  EXPECT_FALSE(e->cached);
  EXPECT_EQ(outcome_count(DnsOutcome::kAnswered, 2), 2u);
}

TEST_F(DnsServerTest, DeniedNameIsNxDomainAndNeverReachesUpstream) {
  start();
  auto r = ask_a("denied.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 3u);
  EXPECT_TRUE(r->answers.empty());
  auto r6 = ask_a("denied.test", dns::kTypeAaaa);
  ASSERT_TRUE(r6);
  EXPECT_EQ(r6->rcode(), 3u);
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_FALSE(server_->answered("a", "denied.test", "192.0.2.66"));
  auto e = logged("denied.test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outcome, DnsOutcome::kDenied);
  EXPECT_EQ(e->reason, "no rule for denied.test");
  EXPECT_EQ(e->upstream_rcode, -1);
  EXPECT_EQ(outcome_count(DnsOutcome::kDenied, 2), 2u);
  EXPECT_EQ(server_->metrics().upstream_queries, 0u);
}

TEST_F(DnsServerTest, OtherTypesAreRefusedWithoutAskingUpstream) {
  start();
  for (std::uint16_t type : {dns::kTypeTxt, dns::kTypeAny, dns::kTypeMx, dns::kTypeNull,
                             dns::kTypeSrv, dns::kTypeCname, dns::kTypePtr, std::uint16_t{65}}) {
    auto r = ask_a("allowed.test", type);
    ASSERT_TRUE(r) << dns::type_name(type);
    EXPECT_EQ(r->rcode(), 5u) << dns::type_name(type);
    EXPECT_TRUE(r->answers.empty());
  }
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_EQ(outcome_count(DnsOutcome::kTypeRefused, 8), 8u);
  auto e = logged("allowed.test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outcome, DnsOutcome::kTypeRefused);
  EXPECT_EQ(e->reason, "query type TXT is not served");
}

TEST_F(DnsServerTest, MalformedPacketsGetFormErrOrNothing) {
  start();
  // Too short to be a query: dropped.
  EXPECT_FALSE(exchange("127.0.0.2", port_a_, Bytes{1, 2, 3}, 300ms));
  // A response (QR=1): never answered.
  Bytes response = {0, 9, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_FALSE(exchange("127.0.0.2", port_a_, response, 300ms));
  // A header and a broken name: FORMERR with our id.
  Bytes broken = {0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 5, 'a', 'b'};
  auto reply = exchange("127.0.0.2", port_a_, broken);
  ASSERT_TRUE(reply);
  EXPECT_EQ(*reply, (Bytes{0xab, 0xcd, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0}));
  // An oversized datagram: FORMERR too.
  Bytes huge(6000, 'x');
  huge[2] = 0x01;
  huge[3] = 0x00;
  auto big = exchange("127.0.0.2", port_a_, huge);
  ASSERT_TRUE(big);
  EXPECT_EQ((*big)[3] & 0xf, 1);
  // The server still works.
  auto ok = ask_a("allowed.test");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->rcode(), 0u);
  EXPECT_EQ(upstream_->queries(), 1);
  EXPECT_EQ(outcome_count(DnsOutcome::kFormErr, 2), 2u);
  EXPECT_EQ(outcome_count(DnsOutcome::kIgnored, 2), 2u);
}

TEST_F(DnsServerTest, ExfiltrationSubdomainOfADeniedDomainNeverLeaves) {
  start();
  std::string payload = "nbswy3dpeb3w64tmmqqgc3demfxgs5dvnfzwk3dvmfzxi2lomqzsa5dpebzgk3dbmu";
  std::string name = payload.substr(0, 60) + "." + payload.substr(5, 60) + "." +
                     payload.substr(2, 60) + ".x1.evil.test";
  ASSERT_GT(name.size(), 180u);
  for (auto type : {dns::kTypeA, dns::kTypeAaaa}) {
    auto r = ask_a(name, type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->rcode(), 3u);
  }
  // The TXT form is refused before the policy is even asked.
  auto txt = ask_a(name, dns::kTypeTxt);
  ASSERT_TRUE(txt);
  EXPECT_EQ(txt->rcode(), 5u);
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_EQ(outcome_count(DnsOutcome::kDenied, 2), 2u);
  auto e = logged(name);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outcome, DnsOutcome::kDenied);
}

TEST_F(DnsServerTest, UpstreamDownGivesServFailAfterTheTimeout) {
  upstream_->set_silent(true);
  start();
  auto t0 = std::chrono::steady_clock::now();
  auto r = ask_a("allowed.test");
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 2u);
  EXPECT_GE(took, 2 * config_.upstream_timeout);  // the first try and one retry
  EXPECT_EQ(upstream_->queries(), 2);
  auto e = logged("allowed.test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outcome, DnsOutcome::kServFail);
  EXPECT_NE(e->upstream_error.find("timeout"), std::string::npos) << e->upstream_error;
  EXPECT_EQ(server_->metrics().upstream_timeouts, 2u);
  EXPECT_FALSE(server_->answered("a", "allowed.test", "192.0.2.10"));
}

TEST_F(DnsServerTest, UnreachableUpstreamFailsFast) {
  // A port nobody listens on: the kernel answers ICMP port unreachable.
  UniqueFd probe(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  ::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  probe.reset();
  config_.upstreams = {"127.0.0.1:" + std::to_string(ntohs(sa.sin_port))};
  config_.upstream_timeout = 5000ms;
  start();
  auto t0 = std::chrono::steady_clock::now();
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 2u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, config_.upstream_timeout);
  EXPECT_EQ(server_->metrics().upstream_failures, 2u);
}

TEST_F(DnsServerTest, RetryGoesToTheNextServer) {
  auto silent = TestDnsServer::start("127.0.0.1");
  ASSERT_TRUE(silent);
  (*silent)->set_silent(true);
  config_.upstreams = {(*silent)->endpoint(), upstream_->endpoint()};
  start();
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 0u);
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_EQ((*silent)->queries(), 1);
  EXPECT_EQ(upstream_->queries(), 1);
  EXPECT_EQ(server_->metrics().upstream_timeouts, 1u);
}

TEST_F(DnsServerTest, UpstreamAnswersWithTheWrongIdAreDropped) {
  upstream_->set_wrong_id(true);
  start();
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 2u);
  EXPECT_EQ(server_->metrics().upstream_mismatched, 2u);
  EXPECT_FALSE(server_->answered("a", "allowed.test", "192.0.2.10"));
}

TEST_F(DnsServerTest, UpstreamServFailIsRetriedThenPassedOn) {
  upstream_->set_rcode(2);
  start();
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 2u);
  EXPECT_EQ(upstream_->queries(), 2);
  auto e = logged("allowed.test");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->upstream_rcode, 2);
  EXPECT_EQ(e->upstream_error, "upstream answered SERVFAIL");
}

TEST_F(DnsServerTest, UpstreamNxDomainIsPassedOnAndCached) {
  start({"missing.allowed.test"});
  for (int i = 0; i < 2; ++i) {
    auto r = ask_a("missing.allowed.test");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->rcode(), 3u);
  }
  // The SOA's MINIMUM (60 s) keeps the negative answer.
  EXPECT_EQ(upstream_->queries(), 1);
  auto e = logged("missing.allowed.test", 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outcome, DnsOutcome::kUpstreamNxDomain);
  EXPECT_TRUE(e->cached);
}

TEST_F(DnsServerTest, CnameChainIsKeptAndOtherRecordsStripped) {
  // Junk the upstream adds to every answer for the name: another owner's A,
  // a TXT, an NS. Only the chain may reach the sandbox.
  upstream_->add_extra("www.allowed.test",
                       {"evil.test", dns::kTypeA, dns::kClassIn, 300, "203.0.113.9", {}});
  upstream_->add_extra("www.allowed.test",
                       {"edge.cdn.test", dns::kTypeTxt, dns::kClassIn, 300, {}, {2, 'h', 'i'}});
  upstream_->add_extra(
      "www.allowed.test",
      {"www.allowed.test", dns::kTypeNs, dns::kClassIn, 300, {}, {2, 'n', 's', 0}});
  start();
  auto r = ask_a("www.allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 0u);
  ASSERT_EQ(r->answers.size(), 2u);
  EXPECT_EQ(r->answers[0].type, dns::kTypeCname);
  EXPECT_EQ(r->answers[0].name, "www.allowed.test");
  EXPECT_EQ(r->answers[0].data, "edge.cdn.test");
  EXPECT_EQ(r->answers[0].ttl, 600u);
  EXPECT_EQ(r->answers[1].name, "edge.cdn.test");
  EXPECT_EQ(r->answers[1].data, "192.0.2.20");
  EXPECT_TRUE(r->authority.empty());
  // Remembered under the name the sandbox asked for, not the CDN's.
  EXPECT_TRUE(server_->answered("a", "www.allowed.test", "192.0.2.20"));
  EXPECT_FALSE(server_->answered("a", "edge.cdn.test", "192.0.2.20"));
  EXPECT_FALSE(server_->answered("a", "www.allowed.test", "203.0.113.9"));
  EXPECT_TRUE(server_->names_for("a", "203.0.113.9").empty());
}

TEST_F(DnsServerTest, GatewayGetsTheFixedAddress) {
  start();
  auto r = ask_a("gateway.corral.internal");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 0u);
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_EQ(r->answers[0].data, "10.211.0.1");
  EXPECT_EQ(r->answers[0].ttl, config_.fixed_answer_ttl);
  auto r6 = ask_a("gateway.corral.internal", dns::kTypeAaaa);
  ASSERT_TRUE(r6);
  EXPECT_EQ(r6->rcode(), 0u);
  EXPECT_TRUE(r6->answers.empty());
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_EQ(server_->names_for("a", "10.211.0.1"),
            std::vector<std::string>{"gateway.corral.internal"});
}

TEST_F(DnsServerTest, CachedAnswersDoNotAskUpstreamAgain) {
  start();
  ASSERT_TRUE(ask_a("allowed.test"));
  auto again = ask_a("allowed.test");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->answers.size(), 1u);
  EXPECT_EQ(again->answers[0].data, "192.0.2.10");
  EXPECT_LE(again->answers[0].ttl, 300u);
  EXPECT_GE(again->answers[0].ttl, 298u);
  EXPECT_EQ(upstream_->queries(), 1);
  EXPECT_EQ(server_->metrics().cache_hits, 1u);
  auto e = logged("allowed.test", 1);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->cached);
  EXPECT_EQ(e->outcome, DnsOutcome::kAnswered);
}

TEST_F(DnsServerTest, PolicyChangeTakesEffectForTheNextQuery) {
  start();
  auto r1 = ask_a("allowed.test");
  ASSERT_TRUE(r1);
  EXPECT_EQ(r1->rcode(), 0u);
  ASSERT_TRUE(server_->set_policy("a", allow({})));
  auto r2 = ask_a("allowed.test");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->rcode(), 3u);  // the cache does not bypass the policy
  auto r3 = ask_a("denied.test");
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->rcode(), 3u);
  ASSERT_TRUE(server_->set_policy("a", allow({"denied.test"})));
  auto r4 = ask_a("denied.test");
  ASSERT_TRUE(r4);
  EXPECT_EQ(r4->rcode(), 0u);
  ASSERT_EQ(r4->answers.size(), 1u);
  EXPECT_EQ(upstream_->queries_for("denied.test"), 1);
  auto missing = server_->set_policy("nope", allow({}));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(DnsServerTest, SandboxesDoNotSeeEachOthersAnswers) {
  start();
  auto port_b = server_->add_sandbox("b", "127.0.0.3", 0, allow({}));
  ASSERT_TRUE(port_b) << port_b.error().to_string();
  auto ra = ask_a("allowed.test");
  ASSERT_TRUE(ra);
  EXPECT_EQ(ra->rcode(), 0u);
  EXPECT_TRUE(server_->answered("a", "allowed.test", "192.0.2.10"));
  EXPECT_FALSE(server_->answered("b", "allowed.test", "192.0.2.10"));
  EXPECT_TRUE(server_->names_for("b", "192.0.2.10").empty());
  // b's own policy applies on b's address.
  auto rb = ask("127.0.0.3", *port_b, "allowed.test", dns::kTypeA);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->rcode(), 3u);
  auto e = logged("allowed.test", 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->sandbox_id, "b");
  EXPECT_EQ(e->outcome, DnsOutcome::kDenied);
  // An id is registered once.
  auto dup = server_->add_sandbox("b", "127.0.0.3", 0, allow({}));
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);
}

TEST_F(DnsServerTest, RemovingASandboxClosesItsSocket) {
  start();
  ASSERT_TRUE(ask_a("allowed.test"));
  EXPECT_TRUE(server_->remove_sandbox("a"));
  EXPECT_FALSE(server_->remove_sandbox("a"));
  EXPECT_FALSE(server_->answered("a", "allowed.test", "192.0.2.10"));
  // The address is free at once.
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port_a_);
  ::inet_pton(AF_INET, "127.0.0.2", &sa.sin_addr);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << errno;
  fd.reset();
  // And the sandbox can come back on it, with nothing remembered.
  auto again = server_->add_sandbox("a", "127.0.0.2", port_a_, allow({"allowed.test"}));
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_EQ(*again, port_a_);
  EXPECT_FALSE(server_->answered("a", "allowed.test", "192.0.2.10"));
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 0u);
  EXPECT_EQ(upstream_->queries(), 2);  // the cache went with the sandbox
}

TEST_F(DnsServerTest, RememberedAnswersExpire) {
  upstream_->add_a("short.allowed.test", "192.0.2.30", 1);
  config_.record_min_ttl = 1s;
  config_.cache_entries = 0;
  start();
  auto r = ask_a("short.allowed.test");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_TRUE(server_->answered("a", "short.allowed.test", "192.0.2.30"));
  std::this_thread::sleep_for(1100ms);
  EXPECT_FALSE(server_->answered("a", "short.allowed.test", "192.0.2.30"));
  EXPECT_TRUE(server_->names_for("a", "192.0.2.30").empty());
}

TEST_F(DnsServerTest, ZeroTtlAnswersAreRememberedForTheMinimum) {
  upstream_->add_a("zero.allowed.test", "192.0.2.31", 0);
  start();
  auto r = ask_a("zero.allowed.test");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->answers.size(), 1u);
  EXPECT_EQ(r->answers[0].ttl, 0u);
  std::this_thread::sleep_for(1100ms);
  EXPECT_TRUE(server_->answered("a", "zero.allowed.test", "192.0.2.31"));
  // TTL 0 is not cached.
  ASSERT_TRUE(ask_a("zero.allowed.test"));
  EXPECT_EQ(upstream_->queries(), 2);
}

TEST_F(DnsServerTest, RememberedNamesAreBounded) {
  config_.max_recorded_names = 4;
  for (int i = 0; i < 8; ++i) {
    upstream_->add_a("n" + std::to_string(i) + ".allowed.test",
                     "192.0.2." + std::to_string(100 + i), static_cast<std::uint32_t>(100 + i));
  }
  start();
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(ask_a("n" + std::to_string(i) + ".allowed.test"));
  int kept = 0;
  for (int i = 0; i < 8; ++i) {
    kept += server_->answered("a", "n" + std::to_string(i) + ".allowed.test",
                              "192.0.2." + std::to_string(100 + i));
  }
  EXPECT_EQ(kept, 4);
  EXPECT_TRUE(server_->answered("a", "n7.allowed.test", "192.0.2.107"));
}

TEST_F(DnsServerTest, PolicyMaySayRefused) {
  start();
  ASSERT_TRUE(server_->set_policy("a", [](const DnsQuestionContext&) {
    return DnsVerdict{DnsAction::kRefused, "network mode none", std::nullopt};
  }));
  auto r = ask_a("allowed.test");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rcode(), 5u);
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_EQ(outcome_count(DnsOutcome::kRefused, 1), 1u);
}

TEST_F(DnsServerTest, DatagramsFromAnotherSourceAreDropped) {
  start();
  auto port_c = server_->add_sandbox("c", "127.0.0.4", 0, allow({"allowed.test"}), "127.0.0.5");
  ASSERT_TRUE(port_c) << port_c.error().to_string();
  // From 127.0.0.1: not the sandbox, no answer, nothing asked upstream.
  EXPECT_FALSE(ask("127.0.0.4", *port_c, "allowed.test", dns::kTypeA, 300ms));
  EXPECT_EQ(upstream_->queries(), 0);
  EXPECT_EQ(outcome_count(DnsOutcome::kIgnored, 1), 1u);
  // From the sandbox's address: answered.
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.5", &from.sin_addr);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(*port_c);
  ::inet_pton(AF_INET, "127.0.0.4", &to.sin_addr);
  auto q = dns::build_query(77, "allowed.test", dns::kTypeA);
  ASSERT_TRUE(q);
  ASSERT_GT(
      ::sendto(fd.get(), q->data(), q->size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  pollfd p{fd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 3000), 1);
  std::uint8_t buf[512];
  ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  auto r = dns::parse_response({buf, static_cast<std::size_t>(n)});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, 77);
  EXPECT_EQ(r->rcode(), 0u);
  EXPECT_TRUE(server_->answered("c", "allowed.test", "192.0.2.10"));
  EXPECT_FALSE(server_->add_sandbox("d", "127.0.0.4", 0, allow({}), "not-an-address"));
}

TEST(DnsServerConfigTest, RefusesBadUpstreams) {
  for (const char* bad :
       {"", "example.com", "1.2.3.4:0", "1.2.3.4:99999", "[::1", "[::1]x", "1.2.3:53"}) {
    DnsServerConfig c;
    c.upstreams = {bad};
    auto s = DnsServer::start(c);
    EXPECT_FALSE(s) << bad;
  }
  DnsServerConfig good;
  good.upstreams = {"127.0.0.1", "127.0.0.1:5353", "[::1]:53", "::1"};
  auto s = DnsServer::start(good);
  ASSERT_TRUE(s) << s.error().to_string();
  auto bad_bind = (*s)->add_sandbox("x", "not-an-ip", 0, {});
  EXPECT_FALSE(bad_bind);
}

}  // namespace
}  // namespace corral::net
