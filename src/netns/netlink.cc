#include "netns/netlink.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include "base/strings.h"
#include "netns/ip_address.h"

namespace corral::net::netlink {

namespace {

constexpr std::size_t align4(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

// Large enough for any single reply to a request of ours; dumps arrive in
// several datagrams of at most this size.
constexpr std::size_t kRxBufferSize = 32768;

}  // namespace

Status check_ifname(std::string_view name) {
  if (name.empty() || name.size() > kMaxIfNameLen)
    return make_error(ErrorCode::kInvalidArgument,
                      "interface name " + quote_for_message(name) + " must have 1 to " +
                          std::to_string(kMaxIfNameLen) + " characters");
  if (name == "." || name == "..")
    return make_error(ErrorCode::kInvalidArgument,
                      "interface name " + quote_for_message(name) + " is not allowed");
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == ':' || u <= 0x20 || u >= 0x7f)  // no controls, space or non-ASCII
      return make_error(
          ErrorCode::kInvalidArgument,
          "interface name " + quote_for_message(name) + " contains a character that is not allowed");
  }
  return ok();
}

// --- Message ---------------------------------------------------------

Message::Message(std::uint16_t type, std::uint16_t flags) {
  nlmsghdr hdr{};
  hdr.nlmsg_len = sizeof hdr;
  hdr.nlmsg_type = type;
  hdr.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
  buf_.reserve(256);
  append(&hdr, sizeof hdr);
}

void Message::append(const void* data, std::size_t len) {
  std::size_t at = buf_.size();
  buf_.resize(at + align4(len), 0);
  if (len > 0) std::memcpy(buf_.data() + at, data, len);
  auto len32 = static_cast<std::uint32_t>(buf_.size());
  std::memcpy(buf_.data() + offsetof(nlmsghdr, nlmsg_len), &len32, sizeof len32);
}

void Message::put_attr(std::uint16_t type, const void* data, std::size_t len) {
  nlattr attr{};
  attr.nla_len = static_cast<std::uint16_t>(sizeof attr + len);
  attr.nla_type = type;
  append(&attr, sizeof attr);  // sizeof(nlattr) == 4: already aligned
  append(data, len);
}

void Message::put_string(std::uint16_t type, std::string_view value) {
  std::string s(value);  // with its NUL
  put_attr(type, s.c_str(), s.size() + 1);
}

std::size_t Message::begin_nest(std::uint16_t type) {
  std::size_t token = buf_.size();
  nlattr attr{};
  attr.nla_len = sizeof attr;
  attr.nla_type = static_cast<std::uint16_t>(type | NLA_F_NESTED);
  append(&attr, sizeof attr);
  return token;
}

void Message::end_nest(std::size_t token) {
  auto len = static_cast<std::uint16_t>(buf_.size() - token);
  std::memcpy(buf_.data() + token + offsetof(nlattr, nla_len), &len, sizeof len);
}

std::uint16_t Message::type() const {
  std::uint16_t t;
  std::memcpy(&t, buf_.data() + offsetof(nlmsghdr, nlmsg_type), sizeof t);
  return t;
}

std::uint16_t Message::flags() const {
  std::uint16_t f;
  std::memcpy(&f, buf_.data() + offsetof(nlmsghdr, nlmsg_flags), sizeof f);
  return f;
}

void Message::add_flags(std::uint16_t flags) {
  auto f = static_cast<std::uint16_t>(this->flags() | flags);
  std::memcpy(buf_.data() + offsetof(nlmsghdr, nlmsg_flags), &f, sizeof f);
}

std::uint32_t Message::seq() const {
  std::uint32_t s;
  std::memcpy(&s, buf_.data() + offsetof(nlmsghdr, nlmsg_seq), sizeof s);
  return s;
}

void Message::set_seq(std::uint32_t seq) {
  std::memcpy(buf_.data() + offsetof(nlmsghdr, nlmsg_seq), &seq, sizeof seq);
}

