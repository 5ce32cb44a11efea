// The DNS server's per-sandbox memory, in process: the answers it handed
// out, for the proxy (src/egress/dns_records.h), and its answer cache
// (src/egress/dns_cache.h). The server itself is tested against real
// sockets in tests/integration/dns_server_test.cc.
#include "egress/dns_records.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "egress/dns_cache.h"

namespace corral::net {
namespace {

using std::chrono::seconds;

TEST(DnsRecords, CanonicalAddressIsOneFormPerAddress) {
  EXPECT_EQ(canonical_address("::ffff:1.2.3.4"), "1.2.3.4");
  EXPECT_EQ(canonical_address("1.2.3.4"), "1.2.3.4");
  EXPECT_EQ(canonical_address("2001:DB8::1"), "2001:db8::1");
  EXPECT_EQ(canonical_address("example.com"), "");
  EXPECT_EQ(canonical_address(""), "");
}

TEST(DnsRecords, AnsweredAndNamesForAnyCaseAndForm) {
  DnsRecords records;
  records.remember("api.example.com", {"1.2.3.4", "2001:DB8::1"}, 60);
  records.remember("cdn.example.com", {"1.2.3.4"}, 60);
  EXPECT_TRUE(records.answered("API.Example.com.", "::ffff:1.2.3.4"));
  EXPECT_TRUE(records.answered("api.example.com", "2001:db8::1"));
  EXPECT_FALSE(records.answered("api.example.com", "5.6.7.8"));
  EXPECT_FALSE(records.answered("other.example.com", "1.2.3.4"));
  EXPECT_FALSE(records.answered("api.example.com", "not an address"));
  EXPECT_EQ(records.names_for("1.2.3.4"),
            (std::vector<std::string>{"api.example.com", "cdn.example.com"}));
  EXPECT_TRUE(records.names_for("5.6.7.8").empty());
  EXPECT_TRUE(records.names_for("").empty());
}

TEST(DnsRecords, TtlZeroStillLastsTheMinimum) {
  DnsRecords records(DnsRecordLimits{seconds(30), seconds(3600), 16});
  records.remember("example.com", {"1.2.3.4"}, 0);
  EXPECT_TRUE(records.answered("example.com", "1.2.3.4"));
}

TEST(DnsRecords, BoundedByNameTheFirstToExpireGoes) {
  DnsRecords records(DnsRecordLimits{seconds(30), seconds(3600), 2});
  records.remember("short.example", {"10.0.0.1"}, 60);
  records.remember("long.example", {"10.0.0.2"}, 600);
  records.remember("new.example", {"10.0.0.3"}, 300);
  EXPECT_FALSE(records.answered("short.example", "10.0.0.1"));
  EXPECT_TRUE(records.names_for("10.0.0.1").empty());
  EXPECT_TRUE(records.answered("long.example", "10.0.0.2"));
  EXPECT_TRUE(records.answered("new.example", "10.0.0.3"));
}

TEST(DnsRecords, NoLimitNoRecords) {
  DnsRecords records(DnsRecordLimits{seconds(30), seconds(3600), 0});
  records.remember("example.com", {"1.2.3.4"}, 60);
  EXPECT_FALSE(records.answered("example.com", "1.2.3.4"));
}

dns::Question question(const std::string& name, std::uint16_t type = dns::kTypeA) {
  return dns::Question{name, type, dns::kClassIn};
}

DnsCache::Entry entry(std::uint32_t ttl, const std::string& address) {
  DnsCache::Entry e;
  e.stored = DnsCache::Clock::now();
  e.ttl = ttl;
  e.records.push_back(dns::Record{"example.com", dns::kTypeA, dns::kClassIn, ttl, address, {}});
  return e;
}

TEST(DnsCache, KeptByTypeAndName) {
  DnsCache cache(8);
  cache.put(question("example.com"), entry(60, "1.2.3.4"));
  auto hit = cache.get(question("example.com"));
  ASSERT_TRUE(hit);
  ASSERT_EQ(hit->records.size(), 1u);
  EXPECT_EQ(hit->records[0].data, "1.2.3.4");
  EXPECT_LE(hit->ttl, 60u);
  EXPECT_FALSE(cache.get(question("example.com", dns::kTypeAaaa)));
  EXPECT_FALSE(cache.get(question("other.com")));
  cache.clear();
  EXPECT_FALSE(cache.get(question("example.com")));
}

TEST(DnsCache, TtlZeroAndSizeZeroKeepNothing) {
  DnsCache cache(8);
  cache.put(question("example.com"), entry(0, "1.2.3.4"));
  EXPECT_FALSE(cache.get(question("example.com")));
  DnsCache off(0);
  off.put(question("example.com"), entry(60, "1.2.3.4"));
  EXPECT_FALSE(off.get(question("example.com")));
}

TEST(DnsCache, BoundedByEntries) {
  DnsCache cache(2);
  cache.put(question("a.example"), entry(60, "10.0.0.1"));
  cache.put(question("b.example"), entry(60, "10.0.0.2"));
  cache.put(question("c.example"), entry(60, "10.0.0.3"));
  int kept = 0;
  for (const char* name : {"a.example", "b.example", "c.example"})
    kept += cache.get(question(name)) ? 1 : 0;
  EXPECT_EQ(kept, 2);
  EXPECT_TRUE(cache.get(question("c.example")));
}

}  // namespace
}  // namespace corral::net
