// The proxy's resolver (src/egress/upstream_resolver.h) against a real DNS
// server on loopback: answers are kept for their TTL, capped at max_ttl,
// and what has no TTL to keep (TTL 0, NXDOMAIN) is asked every time.
#include "egress/upstream_resolver.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/test_dns_server.h"

namespace corral::testing {
namespace {

using namespace std::chrono_literals;
using net::IpAddress;
using net::ResolverCacheOptions;
using net::UpstreamResolver;

std::unique_ptr<TestDnsServer> start_server() {
  auto s = TestDnsServer::start("127.0.0.1");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return s ? std::move(*s) : nullptr;
}

std::vector<std::string> strings(const std::vector<IpAddress>& v) {
  std::vector<std::string> out;
  for (const auto& a : v) out.push_back(a.str());
  return out;
}

TEST(UpstreamResolver, AnAnswerIsKeptForItsTtl) {
  auto dns = start_server();
  ASSERT_TRUE(dns);
  dns->add_a("kept.test", "10.1.2.3", 300);
  dns->add_aaaa("kept.test", "fd00::7", 300);
  UpstreamResolver r({dns->endpoint()});
  auto first = r.resolve("kept.test", 2s);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(strings(*first), (std::vector<std::string>{"10.1.2.3", "fd00::7"}));
  EXPECT_EQ(dns->queries_for("kept.test"), 2) << "one A and one AAAA question";
  auto second = r.resolve("kept.test", 2s);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(strings(*second), strings(*first));
  EXPECT_EQ(dns->queries_for("kept.test"), 2) << "the second resolve asked upstream again";
  EXPECT_EQ(r.cache_hits(), 1u);
}

TEST(UpstreamResolver, ZeroTtlAndNxdomainAreAskedEveryTime) {
  auto dns = start_server();
  ASSERT_TRUE(dns);
  dns->add_a("fleeting.test", "10.1.2.4", 0);
  UpstreamResolver r({dns->endpoint()});
  for (int i = 0; i < 2; ++i) {
    auto got = r.resolve("fleeting.test", 2s);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    EXPECT_EQ(strings(*got), (std::vector<std::string>{"10.1.2.4"}));
    auto none = r.resolve("missing.test", 2s);
    ASSERT_TRUE(none.has_value()) << none.error().message;
    EXPECT_TRUE(none->empty());
  }
  EXPECT_EQ(dns->queries_for("fleeting.test"), 4);
  EXPECT_EQ(dns->queries_for("missing.test"), 4);
  EXPECT_EQ(r.cache_hits(), 0u);
}

TEST(UpstreamResolver, AnExpiredAnswerIsAskedAgainAndMaxTtlCapsTheTime) {
  auto dns = start_server();
  ASSERT_TRUE(dns);
  dns->add_a("short.test", "10.1.2.5", 1);
  dns->add_a("long.test", "10.1.2.6", 3600);
  UpstreamResolver r({dns->endpoint()}, ResolverCacheOptions{64, std::chrono::seconds(1)});
  ASSERT_TRUE(r.resolve("short.test", 2s).has_value());
  ASSERT_TRUE(r.resolve("long.test", 2s).has_value());
  ASSERT_TRUE(r.resolve("long.test", 2s).has_value());
  EXPECT_EQ(dns->queries_for("long.test"), 2) << "kept while young";
  std::this_thread::sleep_for(1100ms);
  ASSERT_TRUE(r.resolve("short.test", 2s).has_value());
  ASSERT_TRUE(r.resolve("long.test", 2s).has_value());
  EXPECT_EQ(dns->queries_for("short.test"), 4) << "kept past its TTL";
  EXPECT_EQ(dns->queries_for("long.test"), 4) << "kept past max_ttl";
}

TEST(UpstreamResolver, ASilentServerIsAnErrorAndTheNextServerAnswers) {
  auto silent = start_server();
  auto good = start_server();
  ASSERT_TRUE(silent && good);
  silent->set_silent(true);
  good->add_a("both.test", "10.1.2.7", 300);
  UpstreamResolver only_silent({silent->endpoint()});
  auto err = only_silent.resolve("both.test", 300ms);
  ASSERT_FALSE(err.has_value());
  EXPECT_NE(err.error().message.find("did not answer"), std::string::npos) << err.error().message;
  UpstreamResolver r({silent->endpoint(), good->endpoint()});
  auto got = r.resolve("both.test", 600ms);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(strings(*got), (std::vector<std::string>{"10.1.2.7"}));
}

TEST(UpstreamResolver, NoCacheWhenDisabled) {
  auto dns = start_server();
  ASSERT_TRUE(dns);
  dns->add_a("plain.test", "10.1.2.8", 300);
  UpstreamResolver r({dns->endpoint()}, ResolverCacheOptions{0, std::chrono::seconds(300)});
  ASSERT_TRUE(r.resolve("plain.test", 2s).has_value());
  ASSERT_TRUE(r.resolve("plain.test", 2s).has_value());
  EXPECT_EQ(dns->queries_for("plain.test"), 4);
}

}  // namespace
}  // namespace corral::testing
