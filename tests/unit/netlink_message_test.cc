// The rtnetlink requests of net/netlink.h, built without a kernel and read
// back attribute by attribute, and the parsing of the kernel's acks
// (errno, extended ack message, capped or not).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "netns/netlink.h"

namespace corral::net::netlink {
namespace {

struct Attr {
  std::uint16_t type;
  std::vector<std::uint8_t> payload;
  std::string str() const {
    // Without the terminating NUL, which must be there.
    if (payload.empty() || payload.back() != 0) return "<not NUL-terminated>";
    return std::string(payload.begin(), payload.end() - 1);
  }
  std::uint32_t u32() const {
    std::uint32_t v = 0;
    if (payload.size() == 4) std::memcpy(&v, payload.data(), 4);
    return v;
  }
};

std::vector<Attr> attrs_of(const std::uint8_t* p, std::size_t len) {
  std::vector<Attr> out;
  bool well_formed =
      for_each_attr(p, len, [&](std::uint16_t t, const std::uint8_t* d, std::size_t n) {
        out.push_back({t, std::vector<std::uint8_t>(d, d + n)});
      });
  EXPECT_TRUE(well_formed);
  return out;
}

const Attr* find(const std::vector<Attr>& attrs, std::uint16_t type) {
  for (const Attr& a : attrs)
    if (a.type == type) return &a;
  return nullptr;
}

// The header of m, checked for the invariants every request has.
nlmsghdr header_of(const Message& m) {
  nlmsghdr h;
  std::memcpy(&h, m.data(), sizeof h);
  EXPECT_EQ(h.nlmsg_len, m.size());
  EXPECT_EQ(m.size() % 4, 0u);
  EXPECT_NE(h.nlmsg_flags & NLM_F_REQUEST, 0);
  return h;
}

template <typename T>
T family_header_of(const Message& m) {
  T t;
  EXPECT_GE(m.size(), sizeof(nlmsghdr) + sizeof t);
  std::memcpy(&t, m.data() + sizeof(nlmsghdr), sizeof t);
  return t;
}

template <typename T>
std::vector<Attr> attrs_after(const Message& m) {
  std::size_t off = sizeof(nlmsghdr) + NLMSG_ALIGN(sizeof(T));
  return attrs_of(m.data() + off, m.size() - off);
}

TEST(netlink_message, VethCreateRequestPutsThePeerInTheNamespace) {
  Message m = veth_create_request("crl5", "eth0", 7);
  nlmsghdr h = header_of(m);
  EXPECT_EQ(h.nlmsg_type, RTM_NEWLINK);
  EXPECT_EQ(h.nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  auto ifi = family_header_of<ifinfomsg>(m);
  EXPECT_EQ(ifi.ifi_family, AF_UNSPEC);
  EXPECT_EQ(ifi.ifi_index, 0);

  auto top = attrs_after<ifinfomsg>(m);
  ASSERT_NE(find(top, IFLA_IFNAME), nullptr);
  EXPECT_EQ(find(top, IFLA_IFNAME)->str(), "crl5");
  EXPECT_EQ(find(top, IFLA_NET_NS_FD), nullptr) << "the host end must stay here";
  // One queue each way (no shrinking, which waits for an RCU grace period).
  ASSERT_NE(find(top, IFLA_NUM_TX_QUEUES), nullptr);
  EXPECT_EQ(find(top, IFLA_NUM_TX_QUEUES)->u32(), 1u);
  ASSERT_NE(find(top, IFLA_NUM_RX_QUEUES), nullptr);
  EXPECT_EQ(find(top, IFLA_NUM_RX_QUEUES)->u32(), 1u);
  const Attr* linkinfo = find(top, IFLA_LINKINFO);
  ASSERT_NE(linkinfo, nullptr);
  auto info = attrs_of(linkinfo->payload.data(), linkinfo->payload.size());
  ASSERT_NE(find(info, IFLA_INFO_KIND), nullptr);
  EXPECT_EQ(find(info, IFLA_INFO_KIND)->str(), "veth");
  const Attr* data = find(info, IFLA_INFO_DATA);
  ASSERT_NE(data, nullptr);
  auto veth = attrs_of(data->payload.data(), data->payload.size());
  const Attr* peer = find(veth, VETH_INFO_PEER);
  ASSERT_NE(peer, nullptr);
  // The peer: its own ifinfomsg, then its attributes.
  ASSERT_GE(peer->payload.size(), sizeof(ifinfomsg));
  ifinfomsg peer_ifi;
  std::memcpy(&peer_ifi, peer->payload.data(), sizeof peer_ifi);
  EXPECT_EQ(peer_ifi.ifi_index, 0);
  auto peer_attrs = attrs_of(peer->payload.data() + NLMSG_ALIGN(sizeof(ifinfomsg)),
                             peer->payload.size() - NLMSG_ALIGN(sizeof(ifinfomsg)));
  ASSERT_NE(find(peer_attrs, IFLA_IFNAME), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_IFNAME)->str(), "eth0");
  ASSERT_NE(find(peer_attrs, IFLA_NET_NS_FD), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_NET_NS_FD)->u32(), 7u);
  ASSERT_NE(find(peer_attrs, IFLA_NUM_TX_QUEUES), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_NUM_TX_QUEUES)->u32(), 1u);
  ASSERT_NE(find(peer_attrs, IFLA_NUM_RX_QUEUES), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_NUM_RX_QUEUES)->u32(), 1u);
  // No MTU asked for: none sent (the kernel's default).
  EXPECT_EQ(find(top, IFLA_MTU), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_MTU), nullptr);
}