// --- requests ---------------------------------------------------------

Message veth_create_request(std::string_view host_name, std::string_view peer_name,
                            int peer_netns_fd, std::uint32_t mtu) {
  Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.put_header(ifi);
  m.put_string(IFLA_IFNAME, host_name);
  // One queue each way, from the start: without these veth allocates one
  // per CPU and then cuts them down to one, which waits for an RCU grace
  // period (synchronize_net) inside the request: most of its time.
  m.put_u32(IFLA_NUM_TX_QUEUES, 1);
  m.put_u32(IFLA_NUM_RX_QUEUES, 1);
  if (mtu != 0) m.put_u32(IFLA_MTU, mtu);
  std::size_t linkinfo = m.begin_nest(IFLA_LINKINFO);
  m.put_string(IFLA_INFO_KIND, "veth");
  std::size_t data = m.begin_nest(IFLA_INFO_DATA);
  // VETH_INFO_PEER: an ifinfomsg, then the peer's own IFLA_* attributes.
  std::size_t peer = m.begin_nest(VETH_INFO_PEER);
  ifinfomsg peer_ifi{};
  peer_ifi.ifi_family = AF_UNSPEC;
  m.put_header(peer_ifi);
  m.put_string(IFLA_IFNAME, peer_name);
  m.put_u32(IFLA_NUM_TX_QUEUES, 1);
  m.put_u32(IFLA_NUM_RX_QUEUES, 1);
  m.put_u32(IFLA_NET_NS_FD, static_cast<std::uint32_t>(peer_netns_fd));
  if (mtu != 0) m.put_u32(IFLA_MTU, mtu);
  m.end_nest(peer);
  m.end_nest(data);
  m.end_nest(linkinfo);
  return m;
}

