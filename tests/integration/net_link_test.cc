// The per-sandbox network plumbing of ADR 0005 against the real kernel:
// network slots (lock files), the rtnetlink client and the veth pair of
// setup_sandbox_link / teardown_sandbox_link. Needs root.
//
// Every test uses its own pools, never the defaults, so that a daemon
// running on this host is not disturbed: subnet 10.219.0.0/16 with the
// interface prefix "cnlt", small pools with "cnls", and lock files in a
// temporary directory. Namespaces are made by the tests (a thread that
// unshares and hands out /proc/thread-self/ns/net), and what is inside is
// checked with plain ioctls and /proc/thread-self/net/route from a thread
// that setns'd there, independently of the code under test. No nftables.
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "netns/net_slot.h"
#include "netns/netlink.h"
#include "netns/sandbox_link.h"
#include "support/sandbox_harness.h"

namespace corral::net {
namespace {

using ::corral::testing::make_temp_dir;

constexpr const char* kTestSubnet = "10.219.0.0/16";
constexpr const char* kTestPrefix = "cnlt";
constexpr const char* kSmallPrefix = "cnls";

#define NEED_ROOT()                                                        \
  do {                                                                     \
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("needs root (CAP_NET_ADMIN)"); \
  } while (0)

// A network namespace of its own, alive as long as this object (the fd
// holds it): made by a thread that unshares and exits.
class TestNetns {
 public:
  TestNetns() {
    std::thread([this] {
      if (unshare(CLONE_NEWNET) != 0) {
        error_ = std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
        return;
      }
      fd_.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
      if (!fd_) error_ = std::string("open(/proc/thread-self/ns/net): ") + strerror(errno);
    }).join();
  }
  int fd() const { return fd_.get(); }
  const std::string& error() const { return error_; }

 private:
  UniqueFd fd_;
  std::string error_;
};

// Runs fn on a thread inside the namespace (our own setns, not the code
// under test's).
void in_netns(int netns_fd, const std::function<void()>& fn) {
  std::thread([&] {
    ASSERT_EQ(setns(netns_fd, CLONE_NEWNET), 0) << strerror(errno);
    fn();
  }).join();
}

// An interface as the classic ioctls see it, in the calling thread's
// namespace.
struct IfState {
  bool exists = false;
  bool up = false;
  std::string addr;  // primary IPv4 address, "" if none
  std::string mask;
  int mtu = 0;
};

IfState if_state(const std::string& name) {
  IfState s;
  UniqueFd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) {
    ADD_FAILURE() << "socket: " << strerror(errno);
    return s;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) return s;
  s.exists = true;
  s.up = (ifr.ifr_flags & IFF_UP) != 0;
  char text[INET_ADDRSTRLEN];
  if (ioctl(sock.get(), SIOCGIFADDR, &ifr) == 0) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ifr.ifr_addr);
    s.addr = inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
  }
  if (ioctl(sock.get(), SIOCGIFNETMASK, &ifr) == 0) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ifr.ifr_netmask);
    s.mask = inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text);
  }
  if (ioctl(sock.get(), SIOCGIFMTU, &ifr) == 0) s.mtu = ifr.ifr_mtu;
  return s;
}

// The gateway of the default route on `ifname` in the calling thread's
// namespace, from /proc/thread-self/net/route ("" if there is none).
std::string default_gateway(const std::string& ifname) {
  std::ifstream route("/proc/thread-self/net/route");
  std::string line;
  std::getline(route, line);  // header
  while (std::getline(route, line)) {
    std::istringstream in(line);
    std::string iface, dst, gw;
    in >> iface >> dst >> gw;
    if (iface != ifname || dst != "00000000") continue;
    in_addr a{};
    a.s_addr = static_cast<in_addr_t>(std::stoul(gw, nullptr, 16));
    char text[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, &a, text, sizeof text);
  }
  return "";
}

// /proc/sys/net/ipv6/conf/<ifname>/disable_ipv6 of the calling thread's
// namespace ("" if absent).
std::string ipv6_switch(const std::string& ifname) {
  std::ifstream f("/proc/sys/net/ipv6/conf/" + ifname + "/disable_ipv6");
  std::string v;
  f >> v;
  return v;
}

