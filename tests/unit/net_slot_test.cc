// The address plan of network slots (net/net_slot.h): pool parsing and
// validation, and the /30 arithmetic of slot n. Taking and re-taking
// slots (lock files) is in tests/integration/net_link_test.cc.
#include "netns/net_slot.h"

#include <gtest/gtest.h>

#include <string>

namespace corral::net {
namespace {

TEST(net_slot, DefaultPool) {
  NetSlotPool pool;
  EXPECT_TRUE(pool.validate());
  EXPECT_EQ(pool.cidr(), "10.211.0.0/16");
  EXPECT_EQ(pool.if_prefix, "crl");
  EXPECT_EQ(pool.slot_count(), 16384u);
  auto parsed = NetSlotPool::make("10.211.0.0/16");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->subnet, pool.subnet);
  EXPECT_EQ(parsed->prefix_len, pool.prefix_len);
}

TEST(net_slot, SlotArithmetic) {
  NetSlotPool pool;
  pool.lock_dir = "/somewhere";
  auto s0 = NetSlot::at(pool, 0);
  ASSERT_TRUE(s0) << s0.error().to_string();
  EXPECT_EQ(s0->host_cidr(), "10.211.0.1/30");
  EXPECT_EQ(s0->sandbox_cidr(), "10.211.0.2/30");
  EXPECT_EQ(s0->host_ifname(), "crl0");
  EXPECT_EQ(s0->sandbox_ifname(), "eth0");
  EXPECT_EQ(s0->lock_path(), "/somewhere/crl0");
  EXPECT_FALSE(s0->holds_lock());
  EXPECT_EQ(s0->lock_fd(), -1);

  auto s5 = NetSlot::at(pool, 5);
  ASSERT_TRUE(s5);
  EXPECT_EQ(s5->network(), 0x0ad30014u);  // 10.211.0.20
  EXPECT_EQ(s5->host_address(), 0x0ad30015u);
  EXPECT_EQ(s5->sandbox_address(), 0x0ad30016u);
  EXPECT_EQ(s5->host_cidr(), "10.211.0.21/30");
  EXPECT_EQ(s5->host_ifname(), "crl5");

  auto s64 = NetSlot::at(pool, 64);  // crosses into the next /24
  ASSERT_TRUE(s64);
  EXPECT_EQ(s64->host_cidr(), "10.211.1.1/30");
  EXPECT_EQ(s64->sandbox_cidr(), "10.211.1.2/30");

  auto last = NetSlot::at(pool, 16383);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->host_cidr(), "10.211.255.253/30");
  EXPECT_EQ(last->sandbox_cidr(), "10.211.255.254/30");
  EXPECT_EQ(last->host_ifname(), "crl16383");

  auto outside = NetSlot::at(pool, 16384);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(outside.error().message.find("outside pool 10.211.0.0/16"), std::string::npos)
      << outside.error().message;
}

TEST(net_slot, OtherPools) {
  auto small = NetSlotPool::make("192.168.7.0/28", "tst", "/x");
  ASSERT_TRUE(small) << small.error().to_string();
  EXPECT_EQ(small->slot_count(), 4u);
  auto s3 = NetSlot::at(*small, 3);
  ASSERT_TRUE(s3);
  EXPECT_EQ(s3->host_cidr(), "192.168.7.13/30");
  EXPECT_EQ(s3->sandbox_cidr(), "192.168.7.14/30");
  EXPECT_EQ(s3->host_ifname(), "tst3");
  EXPECT_EQ(s3->lock_path(), "/x/tst3");
  EXPECT_FALSE(NetSlot::at(*small, 4));

  auto one = NetSlotPool::make("10.9.8.4/30", "one");
  ASSERT_TRUE(one) << one.error().to_string();
  EXPECT_EQ(one->slot_count(), 1u);

  auto big = NetSlotPool::make("10.0.0.0/8", "crlabcde");  // 8 + 7 digits = 15
  ASSERT_TRUE(big) << big.error().to_string();
  EXPECT_EQ(big->slot_count(), 4194304u);
  auto biggest = NetSlot::at(*big, 4194303);
  ASSERT_TRUE(biggest);
  EXPECT_EQ(biggest->host_ifname(), "crlabcde4194303");
  EXPECT_EQ(biggest->sandbox_cidr(), "10.255.255.254/30");
}

TEST(net_slot, InvalidPools) {
  struct Case {
    const char* cidr;
    const char* prefix;
    const char* says;
  };
  for (const Case& c : {
           Case{"10.211.0.0", "crl", "expected ADDRESS/PREFIX"},
           Case{"10.211.0/16", "crl", "is not an IPv4 address"},
           Case{"fd00::/64", "crl", "is not an IPv4 address"},
           Case{"10.211.0.0/", "crl", "is not a prefix length"},
           Case{"10.211.0.0/16x", "crl", "is not a prefix length"},
           Case{"10.211.0.0/31", "crl", "between 8 and 30"},
           Case{"10.0.0.0/7", "crl", "between 8 and 30"},
           Case{"10.211.0.1/16", "crl", "host bits are set"},
           Case{"10.211.0.0/16", "", "must start with a-z"},
           Case{"10.211.0.0/16", "1x", "must start with a-z"},
           Case{"10.211.0.0/16", "c/x", "may only contain"},
           Case{"10.211.0.0/16", "CRL", "must start with a-z"},
           Case{"10.211.0.0/16", "abcdefghijk", "too long"},  // 11 + 5 digits
           Case{"10.0.0.0/8", "crlabcdef", "too long"},       // 9 + 7 digits
       }) {
    auto pool = NetSlotPool::make(c.cidr, c.prefix);
    ASSERT_FALSE(pool) << c.cidr << " " << c.prefix;
    EXPECT_EQ(pool.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(pool.error().message.find(c.says), std::string::npos)
        << c.cidr << " " << c.prefix << ": " << pool.error().message;
  }
  // The longest prefix that fits a /16: 10 + 5 digits.
  EXPECT_TRUE(NetSlotPool::make("10.211.0.0/16", "abcdefghij"));
}

}  // namespace
}  // namespace corral::net
