// A small rtnetlink client (NETLINK_ROUTE), spoken directly: no libmnl and
// no `ip` process. It does what the per-sandbox plumbing of ADR 0005 needs:
// create a veth pair whose peer is born inside another network namespace,
// give an interface an IPv4 address, set it up, add a default route, delete
// a link, ask whether a link exists, and turn IPv6 off on an interface.
//
// Requests are built as values first (`Message`, the *_request functions,
// unit-tested without a kernel), then sent on a `Socket`, which waits for
// the kernel's acknowledgement and turns an NLMSG_ERROR into an Error that
// names the operation, the interface, the errno and the kernel's extended
// ack message ("RTM_NEWLINK(veth crl5, peer eth0 in netns fd 7): EEXIST
// (File exists): kernel: ...").
//
// A Socket works in the network namespace it was opened in, whatever the
// namespace of the thread that uses it later: `open_netlink_in` opens one
// inside a sandbox's namespace, and all the work inside is then done
// through it from the calling thread.
//
// Addresses are IPv4 in host byte order (10.211.0.1 is 0x0ad30001).
#pragma once

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace corral::net::netlink {

// IFNAMSIZ - 1: the longest interface name the kernel accepts.
inline constexpr std::size_t kMaxIfNameLen = 15;

// A name the kernel would accept for a new interface: 1 to 15 bytes, not
// "." or "..", no '/', ':' or whitespace (kInvalidArgument otherwise).
Status check_ifname(std::string_view name);

// --- messages ---------------------------------------------------------

// One netlink request under construction: an nlmsghdr, the family header
// (ifinfomsg, ifaddrmsg, rtmsg), then attributes, each padded to 4 bytes.
class Message {
 public:
  Message(std::uint16_t type, std::uint16_t flags);

  // Appends the fixed family header; call once, before any attribute.
  template <typename T>
  void put_header(const T& header) {
    append(&header, sizeof header);
  }
  void put_attr(std::uint16_t type, const void* data, std::size_t len);
  void put_u32(std::uint16_t type, std::uint32_t value) { put_attr(type, &value, sizeof value); }
  void put_s32(std::uint16_t type, std::int32_t value) { put_attr(type, &value, sizeof value); }
  // A NUL-terminated string attribute (IFLA_IFNAME, IFLA_INFO_KIND).
  void put_string(std::uint16_t type, std::string_view value);
  // Nested attributes: begin_nest returns a token for end_nest, which
  // fixes the nest's length.
  std::size_t begin_nest(std::uint16_t type);
  void end_nest(std::size_t token);

  std::uint16_t type() const;
  std::uint16_t flags() const;
  void add_flags(std::uint16_t flags);
  std::uint32_t seq() const;
  void set_seq(std::uint32_t seq);
  const std::uint8_t* data() const { return buf_.data(); }
  std::size_t size() const { return buf_.size(); }

 private:
  void append(const void* data, std::size_t len);
  std::vector<std::uint8_t> buf_;
};

// The requests this client sends. Names are checked by the operations
// below, not here.
// RTM_NEWLINK, create+excl: veth `host_name` here, its peer `peer_name`
// created in the namespace of `peer_netns_fd` (IFLA_NET_NS_FD in the
// peer's ifinfomsg + attributes, VETH_INFO_PEER). Both ends start down,
// with IFLA_MTU `mtu` (0: the kernel's default, 1500).
Message veth_create_request(std::string_view host_name, std::string_view peer_name,
                            int peer_netns_fd, std::uint32_t mtu = 0);
// RTM_GETLINK of one link by name, without statistics.
Message link_get_request(std::string_view name);
// RTM_NEWLINK on an existing link: IFF_UP set (up) or cleared.
Message link_set_up_request(int ifindex, bool up);
// RTM_NEWLINK on an existing link: IFLA_MTU.
Message link_set_mtu_request(int ifindex, std::uint32_t mtu);
// RTM_DELLINK by name.
Message link_delete_request(std::string_view name);
// RTM_NEWADDR, create+excl: addr/prefix_len on ifindex (scope universe;
// the kernel adds the prefix route).
Message ipv4_address_add_request(int ifindex, std::uint32_t addr, int prefix_len);
// RTM_NEWROUTE, create+excl: 0.0.0.0/0 via gateway, out of ifindex, main
// table, protocol static.
Message ipv4_default_route_request(int ifindex, std::uint32_t gateway);
// Dumps: every IPv4 address, every IPv4 route of the main table.
Message ipv4_address_dump_request();
Message ipv4_route_dump_request();

// Walks the attributes in [data, data+len): fn(type, payload, payload_len)
// for each well-formed one (the NLA_F_NESTED/NET_BYTEORDER bits cleared
// from type); stops at the first malformed one and returns false then.
bool for_each_attr(const void* data, std::size_t len,
                   const std::function<void(std::uint16_t, const std::uint8_t*, std::size_t)>& fn);

// What an NLMSG_ERROR message says: the errno (0 for an ack) and the
// kernel's extended ack message, if it sent one.
struct Ack {
  int error = 0;  // positive errno, 0 for success
  std::string message;
  std::uint32_t bad_attr_offset = 0;  // NLMSGERR_ATTR_OFFS, 0 when absent
};
// Parses the payload of an NLMSG_ERROR message whose header is `hdr`.
// Returns false if it is truncated.
bool parse_ack(const nlmsghdr* hdr, Ack* out);

// --- the socket -------------------------------------------------------

class Socket {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace,
  // with extended acks on and acks capped (no echo of the request).
  static Result<Socket> open();
  // The same options on an already opened NETLINK_ROUTE socket (from
  // open_netlink_in).
  static Result<Socket> adopt(UniqueFd fd);

  int fd() const { return fd_.get(); }

  // Sends msg with NLM_F_ACK (and a fresh sequence number) and reads the
  // replies up to its acknowledgement; every other message that answers it
  // goes to on_reply. A dump (NLM_F_DUMP) ends at NLMSG_DONE instead. A
  // kernel error becomes "<what>: EXXX (text): kernel: <extack>".
  Status transact(Message& msg, std::string_view what,
                  const std::function<void(const nlmsghdr*)>& on_reply = {});

 private:
  explicit Socket(UniqueFd fd);
  UniqueFd fd_;
  std::uint32_t seq_ = 0;
  std::vector<std::uint8_t> rx_;
};

// Opens a NETLINK_ROUTE socket inside the network namespace `netns_fd`
// (see run_in_netns for how the namespace is entered and left).
Result<UniqueFd> open_netlink_in(int netns_fd);

// Runs fn with the calling thread's network namespace switched to
// `netns_fd`. setns(2) acts on one thread: in a single-threaded process fn
// runs on the calling thread, which is switched back afterwards (if that
// fails the process aborts: it must never go on in a sandbox's namespace);
// in a multi-threaded process it runs on a short-lived std::thread that is
// never switched back and ends after fn, so no other thread ever sees
// another namespace. Whatever fn opens (sockets, /proc/sys/net files) stays
// bound to that namespace when used from any thread afterwards. fn must be
// short and must not start threads.
Status run_in_netns(int netns_fd, std::string_view what, const std::function<Status()>& fn);

// Whether `fd` refers to a network namespace (ioctl NS_GET_NSTYPE), and
// whether it is the calling thread's own one.
Status check_netns_fd(int fd);
Result<bool> is_own_netns(int fd);

// --- operations -------------------------------------------------------

struct LinkInfo {
  std::string name;
  int index = 0;
  unsigned flags = 0;  // IFF_UP, IFF_LOWER_UP, ...
  bool up() const;
};

// Creates the veth pair (see veth_create_request). EEXIST when either name
// is taken in its namespace.
Status create_veth(Socket& sock, std::string_view host_name, std::string_view peer_name,
                   int peer_netns_fd, std::uint32_t mtu = 0);
// kNotFound when there is no such link.
Result<LinkInfo> get_link(Socket& sock, std::string_view name);
Result<bool> link_exists(Socket& sock, std::string_view name);
Status set_link_up(Socket& sock, const LinkInfo& link);
Status set_link_mtu(Socket& sock, const LinkInfo& link, std::uint32_t mtu);
Status add_ipv4_address(Socket& sock, const LinkInfo& link, std::uint32_t addr, int prefix_len);
Status add_default_route(Socket& sock, const LinkInfo& link, std::uint32_t gateway);
// kNotFound when there is no such link.
Status delete_link(Socket& sock, std::string_view name);

struct Ipv4Address {
  int ifindex = 0;
  std::uint32_t addr = 0;
  int prefix_len = 0;
};
Result<std::vector<Ipv4Address>> list_ipv4_addresses(Socket& sock);
struct Ipv4Route {
  std::uint32_t dst = 0;
  int dst_len = 0;
  std::uint32_t gateway = 0;  // 0: directly connected
  int oif = 0;
};
// The main table's unicast IPv4 routes.
Result<std::vector<Ipv4Route>> list_ipv4_routes(Socket& sock);

// IPv6 through /proc/sys/net/ipv6/conf/<ifname>/disable_ipv6 of the calling
// thread's namespace (the sysctl files of /proc/sys/net belong to the
// namespace of the thread that opens them). rtnetlink cannot do this:
// IFLA_AF_SPEC/AF_INET6 only sets the token and the address generation
// mode. A kernel without IPv6 (no /proc/sys/net/ipv6) counts as off.
Status disable_ipv6(std::string_view ifname);
Result<bool> ipv6_disabled(std::string_view ifname);
// Opens that file for writing, to write "1" later from any thread.
Result<UniqueFd> open_disable_ipv6(std::string_view ifname);
Status write_disable_ipv6(int fd, std::string_view ifname);
// The same inside the namespace `netns_fd` (run_in_netns).
Status disable_ipv6_in(int netns_fd, std::string_view ifname);

}  // namespace corral::net::netlink