bool has_ipv6_address(const std::string& ifname) {
  std::ifstream f("/proc/thread-self/net/if_inet6");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string addr, idx, plen, scope, flags, name;
    in >> addr >> idx >> plen >> scope >> flags >> name;
    if (name == ifname) return true;
  }
  return false;
}

bool lock_is_free(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return true;
  return flock(fd.get(), LOCK_EX | LOCK_NB) == 0;
}

std::string ipv4(std::uint32_t host_order) {
  in_addr a{htonl(host_order)};
  char text[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a, text, sizeof text);
}

class net_link : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) return;
    lock_dir_ = make_temp_dir("netslots");
    auto pool = NetSlotPool::make(kTestSubnet, kTestPrefix, lock_dir_);
    ASSERT_TRUE(pool) << pool.error().to_string();
    pool_ = *pool;
  }
  void TearDown() override {
    if (lock_dir_.empty()) return;
    // Only lock files are in it.
    ::corral::testing::host_sh("rm -rf '" + lock_dir_ + "'");
  }
  // The host ends of our pools that exist now (should be none after a test).
  static std::string leftover_links() {
    return ::corral::testing::host_sh("ls /sys/class/net | grep -E '^(" + std::string(kTestPrefix) +
                                      "|" + kSmallPrefix + ")[0-9]+$' || true");
  }

  std::string lock_dir_;
  NetSlotPool pool_;
};

TEST_F(net_link, SetupGivesAWorkingLinkAndTeardownRemovesIt) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  const std::string host_eth0_ipv6 = ipv6_switch("eth0");  // the host's own, if any

  auto slot = NetSlot::acquire(pool_);
  ASSERT_TRUE(slot) << slot.error().to_string();
  ASSERT_TRUE(slot->holds_lock());
  EXPECT_FALSE(lock_is_free(slot->lock_path()));
  const std::string host_if = slot->host_ifname();
  const std::string host_addr = ipv4(slot->host_address());
  const std::string sandbox_addr = ipv4(slot->sandbox_address());

  auto st = setup_sandbox_link(*slot, ns.fd());
  ASSERT_TRUE(st) << st.error().to_string();
  auto present = sandbox_link_present(*slot);
  ASSERT_TRUE(present);
  EXPECT_TRUE(*present);

  // Inside: eth0 with .4n+2/30, up, default route via .4n+1, IPv6 off,
  // MTU 65535 (sandbox_link.cc: bulk TCP to the proxy in 64 KiB segments).
  in_netns(ns.fd(), [&] {
    IfState eth0 = if_state("eth0");
    EXPECT_TRUE(eth0.exists);
    EXPECT_TRUE(eth0.up);
    EXPECT_EQ(eth0.addr, sandbox_addr);
    EXPECT_EQ(eth0.mask, "255.255.255.252");
    EXPECT_EQ(default_gateway("eth0"), host_addr);
    EXPECT_EQ(ipv6_switch("eth0"), "1");
    EXPECT_FALSE(has_ipv6_address("eth0"));
    EXPECT_EQ(eth0.mtu, 65535);
  });
  // The host end: .4n+1/30, up, IPv6 off; the host's own eth0 untouched.
  IfState host = if_state(host_if);
  EXPECT_TRUE(host.exists);
  EXPECT_TRUE(host.up);
  EXPECT_EQ(host.addr, host_addr);
  EXPECT_EQ(host.mask, "255.255.255.252");
  EXPECT_EQ(ipv6_switch(host_if), "1");
  EXPECT_FALSE(has_ipv6_address(host_if));
  EXPECT_EQ(host.mtu, 65535);
  EXPECT_EQ(ipv6_switch("eth0"), host_eth0_ipv6) << "the host's eth0 was changed";

  // The link carries traffic: from inside to a listener on the host end.
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(slot->host_address());
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof at), 0)
      << strerror(errno);
  ASSERT_EQ(listen(listener.get(), 4), 0);
  socklen_t at_len = sizeof at;
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&at), &at_len), 0);
  in_netns(ns.fd(), [&] {
    UniqueFd c(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    ASSERT_TRUE(c);
    int r = connect(c.get(), reinterpret_cast<sockaddr*>(&at), sizeof at);
    ASSERT_TRUE(r == 0 || errno == EINPROGRESS) << strerror(errno);
    pollfd p{c.get(), POLLOUT, 0};
    ASSERT_EQ(poll(&p, 1, 5000), 1) << "connect from inside to " << host_addr << " timed out";
    int err = 0;
    socklen_t len = sizeof err;
    ASSERT_EQ(getsockopt(c.get(), SOL_SOCKET, SO_ERROR, &err, &len), 0);
    ASSERT_EQ(err, 0) << "connect: " << strerror(err);
    ASSERT_EQ(send(c.get(), "ping", 4, MSG_NOSIGNAL), 4);
  });
  pollfd lp{listener.get(), POLLIN, 0};
  ASSERT_EQ(poll(&lp, 1, 5000), 1) << "no connection reached the host end";
  sockaddr_in peer{};
  socklen_t peer_len = sizeof peer;
  UniqueFd conn(
      accept4(listener.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC));
  ASSERT_TRUE(conn);
  char text[INET_ADDRSTRLEN];
  EXPECT_STREQ(inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text), sandbox_addr.c_str());
  char buf[8] = {};
  pollfd cp{conn.get(), POLLIN, 0};
  ASSERT_EQ(poll(&cp, 1, 5000), 1);
  EXPECT_EQ(recv(conn.get(), buf, sizeof buf, 0), 4);
  EXPECT_STREQ(buf, "ping");
  conn.reset();
  listener.reset();

  // Teardown: gone on both sides, idempotent, and the slot's lock is free
  // once the slot is released.
  st = teardown_sandbox_link(*slot);
  ASSERT_TRUE(st) << st.error().to_string();
  present = sandbox_link_present(*slot);
  ASSERT_TRUE(present);
  EXPECT_FALSE(*present);
  EXPECT_FALSE(if_state(host_if).exists);
  in_netns(ns.fd(), [&] { EXPECT_FALSE(if_state("eth0").exists); });
  st = teardown_sandbox_link(*slot);
  EXPECT_TRUE(st) << "a second teardown: " << st.error().to_string();
  const std::string lock_path = slot->lock_path();
  slot = tl::unexpected<Error>(Error{});  // releases the slot
  EXPECT_TRUE(lock_is_free(lock_path));
  EXPECT_EQ(leftover_links(), "");
}