TEST(netlink_message, VethCreateRequestSetsTheMtuOfBothEnds) {
  Message m = veth_create_request("crl5", "eth0", 7, 65535);
  auto top = attrs_after<ifinfomsg>(m);
  ASSERT_NE(find(top, IFLA_MTU), nullptr);
  EXPECT_EQ(find(top, IFLA_MTU)->u32(), 65535u);
  const Attr* linkinfo = find(top, IFLA_LINKINFO);
  ASSERT_NE(linkinfo, nullptr);
  auto info = attrs_of(linkinfo->payload.data(), linkinfo->payload.size());
  const Attr* data = find(info, IFLA_INFO_DATA);
  ASSERT_NE(data, nullptr);
  auto veth = attrs_of(data->payload.data(), data->payload.size());
  const Attr* peer = find(veth, VETH_INFO_PEER);
  ASSERT_NE(peer, nullptr);
  auto peer_attrs = attrs_of(peer->payload.data() + NLMSG_ALIGN(sizeof(ifinfomsg)),
                             peer->payload.size() - NLMSG_ALIGN(sizeof(ifinfomsg)));
  ASSERT_NE(find(peer_attrs, IFLA_MTU), nullptr);
  EXPECT_EQ(find(peer_attrs, IFLA_MTU)->u32(), 65535u);
}

TEST(netlink_message, LinkSetMtuRequestNamesTheLinkAndTheMtu) {
  Message m = link_set_mtu_request(12, 1500);
  nlmsghdr h = header_of(m);
  EXPECT_EQ(h.nlmsg_type, RTM_NEWLINK);
  EXPECT_EQ(h.nlmsg_flags, NLM_F_REQUEST);
  auto ifi = family_header_of<ifinfomsg>(m);
  EXPECT_EQ(ifi.ifi_index, 12);
  EXPECT_EQ(ifi.ifi_change, 0u) << "flags must stay as they are";
  auto top = attrs_after<ifinfomsg>(m);
  ASSERT_NE(find(top, IFLA_MTU), nullptr);
  EXPECT_EQ(find(top, IFLA_MTU)->u32(), 1500u);
}