Message link_get_request(std::string_view name) {
  Message m(RTM_GETLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.put_header(ifi);
  m.put_string(IFLA_IFNAME, name);
  m.put_u32(IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
  return m;
}

Message link_set_up_request(int ifindex, bool up) {
  Message m(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  ifi.ifi_flags = up ? IFF_UP : 0;
  ifi.ifi_change = IFF_UP;
  m.put_header(ifi);
  return m;
}

Message link_set_mtu_request(int ifindex, std::uint32_t mtu) {
  Message m(RTM_NEWLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  m.put_header(ifi);
  m.put_u32(IFLA_MTU, mtu);
  return m;
}

Message link_delete_request(std::string_view name) {
  Message m(RTM_DELLINK, 0);
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  m.put_header(ifi);
  m.put_string(IFLA_IFNAME, name);
  return m;
}

Message ipv4_address_add_request(int ifindex, std::uint32_t addr, int prefix_len) {
  Message m(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  ifa.ifa_prefixlen = static_cast<std::uint8_t>(prefix_len);
  ifa.ifa_scope = RT_SCOPE_UNIVERSE;
  ifa.ifa_index = static_cast<std::uint32_t>(ifindex);
  m.put_header(ifa);
  std::uint32_t be = htonl(addr);
  m.put_attr(IFA_LOCAL, &be, sizeof be);
  m.put_attr(IFA_ADDRESS, &be, sizeof be);
  return m;
}

Message ipv4_default_route_request(int ifindex, std::uint32_t gateway) {
  Message m(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  rt.rtm_dst_len = 0;
  rt.rtm_table = RT_TABLE_MAIN;
  rt.rtm_protocol = RTPROT_STATIC;
  rt.rtm_scope = RT_SCOPE_UNIVERSE;
  rt.rtm_type = RTN_UNICAST;
  m.put_header(rt);
  std::uint32_t be = htonl(gateway);
  m.put_attr(RTA_GATEWAY, &be, sizeof be);
  m.put_u32(RTA_OIF, static_cast<std::uint32_t>(ifindex));
  return m;
}

Message ipv4_address_dump_request() {
  Message m(RTM_GETADDR, NLM_F_DUMP);
  ifaddrmsg ifa{};
  ifa.ifa_family = AF_INET;
  m.put_header(ifa);
  return m;
}

Message ipv4_route_dump_request() {
  Message m(RTM_GETROUTE, NLM_F_DUMP);
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  m.put_header(rt);
  return m;
}

// --- parsing ----------------------------------------------------------

bool for_each_attr(const void* data, std::size_t len,
                   const std::function<void(std::uint16_t, const std::uint8_t*, std::size_t)>& fn) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t off = 0;
  while (off < len) {
    if (len - off < sizeof(nlattr)) return false;
    nlattr attr;
    std::memcpy(&attr, p + off, sizeof attr);
    if (attr.nla_len < sizeof attr || attr.nla_len > len - off) return false;
    fn(static_cast<std::uint16_t>(attr.nla_type & NLA_TYPE_MASK), p + off + sizeof attr,
       attr.nla_len - sizeof attr);
    off += align4(attr.nla_len);
  }
  return true;
}

bool parse_ack(const nlmsghdr* hdr, Ack* out) {
  const std::size_t total = hdr->nlmsg_len;
  if (total < sizeof(nlmsghdr) + sizeof(nlmsgerr)) return false;
  const auto* base = reinterpret_cast<const std::uint8_t*>(hdr);
  nlmsgerr err;
  std::memcpy(&err, base + sizeof(nlmsghdr), sizeof err);
  *out = Ack{};
  out->error = -err.error;
  if ((hdr->nlmsg_flags & NLM_F_ACK_TLVS) == 0) return true;
  // The TLVs follow the echoed request: only its header when capped.
  std::size_t tlv_off = sizeof(nlmsghdr) + sizeof(nlmsgerr);
  if ((hdr->nlmsg_flags & NLM_F_CAPPED) == 0) {
    if (err.msg.nlmsg_len < sizeof(nlmsghdr)) return false;
    tlv_off += align4(err.msg.nlmsg_len) - sizeof(nlmsghdr);
  }
  if (tlv_off > total) return false;
  for_each_attr(base + tlv_off, total - tlv_off,
                [out](std::uint16_t type, const std::uint8_t* payload, std::size_t len) {
                  if (type == NLMSGERR_ATTR_MSG && len > 0) {
                    out->message.assign(reinterpret_cast<const char*>(payload),
                                        strnlen(reinterpret_cast<const char*>(payload), len));
                  } else if (type == NLMSGERR_ATTR_OFFS && len >= 4) {
                    std::memcpy(&out->bad_attr_offset, payload, 4);
                  }
                });
  return true;
}

// --- Socket ------------------------------------------------------------

Socket::Socket(UniqueFd fd) : fd_(std::move(fd)), rx_(kRxBufferSize) {
  // Distinct starting points keep a stray reply to an earlier socket's
  // request from looking like ours.
  seq_ = static_cast<std::uint32_t>(getpid()) * 65536u + static_cast<std::uint32_t>(fd_.get());
}

Result<Socket> Socket::open() {
  UniqueFd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd) return errno_error("socket(AF_NETLINK, NETLINK_ROUTE)");
  return adopt(std::move(fd));
}

Result<Socket> Socket::adopt(UniqueFd fd) {
  int one = 1;
  // Both are best effort: without them errors lose their text, not their
  // errno (extended acks exist since Linux 4.12).
  (void)setsockopt(fd.get(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  (void)setsockopt(fd.get(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  // rtnetlink answers while sendmsg runs, so a reply is always queued
  // before we read; the timeout only keeps a kernel surprise from hanging
  // the caller forever.
  timeval tv{5, 0};
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
    return errno_error("setsockopt(netlink, SO_RCVTIMEO)");
  return Socket(std::move(fd));
}

namespace {

tl::unexpected<Error> kernel_error(std::string_view what, const Ack& ack) {
  std::string hint;
  if (ack.error == EPERM) hint = "changing network interfaces needs CAP_NET_ADMIN: run as root";
  auto e = errno_error(what, ack.error, std::move(hint));
  if (!ack.message.empty()) e.value().message += ": kernel: " + ack.message;
  return e;
}

tl::unexpected<Error> malformed(std::string_view what, std::string_view detail) {
  return make_error(ErrorCode::kSystem,
                    std::string(what) + ": malformed netlink reply (" + std::string(detail) + ")");
}

}  // namespace

Status Socket::transact(Message& msg, std::string_view what,
                        const std::function<void(const nlmsghdr*)>& on_reply) {
  const bool dump = (msg.flags() & NLM_F_DUMP) == NLM_F_DUMP;
  if (!dump) msg.add_flags(NLM_F_ACK);
  const std::uint32_t seq = ++seq_;
  msg.set_seq(seq);

  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = sendto(fd_.get(), msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                  sizeof kernel);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return errno_error(std::string(what) + ": sendto(netlink)");
  if (static_cast<std::size_t>(sent) != msg.size())
    return make_error(ErrorCode::kSystem, std::string(what) + ": short send on the netlink socket");

  for (;;) {
    iovec iov{rx_.data(), rx_.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    ssize_t got;
    do {
      got = recvmsg(fd_.get(), &mh, 0);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return make_error(ErrorCode::kTimeout,
                          std::string(what) + ": no answer from the kernel within 5 s");
      return errno_error(std::string(what) + ": recvmsg(netlink)");
    }
    if ((mh.msg_flags & MSG_TRUNC) != 0) return malformed(what, "datagram truncated");
    const auto len = static_cast<std::size_t>(got);
    std::size_t off = 0;
    while (off + sizeof(nlmsghdr) <= len) {
      const auto* hdr = reinterpret_cast<const nlmsghdr*>(rx_.data() + off);
      if (hdr->nlmsg_len < sizeof(nlmsghdr) || hdr->nlmsg_len > len - off)
        return malformed(what, "bad message length");
      off += align4(hdr->nlmsg_len);
      if (hdr->nlmsg_seq != seq) continue;  // a late answer to someone else
      if (hdr->nlmsg_type == NLMSG_ERROR) {
        Ack ack;
        if (!parse_ack(hdr, &ack)) return malformed(what, "truncated NLMSG_ERROR");
        if (ack.error != 0) return kernel_error(what, ack);
        return ok();
      }
      if (hdr->nlmsg_type == NLMSG_DONE) {
        // A dump's end; its payload is the dump's error, if any.
        std::int32_t status = 0;
        if (hdr->nlmsg_len >= sizeof(nlmsghdr) + sizeof status)
          std::memcpy(&status, rx_.data() + (off - align4(hdr->nlmsg_len)) + sizeof(nlmsghdr),
                      sizeof status);
        if (status < 0) return kernel_error(what, Ack{-status, {}, 0});
        return ok();
      }
      if (hdr->nlmsg_type == NLMSG_NOOP) continue;
      if (on_reply) on_reply(hdr);
    }
  }
}

// --- namespaces --------------------------------------------------------

namespace {

// /proc/self/task has 2 + (number of threads) links.
bool single_threaded() {
  struct stat st;
  if (stat("/proc/self/task", &st) != 0) return false;  // unknown: take the safe path
  return st.st_nlink == 3;
}

}  // namespace

Status check_netns_fd(int fd) {
  int type = ioctl(fd, NS_GET_NSTYPE);
  if (type < 0) {
    if (errno == EBADF) return errno_error("netns fd " + std::to_string(fd), errno);
    return make_error(ErrorCode::kInvalidArgument,
                      "fd " + std::to_string(fd) + " is not a namespace (ioctl NS_GET_NSTYPE: " +
                          std::string(errno_name(errno)) + ")",
                      "pass an fd of /proc/<pid>/ns/net");
  }
  if (type != CLONE_NEWNET)
    return make_error(ErrorCode::kInvalidArgument,
                      "fd " + std::to_string(fd) + " is a namespace, but not a network namespace",
                      "pass an fd of /proc/<pid>/ns/net");
  return ok();
}

Result<bool> is_own_netns(int fd) {
  struct stat own;
  if (stat("/proc/thread-self/ns/net", &own) != 0)
    return errno_error("stat(/proc/thread-self/ns/net)");
  struct stat other;
  if (fstat(fd, &other) != 0) return errno_error("fstat(netns fd " + std::to_string(fd) + ")");
  return own.st_dev == other.st_dev && own.st_ino == other.st_ino;
}

Status run_in_netns(int netns_fd, std::string_view what, const std::function<Status()>& fn) {
  CORRAL_TRY_CTX(check_netns_fd(netns_fd), what);
  const std::string enter =
      std::string(what) + ": setns(netns fd " + std::to_string(netns_fd) + ", CLONE_NEWNET)";
  if (single_threaded()) {
    UniqueFd self(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!self) return errno_error(std::string(what) + ": open(/proc/thread-self/ns/net)");
    if (setns(netns_fd, CLONE_NEWNET) != 0) return errno_error(enter);
    Status st = fn();
    if (setns(self.get(), CLONE_NEWNET) != 0) {
      // Going on would put every later socket of this process inside a
      // sandbox's namespace: stop here.
      std::fprintf(stderr, "corral: %s: cannot return to the original network namespace: %s\n",
                   std::string(what).c_str(), std::strerror(errno));
      std::abort();
    }
    return st;
  }
  Status st = ok();
  try {
    std::thread worker([&] {
      if (setns(netns_fd, CLONE_NEWNET) != 0) {
        st = errno_error(enter);
        return;
      }
      st = fn();
      // The thread ends here, still in that namespace: nothing else runs
      // on it.
    });
    worker.join();
  } catch (const std::system_error& e) {
    return make_error(
        ErrorCode::kResourceExhausted,
        std::string(what) + ": starting a thread to enter the namespace: " + e.what());
  }
  return st;
}

Result<UniqueFd> open_netlink_in(int netns_fd) {
  UniqueFd out;
  CORRAL_TRY(run_in_netns(netns_fd,
                          "opening a netlink socket in netns fd " + std::to_string(netns_fd),
                          [&out]() -> Status {
                            out.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
                            if (!out) return errno_error("socket(AF_NETLINK, NETLINK_ROUTE)");
                            return ok();
                          }));
  return out;
}

// --- operations --------------------------------------------------------

bool LinkInfo::up() const { return (flags & IFF_UP) != 0; }

Status create_veth(Socket& sock, std::string_view host_name, std::string_view peer_name,
                   int peer_netns_fd, std::uint32_t mtu) {
  const std::string what = "RTM_NEWLINK(veth " + std::string(host_name) + ", peer " +
                           std::string(peer_name) + " in netns fd " +
                           std::to_string(peer_netns_fd) + ")";
  CORRAL_TRY_CTX(check_ifname(host_name), what);
  CORRAL_TRY_CTX(check_ifname(peer_name), what);
  Message m = veth_create_request(host_name, peer_name, peer_netns_fd, mtu);
  auto st = sock.transact(m, what);
  if (!st && st.error().sys_errno == EEXIST) {
    st.error().code = ErrorCode::kAlreadyExists;
    st.error().hint = "an interface named " + std::string(host_name) + " (here) or " +
                      std::string(peer_name) + " (in the target namespace) already exists";
  }
  return st;
}

Result<LinkInfo> get_link(Socket& sock, std::string_view name) {
  const std::string what = "RTM_GETLINK(" + std::string(name) + ")";
  CORRAL_TRY_CTX(check_ifname(name), what);
  Message m = link_get_request(name);
  LinkInfo info;
  bool seen = false;
  auto st = sock.transact(m, what, [&](const nlmsghdr* hdr) {
    if (hdr->nlmsg_type != RTM_NEWLINK || hdr->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) return;
    ifinfomsg ifi;
    std::memcpy(&ifi, NLMSG_DATA(hdr), sizeof ifi);
    info.index = ifi.ifi_index;
    info.flags = ifi.ifi_flags;
    info.name = std::string(name);
    seen = true;
  });
  if (!st) {
    if (st.error().sys_errno == ENODEV) {
      st.error().code = ErrorCode::kNotFound;
      st.error().message =
          "no network interface named " + std::string(name) + " (" + st.error().message + ")";
    }
    return tl::unexpected<Error>(std::move(st).error());
  }
  if (!seen) return malformed(what, "no RTM_NEWLINK in the answer");
  return info;
}

Result<bool> link_exists(Socket& sock, std::string_view name) {
  auto link = get_link(sock, name);
  if (link) return true;
  if (link.error().code == ErrorCode::kNotFound) return false;
  return tl::unexpected<Error>(std::move(link).error());
}

Status set_link_up(Socket& sock, const LinkInfo& link) {
  Message m = link_set_up_request(link.index, true);
  return sock.transact(m, "RTM_NEWLINK(" + link.name + " up)");
}

Status set_link_mtu(Socket& sock, const LinkInfo& link, std::uint32_t mtu) {
  Message m = link_set_mtu_request(link.index, mtu);
  return sock.transact(m, "RTM_NEWLINK(" + link.name + " mtu " + std::to_string(mtu) + ")");
}

Status add_ipv4_address(Socket& sock, const LinkInfo& link, std::uint32_t addr, int prefix_len) {
  const std::string what = "RTM_NEWADDR(" + IpAddress::v4(addr).str() + "/" +
                           std::to_string(prefix_len) + " dev " + link.name + ")";
  if (prefix_len < 0 || prefix_len > 32)
    return make_error(ErrorCode::kInvalidArgument, what + ": prefix length out of range");
  Message m = ipv4_address_add_request(link.index, addr, prefix_len);
  return sock.transact(m, what);
}

Status add_default_route(Socket& sock, const LinkInfo& link, std::uint32_t gateway) {
  Message m = ipv4_default_route_request(link.index, gateway);
  return sock.transact(
      m, "RTM_NEWROUTE(default via " + IpAddress::v4(gateway).str() + " dev " + link.name + ")");
}

Status delete_link(Socket& sock, std::string_view name) {
  const std::string what = "RTM_DELLINK(" + std::string(name) + ")";
  CORRAL_TRY_CTX(check_ifname(name), what);
  Message m = link_delete_request(name);
  auto st = sock.transact(m, what);
  if (!st && st.error().sys_errno == ENODEV) st.error().code = ErrorCode::kNotFound;
  return st;
}

Result<std::vector<Ipv4Address>> list_ipv4_addresses(Socket& sock) {
  Message m = ipv4_address_dump_request();
  std::vector<Ipv4Address> out;
  CORRAL_TRY(sock.transact(m, "RTM_GETADDR(dump, AF_INET)", [&](const nlmsghdr* hdr) {
    if (hdr->nlmsg_type != RTM_NEWADDR || hdr->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return;
    ifaddrmsg ifa;
    std::memcpy(&ifa, NLMSG_DATA(hdr), sizeof ifa);
    if (ifa.ifa_family != AF_INET) return;
    Ipv4Address a;
    a.ifindex = static_cast<int>(ifa.ifa_index);
    a.prefix_len = ifa.ifa_prefixlen;
    const auto* attrs = static_cast<const std::uint8_t*>(NLMSG_DATA(hdr)) + align4(sizeof ifa);
    for_each_attr(attrs, hdr->nlmsg_len - NLMSG_LENGTH(align4(sizeof ifa)),
                  [&a](std::uint16_t type, const std::uint8_t* p, std::size_t len) {
                    if (type == IFA_LOCAL && len == 4) {
                      std::uint32_t be;
                      std::memcpy(&be, p, 4);
                      a.addr = ntohl(be);
                    }
                  });
    out.push_back(a);
  }));
  return out;
}

Result<std::vector<Ipv4Route>> list_ipv4_routes(Socket& sock) {
  Message m = ipv4_route_dump_request();
  std::vector<Ipv4Route> out;
  CORRAL_TRY(sock.transact(m, "RTM_GETROUTE(dump, AF_INET)", [&](const nlmsghdr* hdr) {
    if (hdr->nlmsg_type != RTM_NEWROUTE || hdr->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) return;
    rtmsg rt;
    std::memcpy(&rt, NLMSG_DATA(hdr), sizeof rt);
    if (rt.rtm_family != AF_INET || rt.rtm_type != RTN_UNICAST) return;
    Ipv4Route r;
    r.dst_len = rt.rtm_dst_len;
    std::uint32_t table = rt.rtm_table;
    const auto* attrs = static_cast<const std::uint8_t*>(NLMSG_DATA(hdr)) + align4(sizeof rt);
    for_each_attr(attrs, hdr->nlmsg_len - NLMSG_LENGTH(align4(sizeof rt)),
                  [&](std::uint16_t type, const std::uint8_t* p, std::size_t len) {
                    std::uint32_t v = 0;
                    if (len == 4) std::memcpy(&v, p, 4);
                    if (type == RTA_DST && len == 4) r.dst = ntohl(v);
                    if (type == RTA_GATEWAY && len == 4) r.gateway = ntohl(v);
                    if (type == RTA_OIF && len == 4) r.oif = static_cast<int>(v);
                    if (type == RTA_TABLE && len == 4) table = v;
                  });
    if (table == RT_TABLE_MAIN) out.push_back(r);
  }));
  return out;
}

// --- IPv6 ----------------------------------------------------------------

namespace {

constexpr const char* kIpv6Conf = "/proc/sys/net/ipv6/conf/";

bool kernel_has_ipv6() { return access("/proc/sys/net/ipv6", F_OK) == 0; }

}  // namespace

Result<UniqueFd> open_disable_ipv6(std::string_view ifname) {
  CORRAL_TRY(check_ifname(ifname));
  if (!kernel_has_ipv6()) return UniqueFd();  // nothing to turn off
  const std::string path = kIpv6Conf + std::string(ifname) + "/disable_ipv6";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno_error("open(" + path + ")");
  return fd;
}

Status write_disable_ipv6(int fd, std::string_view ifname) {
  if (fd < 0) return ok();  // the kernel has no IPv6
  ssize_t n;
  do {
    n = pwrite(fd, "1\n", 2, 0);
  } while (n < 0 && errno == EINTR);
  if (n != 2)
    return errno_error(
        std::string("write(") + kIpv6Conf + std::string(ifname) + "/disable_ipv6, 1)",
        n < 0 ? errno : EIO);
  return ok();
}

Status disable_ipv6(std::string_view ifname) {
  auto fd = open_disable_ipv6(ifname);
  if (!fd) return tl::unexpected<Error>(std::move(fd).error());
  return write_disable_ipv6(fd->get(), ifname);
}

Result<bool> ipv6_disabled(std::string_view ifname) {
  CORRAL_TRY(check_ifname(ifname));
  if (!kernel_has_ipv6()) return true;
  const std::string path = kIpv6Conf + std::string(ifname) + "/disable_ipv6";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return errno_error("open(" + path + ")");
  char c = 0;
  ssize_t n = read(fd.get(), &c, 1);
  if (n != 1) return errno_error("read(" + path + ")", n < 0 ? errno : EIO);
  return c == '1';
}

Status disable_ipv6_in(int netns_fd, std::string_view ifname) {
  return run_in_netns(
      netns_fd,
      "turning IPv6 off on " + std::string(ifname) + " in netns fd " + std::to_string(netns_fd),
      [ifname] { return disable_ipv6(ifname); });
}

}  // namespace corral::net::netlink