TEST_F(net_link, AFdThatIsNotANetworkNamespaceIsRefusedCleanly) {
  NEED_ROOT();
  auto slot = NetSlot::acquire(pool_);
  ASSERT_TRUE(slot) << slot.error().to_string();
  UniqueFd devnull(open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd uts(open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC));
  UniqueFd own(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(devnull && uts && own);
  struct Case {
    int fd;
    const char* says;
  };
  for (const Case& c :
       {Case{devnull.get(), "is not a namespace"}, Case{uts.get(), "not a network namespace"},
        Case{own.get(), "the caller's own network namespace"}, Case{999, "EBADF"}}) {
    auto st = setup_sandbox_link(*slot, c.fd);
    ASSERT_FALSE(st) << c.says;
    const std::string& m = st.error().message;
    EXPECT_NE(m.find(c.says), std::string::npos) << m;
    EXPECT_NE(m.find("setting up the network link of slot " + std::to_string(slot->index())),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("checking the namespace"), std::string::npos) << m;
    EXPECT_FALSE(if_state(slot->host_ifname()).exists) << c.says;
  }
  // The kernel's own answer when the check is bypassed: an error that names
  // the request, nothing created.
  auto sock = netlink::Socket::open();
  ASSERT_TRUE(sock);
  auto st = netlink::create_veth(*sock, slot->host_ifname(), "eth0", devnull.get());
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().sys_errno, 0);
  EXPECT_EQ(st.error().message.rfind("RTM_NEWLINK(veth " + slot->host_ifname() + ", peer eth0", 0),
            0u)
      << st.error().message;
  EXPECT_FALSE(if_state(slot->host_ifname()).exists);
  EXPECT_EQ(leftover_links(), "");
}