TEST(netlink_message, NestsCarryTheNestedFlagAndExactLengths) {
  Message m = veth_create_request("a", "b", 3);
  // Walk the raw bytes: IFLA_LINKINFO's header has NLA_F_NESTED and a
  // length that ends exactly at the end of the message (it is last).
  std::size_t off = sizeof(nlmsghdr) + NLMSG_ALIGN(sizeof(ifinfomsg));
  bool seen = false;
  while (off + sizeof(nlattr) <= m.size()) {
    nlattr a;
    std::memcpy(&a, m.data() + off, sizeof a);
    ASSERT_GE(a.nla_len, sizeof a);
    if ((a.nla_type & NLA_TYPE_MASK) == IFLA_LINKINFO) {
      EXPECT_NE(a.nla_type & NLA_F_NESTED, 0);
      EXPECT_EQ(off + a.nla_len, m.size());
      seen = true;
    }
    off += NLA_ALIGN(a.nla_len);
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(off, m.size());
}

TEST(netlink_message, AddressRequest) {
  Message m = ipv4_address_add_request(12, 0x0ad30015, 30);  // 10.211.0.21/30
  nlmsghdr h = header_of(m);
  EXPECT_EQ(h.nlmsg_type, RTM_NEWADDR);
  EXPECT_EQ(h.nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  auto ifa = family_header_of<ifaddrmsg>(m);
  EXPECT_EQ(ifa.ifa_family, AF_INET);
  EXPECT_EQ(ifa.ifa_prefixlen, 30);
  EXPECT_EQ(ifa.ifa_index, 12u);
  auto attrs = attrs_after<ifaddrmsg>(m);
  for (std::uint16_t type : {IFA_LOCAL, IFA_ADDRESS}) {
    const Attr* a = find(attrs, type);
    ASSERT_NE(a, nullptr) << type;
    ASSERT_EQ(a->payload.size(), 4u);
    char text[INET_ADDRSTRLEN];
    ASSERT_NE(inet_ntop(AF_INET, a->payload.data(), text, sizeof text), nullptr);
    EXPECT_STREQ(text, "10.211.0.21");  // network byte order on the wire
  }
}

TEST(netlink_message, DefaultRouteRequest) {
  Message m = ipv4_default_route_request(4, 0x0ad30015);
  nlmsghdr h = header_of(m);
  EXPECT_EQ(h.nlmsg_type, RTM_NEWROUTE);
  EXPECT_EQ(h.nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  auto rt = family_header_of<rtmsg>(m);
  EXPECT_EQ(rt.rtm_family, AF_INET);
  EXPECT_EQ(rt.rtm_dst_len, 0);
  EXPECT_EQ(rt.rtm_table, RT_TABLE_MAIN);
  EXPECT_EQ(rt.rtm_type, RTN_UNICAST);
  EXPECT_EQ(rt.rtm_scope, RT_SCOPE_UNIVERSE);
  auto attrs = attrs_after<rtmsg>(m);
  ASSERT_NE(find(attrs, RTA_GATEWAY), nullptr);
  EXPECT_EQ(ntohl(find(attrs, RTA_GATEWAY)->u32()), 0x0ad30015u);
  ASSERT_NE(find(attrs, RTA_OIF), nullptr);
  EXPECT_EQ(find(attrs, RTA_OIF)->u32(), 4u);
  EXPECT_EQ(find(attrs, RTA_DST), nullptr);
}

TEST(netlink_message, LinkRequests) {
  Message up = link_set_up_request(9, true);
  EXPECT_EQ(header_of(up).nlmsg_type, RTM_NEWLINK);
  EXPECT_EQ(header_of(up).nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL), 0)
      << "changing a link must never create one";
  auto ifi = family_header_of<ifinfomsg>(up);
  EXPECT_EQ(ifi.ifi_index, 9);
  EXPECT_EQ(ifi.ifi_flags, static_cast<unsigned>(IFF_UP));
  EXPECT_EQ(ifi.ifi_change, static_cast<unsigned>(IFF_UP));
  EXPECT_EQ(family_header_of<ifinfomsg>(link_set_up_request(9, false)).ifi_flags, 0u);

  Message del = link_delete_request("crl7");
  EXPECT_EQ(header_of(del).nlmsg_type, RTM_DELLINK);
  auto del_attrs = attrs_after<ifinfomsg>(del);
  ASSERT_NE(find(del_attrs, IFLA_IFNAME), nullptr);
  EXPECT_EQ(find(del_attrs, IFLA_IFNAME)->str(), "crl7");

  Message get = link_get_request("eth0");
  EXPECT_EQ(header_of(get).nlmsg_type, RTM_GETLINK);
  EXPECT_EQ(header_of(get).nlmsg_flags & NLM_F_DUMP, 0);
  auto get_attrs = attrs_after<ifinfomsg>(get);
  ASSERT_NE(find(get_attrs, IFLA_EXT_MASK), nullptr);
  EXPECT_EQ(find(get_attrs, IFLA_EXT_MASK)->u32(),
            static_cast<std::uint32_t>(RTEXT_FILTER_SKIP_STATS));

  EXPECT_EQ(header_of(ipv4_address_dump_request()).nlmsg_flags & NLM_F_DUMP, NLM_F_DUMP);
  EXPECT_EQ(header_of(ipv4_route_dump_request()).nlmsg_flags & NLM_F_DUMP, NLM_F_DUMP);
}

TEST(netlink_message, SequenceAndFlagsArePatchedInPlace) {
  Message m = link_get_request("lo");
  m.set_seq(0xdeadbeef);
  m.add_flags(NLM_F_ACK);
  nlmsghdr h = header_of(m);
  EXPECT_EQ(h.nlmsg_seq, 0xdeadbeefu);
  EXPECT_EQ(m.seq(), 0xdeadbeefu);
  EXPECT_NE(h.nlmsg_flags & NLM_F_ACK, 0);
  EXPECT_EQ(m.type(), RTM_GETLINK);
}

TEST(netlink_message, ForEachAttrStopsAtMalformedAttributes) {
  // nla_len 3 (< header), then nla_len beyond the buffer.
  std::uint8_t too_short[4] = {3, 0, 1, 0};
  EXPECT_FALSE(for_each_attr(too_short, sizeof too_short, [](auto, auto, auto) {}));
  std::uint8_t too_long[8] = {12, 0, 1, 0, 'a', 'b', 'c', 0};
  EXPECT_FALSE(for_each_attr(too_long, sizeof too_long, [](auto, auto, auto) {}));
  std::uint8_t truncated_header[2] = {4, 0};
  EXPECT_FALSE(for_each_attr(truncated_header, sizeof truncated_header, [](auto, auto, auto) {}));
  int n = 0;
  std::uint8_t fine[8] = {5, 0, 1, 0, 'x', 0, 0, 0};
  EXPECT_TRUE(for_each_attr(fine, sizeof fine,
                            [&](std::uint16_t t, const std::uint8_t* p, std::size_t len) {
                              ++n;
                              EXPECT_EQ(t, 1);
                              EXPECT_EQ(len, 1u);
                              EXPECT_EQ(p[0], 'x');
                            }));
  EXPECT_EQ(n, 1);
}

// An NLMSG_ERROR as the kernel writes it: nlmsgerr (with the request's
// header), the rest of the request unless capped, then the TLVs.
std::vector<std::uint8_t> error_message(int err, bool capped, const std::string& text,
                                        std::size_t request_payload = 0) {
  std::vector<std::uint8_t> buf(sizeof(nlmsghdr) + sizeof(nlmsgerr), 0);
  nlmsgerr e{};
  e.error = -err;
  e.msg.nlmsg_len = static_cast<std::uint32_t>(sizeof(nlmsghdr) + request_payload);
  e.msg.nlmsg_type = RTM_NEWLINK;
  std::memcpy(buf.data() + sizeof(nlmsghdr), &e, sizeof e);
  if (!capped) buf.resize(buf.size() + NLMSG_ALIGN(request_payload), 0xab);
  std::uint16_t flags = capped ? NLM_F_CAPPED : 0;
  if (!text.empty()) {
    flags |= NLM_F_ACK_TLVS;
    nlattr a{};
    a.nla_type = NLMSGERR_ATTR_MSG;
    a.nla_len = static_cast<std::uint16_t>(sizeof a + text.size() + 1);
    std::size_t at = buf.size();
    buf.resize(at + NLA_ALIGN(a.nla_len), 0);
    std::memcpy(buf.data() + at, &a, sizeof a);
    std::memcpy(buf.data() + at + sizeof a, text.c_str(), text.size() + 1);
    nlattr o{};
    o.nla_type = NLMSGERR_ATTR_OFFS;
    o.nla_len = sizeof o + 4;
    std::uint32_t off = 20;
    at = buf.size();
    buf.resize(at + 8, 0);
    std::memcpy(buf.data() + at, &o, sizeof o);
    std::memcpy(buf.data() + at + sizeof o, &off, 4);
  }
  nlmsghdr h{};
  h.nlmsg_len = static_cast<std::uint32_t>(buf.size());
  h.nlmsg_type = NLMSG_ERROR;
  h.nlmsg_flags = flags;
  std::memcpy(buf.data(), &h, sizeof h);
  return buf;
}

TEST(netlink_message, ParseAckReadsErrnoAndExtendedAck) {
  for (bool capped : {true, false}) {
    auto buf = error_message(EEXIST, capped, "Nexthop has invalid gateway", 36);
    Ack ack;
    ASSERT_TRUE(parse_ack(reinterpret_cast<const nlmsghdr*>(buf.data()), &ack)) << capped;
    EXPECT_EQ(ack.error, EEXIST);
    EXPECT_EQ(ack.message, "Nexthop has invalid gateway") << "capped=" << capped;
    EXPECT_EQ(ack.bad_attr_offset, 20u);
  }
  auto plain = error_message(0, true, "");
  Ack ok_ack;
  ASSERT_TRUE(parse_ack(reinterpret_cast<const nlmsghdr*>(plain.data()), &ok_ack));
  EXPECT_EQ(ok_ack.error, 0);
  EXPECT_TRUE(ok_ack.message.empty());

  auto cut = error_message(EINVAL, true, "x");
  nlmsghdr h;
  std::memcpy(&h, cut.data(), sizeof h);
  h.nlmsg_len = sizeof(nlmsghdr) + 4;  // shorter than an nlmsgerr
  std::memcpy(cut.data(), &h, sizeof h);
  Ack bad;
  EXPECT_FALSE(parse_ack(reinterpret_cast<const nlmsghdr*>(cut.data()), &bad));
}

TEST(netlink_message, InterfaceNames) {
  EXPECT_TRUE(check_ifname("crl16383"));
  EXPECT_TRUE(check_ifname("eth0"));
  EXPECT_TRUE(check_ifname("abcdefghijklmno"));  // 15
  for (const char* bad : {"", "abcdefghijklmnop", ".", "..", "a/b", "a:b", "a b", "a\nb"}) {
    auto st = check_ifname(bad);
    ASSERT_FALSE(st) << bad;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace corral::net::netlink