TEST_F(net_link, AnExistingHostInterfaceIsNotTouched) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  auto slot = NetSlot::acquire(pool_);
  ASSERT_TRUE(slot) << slot.error().to_string();
  // Someone else's interface with the slot's name (both ends here).
  auto sock = netlink::Socket::open();
  ASSERT_TRUE(sock);
  UniqueFd own(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  const std::string other_peer = std::string(kTestPrefix) + "p" + std::to_string(slot->index());
  ASSERT_TRUE(netlink::create_veth(*sock, slot->host_ifname(), other_peer, own.get()));

  auto st = setup_sandbox_link(*slot, ns.fd());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists);
  EXPECT_NE(st.error().message.find("creating the veth pair"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("EEXIST"), std::string::npos) << st.error().message;
  EXPECT_TRUE(if_state(slot->host_ifname()).exists) << "the existing interface was deleted";
  in_netns(ns.fd(), [&] { EXPECT_FALSE(if_state("eth0").exists); });

  ASSERT_TRUE(netlink::delete_link(*sock, slot->host_ifname()));
  EXPECT_FALSE(if_state(other_peer).exists) << "deleting one end takes the other";
  EXPECT_EQ(leftover_links(), "");
}

TEST_F(net_link, AnExistingEth0InsideIsReportedAndNothingIsLeft) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  in_netns(ns.fd(), [&] {
    auto inner = netlink::Socket::open();
    ASSERT_TRUE(inner);
    UniqueFd self(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(netlink::create_veth(*inner, "eth0", "eth1", self.get()));
  });
  auto slot = NetSlot::acquire(pool_);
  ASSERT_TRUE(slot) << slot.error().to_string();
  auto st = setup_sandbox_link(*slot, ns.fd());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kAlreadyExists) << st.error().message;
  EXPECT_FALSE(if_state(slot->host_ifname()).exists);
  in_netns(ns.fd(), [&] {
    IfState eth0 = if_state("eth0");
    EXPECT_TRUE(eth0.exists) << "the namespace's own eth0 was deleted";
    EXPECT_EQ(eth0.addr, "");
  });
  EXPECT_EQ(leftover_links(), "");
}

TEST_F(net_link, AFailureHalfwayIsUndone) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  // The namespace already has a default route (through another interface),
  // so the last step, adding ours, fails with EEXIST after everything else
  // was done.
  in_netns(ns.fd(), [&] {
    auto inner = netlink::Socket::open();
    ASSERT_TRUE(inner);
    UniqueFd self(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(netlink::create_veth(*inner, "v0", "v1", self.get()));
    for (const char* name : {"v0", "v1"}) {
      auto link = netlink::get_link(*inner, name);
      ASSERT_TRUE(link) << link.error().to_string();
      ASSERT_TRUE(netlink::set_link_up(*inner, *link));
    }
    auto v0 = netlink::get_link(*inner, "v0");
    ASSERT_TRUE(v0);
    auto a = netlink::add_ipv4_address(*inner, *v0, 0xc0000201, 24);  // 192.0.2.1/24
    ASSERT_TRUE(a) << a.error().to_string();
    auto r = netlink::add_default_route(*inner, *v0, 0xc00002fe);  // via 192.0.2.254
    ASSERT_TRUE(r) << r.error().to_string();
  });
  auto slot = NetSlot::acquire(pool_);
  ASSERT_TRUE(slot) << slot.error().to_string();
  auto st = setup_sandbox_link(*slot, ns.fd());
  ASSERT_FALSE(st);
  const std::string& m = st.error().message;
  EXPECT_NE(m.find("configuring eth0 (sandbox end)"), std::string::npos) << m;
  EXPECT_NE(m.find("RTM_NEWROUTE(default via " + ipv4(slot->host_address()) + " dev eth0)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("EEXIST"), std::string::npos) << m;
  EXPECT_EQ(m.find("undoing it failed"), std::string::npos) << m;
  // Nothing of ours is left, on either side; theirs is intact.
  EXPECT_FALSE(if_state(slot->host_ifname()).exists);
  auto host_sock = netlink::Socket::open();
  ASSERT_TRUE(host_sock);
  auto addrs = netlink::list_ipv4_addresses(*host_sock);
  ASSERT_TRUE(addrs) << addrs.error().to_string();
  for (const auto& a : *addrs) EXPECT_NE(a.addr, slot->host_address()) << "ifindex " << a.ifindex;
  in_netns(ns.fd(), [&] {
    EXPECT_FALSE(if_state("eth0").exists);
    EXPECT_EQ(default_gateway("v0"), "192.0.2.254");
  });
  EXPECT_EQ(leftover_links(), "");
}

TEST_F(net_link, KernelErrorsCarryTheExtendedAck) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  auto fd = netlink::open_netlink_in(ns.fd());
  ASSERT_TRUE(fd) << fd.error().to_string();
  auto sock = netlink::Socket::adopt(std::move(*fd));
  ASSERT_TRUE(sock);
  auto lo = netlink::get_link(*sock, "lo");
  ASSERT_TRUE(lo) << lo.error().to_string();
  // A gateway that is not on any connected network of lo.
  auto st = netlink::add_default_route(*sock, *lo, 0xc0000201);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().sys_errno, 0);
  EXPECT_NE(st.error().message.find("RTM_NEWROUTE(default via 192.0.2.1 dev lo): "),
            std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find(": kernel: "), std::string::npos)
      << "no extended ack text: " << st.error().message;

  auto missing = netlink::get_link(*sock, "nosuchif0");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("ENODEV"), std::string::npos) << missing.error().message;
  auto exists = netlink::link_exists(*sock, "nosuchif0");
  ASSERT_TRUE(exists);
  EXPECT_FALSE(*exists);
  auto del = netlink::delete_link(*sock, "nosuchif0");
  ASSERT_FALSE(del);
  EXPECT_EQ(del.error().code, ErrorCode::kNotFound);
}

// open_netlink_in both ways: inline in a single-threaded process, on a
// helper thread in a multi-threaded one; either way the caller's thread
// ends up in its own namespace and the socket works in the target one.
TEST_F(net_link, OpenNetlinkInLeavesTheCallerWhereItWas) {
  NEED_ROOT();
  TestNetns ns;
  ASSERT_GE(ns.fd(), 0) << ns.error();
  struct stat before;
  ASSERT_EQ(stat("/proc/thread-self/ns/net", &before), 0);
  auto check = [&](const char* how) {
    auto fd = netlink::open_netlink_in(ns.fd());
    ASSERT_TRUE(fd) << how << ": " << fd.error().to_string();
    struct stat after;
    ASSERT_EQ(stat("/proc/thread-self/ns/net", &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << how << ": the caller's namespace changed";
    auto sock = netlink::Socket::adopt(std::move(*fd));
    ASSERT_TRUE(sock);
    // The fresh namespace has only lo: no eth0 (which the host has).
    auto eth0 = netlink::link_exists(*sock, "eth0");
    ASSERT_TRUE(eth0);
    EXPECT_FALSE(*eth0) << how << ": the socket is not in the target namespace";
    EXPECT_TRUE(*netlink::link_exists(*sock, "lo"));
  };
  struct stat task;
  ASSERT_EQ(stat("/proc/self/task", &task), 0);
  if (task.st_nlink == 3) {
    check("single-threaded");
  } else {
    std::printf("note: the test process is multi-threaded; the inline path is not exercised\n");
  }
  // Now with a second thread alive.
  int wake[2];
  ASSERT_EQ(pipe2(wake, O_CLOEXEC), 0);
  std::thread other([fd = wake[0]] {
    char c;
    (void)read(fd, &c, 1);
  });
  ASSERT_EQ(stat("/proc/self/task", &task), 0);
  EXPECT_GE(task.st_nlink, 4u);
  check("multi-threaded");
  // IPv6 inside, through the same machinery.
  const std::string host_lo = ipv6_switch("lo");
  auto st = netlink::disable_ipv6_in(ns.fd(), "lo");
  EXPECT_TRUE(st) << st.error().to_string();
  in_netns(ns.fd(), [] { EXPECT_EQ(ipv6_switch("lo"), "1"); });
  EXPECT_EQ(ipv6_switch("lo"), host_lo) << "the host's lo was changed";
  (void)write(wake[1], "x", 1);
  other.join();
  close(wake[0]);
  close(wake[1]);
}

// --- slots -----------------------------------------------------------------

TEST_F(net_link, SlotsAreExclusiveAndFreedWithTheirHolder) {
  NEED_ROOT();
  auto small = NetSlotPool::make("10.219.255.0/29", kSmallPrefix, lock_dir_);  // 2 slots
  ASSERT_TRUE(small) << small.error().to_string();
  auto a = NetSlot::acquire(*small);
  ASSERT_TRUE(a) << a.error().to_string();
  auto b = NetSlot::acquire(*small);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_NE(a->index(), b->index());
  auto c = NetSlot::acquire(*small);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(c.error().message.find("all 2 network slots of 10.219.255.0/29 are in use"),
            std::string::npos)
      << c.error().message;

  // A child inherits b's lock (as a sandbox's init does), then we drop
  // ours: the slot stays taken while the child lives, and is free after.
  const std::uint32_t b_index = b->index();
  const std::string b_lock = b->lock_path();
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Keep b's lock fd (inherited across fork), nothing else.
    close(ready[0]);
    (void)write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char r;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  close(ready[0]);
  b = tl::unexpected<Error>(Error{});  // our copy of the lock fd is closed
  EXPECT_FALSE(lock_is_free(b_lock)) << "the child's inherited lock is gone";
  EXPECT_FALSE(NetSlot::acquire(*small)) << "a slot held by a live child was handed out";

  // Re-taking it: recognised, not re-acquired.
  auto again = NetSlot::reattach(*small, b_index, child);
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_FALSE(again->holds_lock());
  EXPECT_EQ(again->index(), b_index);
  auto wrong_holder = NetSlot::reattach(*small, b_index, getpid());
  ASSERT_FALSE(wrong_holder);
  EXPECT_EQ(wrong_holder.error().code, ErrorCode::kNotFound);
  EXPECT_NE(wrong_holder.error().message.find("held, but not by process"), std::string::npos)
      << wrong_holder.error().message;
  auto unchecked = NetSlot::reattach(*small, b_index);
  EXPECT_TRUE(unchecked) << "without a holder pid, any holder will do";

  kill(child, SIGKILL);
  int status;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(lock_is_free(b_lock));
  auto gone = NetSlot::reattach(*small, b_index, child);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_NE(gone.error().message.find("nobody holds it"), std::string::npos)
      << gone.error().message;
  EXPECT_FALSE(lock_is_free(a->lock_path())) << "reattach's probe must not disturb other slots";
  auto d = NetSlot::acquire(*small);
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->index(), b_index);
}

TEST_F(net_link, ReattachWithoutALockFileIsNotFound) {
  NEED_ROOT();
  auto r = NetSlot::reattach(pool_, 17);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("no lock file"), std::string::npos) << r.error().message;
}

TEST_F(net_link, AFreeSlotWhoseInterfaceLingersIsSkipped) {
  NEED_ROOT();
  auto small = NetSlotPool::make("10.219.255.8/29", kSmallPrefix, lock_dir_);  // 2 slots
  ASSERT_TRUE(small) << small.error().to_string();
  auto sock = netlink::Socket::open();
  ASSERT_TRUE(sock);
  UniqueFd own(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  // Slot 0's interface exists (a namespace the kernel is still tearing
  // down, say), though nobody holds its lock.
  const std::string lingering = std::string(kSmallPrefix) + "0";
  ASSERT_TRUE(netlink::create_veth(*sock, lingering, std::string(kSmallPrefix) + "p0", own.get()));
  auto a = NetSlot::acquire(*small);
  auto b = NetSlot::acquire(*small);
  EXPECT_TRUE(netlink::delete_link(*sock, lingering));
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(a->index(), 1u);
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("1 free ones still have their interface"), std::string::npos)
      << b.error().message;
  EXPECT_TRUE(lock_is_free(lock_dir_ + "/" + lingering)) << "a skipped slot stays locked";
  EXPECT_EQ(leftover_links(), "");
}

}  // namespace
}  // namespace corral::net
