// The firewall on the real nftables, as root, with real traffic (ADR 0005,
// "Firewall"). Every test uses a throwaway table (corral_test_<pid>), an
// interface prefix of its own (cfw<pid in hex>) and ports derived from its
// pid, never the real `inet corral` table, and never flushes anything.
//
// The traffic tests build "sandboxes" by hand: a network namespace (made by
// a thread that unshares, held by an fd), a veth pair named with the test
// prefix (host end 10.214.0.4k+1/30, inside 10.214.0.4k+2/30 with a default
// route), configured with `ip` (the real plumbing is src/netns's netlink code,
// tested on its own). Sockets inside are made by a thread that setns()es into
// the namespace: a socket stays in the namespace it was created in. Each
// test first checks without the firewall that the traffic it expects to be
// blocked does get through (so that a block is the firewall's doing), then
// installs the table and checks again, with the counters.
//
// The tests of this file hold a lock (an abstract unix socket) so that two
// runs (the two builds, ctest -j) never use the 10.214.0.x addresses at the
// same time. Namespaces, links and tables go at the end of each test, also
// when it fails.
#include "egress/firewall.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netfilter_ipv4.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/scope_guard.h"
#include "base/unique_fd.h"
#include "support/sandbox_harness.h"

namespace corral::net {
namespace {

using nlohmann::json;

constexpr int kArriveMs = 3000;  // how long something that must arrive may take
constexpr int kBlockedMs = 400;  // how long we wait for something that must not arrive

const char* ip_tool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return nullptr;
}

// ---- commands -----------------------------------------------------------------

struct CmdResult {
  int status = -1;
  std::string output;  // stdout and stderr
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs args (args[0] an absolute path), in the network namespace `netns` if
// it is >= 0.
CmdResult run_cmd(const std::vector<std::string>& args, int netns = -1) {
  CmdResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return r;
  UniqueFd rd(fds[0]), wr(fds[1]);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    if (netns >= 0 && setns(netns, CLONE_NEWNET) != 0) _exit(126);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(wr.get(), 1) < 0 || dup2(wr.get(), 2) < 0) {
      _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  wr.reset();
  char buf[4096];
  for (;;) {
    ssize_t n = read(rd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

std::string describe(const std::vector<std::string>& args, const CmdResult& r) {
  std::string s;
  for (const auto& a : args) s += a + " ";
  return s + "-> status " + std::to_string(r.status) + ": " + r.output;
}

CmdResult nft(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/sbin/nft");
  return run_cmd(args);
}

// ---- namespaces -----------------------------------------------------------------

// Runs fn in a thread whose network namespace is `netns` (the host's if -1).
template <typename F>
auto in_netns(int netns, F fn) -> decltype(fn()) {
  decltype(fn()) result{};
  int setns_errno = 0;
  std::thread t([&] {
    if (netns >= 0 && setns(netns, CLONE_NEWNET) != 0) {
      setns_errno = errno;
      return;
    }
    result = fn();
  });
  t.join();
  if (setns_errno != 0) ADD_FAILURE() << "setns(CLONE_NEWNET): " << strerror(setns_errno);
  return result;
}

// A new network namespace, alive as long as the fd (and the sockets made in
// it) are.
UniqueFd new_netns() {
  int fd = -1;
  std::thread t([&] {
    if (unshare(CLONE_NEWNET) != 0) return;
    fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  });
  t.join();
  return UniqueFd(fd);
}

bool write_file(const std::string& path, const std::string& value) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  return fd && write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size());
}

std::string read_file(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[256];
  ssize_t n = fd ? read(fd.get(), buf, sizeof buf) : -1;
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// ---- sockets -----------------------------------------------------------------

sockaddr_in v4(const std::string& ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}
sockaddr_in6 v6(const std::string& ip, std::uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip.c_str(), &a.sin6_addr);
  return a;
}
std::string str(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}
std::uint16_t local_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

UniqueFd make_socket(int netns, int domain, int type, int proto = 0) {
  return UniqueFd(in_netns(netns, [&] { return socket(domain, type | SOCK_CLOEXEC, proto); }));
}

template <typename Addr>
UniqueFd bound(int netns, int type, const Addr& addr) {
  UniqueFd fd = make_socket(netns, reinterpret_cast<const sockaddr*>(&addr)->sa_family, type);
  if (!fd) return fd;
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "bind: " << strerror(errno);
    return UniqueFd();
  }
  if (type == SOCK_STREAM && listen(fd.get(), 16) != 0) return UniqueFd();
  return fd;
}

bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

// 0 once connected, else the error (ETIMEDOUT if nothing happened in `ms`).
template <typename Addr>
int tcp_connect(int fd, const Addr& to, int ms = kArriveMs) {
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, ms) != 1) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  fcntl(fd, F_SETFL, flags);
  return err;
}

UniqueFd accept_within(int listener, int ms) {
  if (!readable_within(listener, ms)) return UniqueFd();
  return UniqueFd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

struct Datagram {
  std::string data;
  sockaddr_in6 from{};  // or a sockaddr_in
  std::string from4() const { return str(*reinterpret_cast<const sockaddr_in*>(&from)); }
};
std::optional<Datagram> recv_within(int fd, int ms) {
  if (!readable_within(fd, ms)) return std::nullopt;
  Datagram d;
  char buf[2048];
  socklen_t len = sizeof d.from;
  ssize_t n = recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&d.from), &len);
  if (n < 0) return std::nullopt;
  d.data.assign(buf, static_cast<std::size_t>(n));
  return d;
}

template <typename Addr>
bool send_to(int fd, const Addr& to, const std::string& data) {
  return sendto(fd, data.data(), data.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                sizeof to) == static_cast<ssize_t>(data.size());
}

std::uint16_t icmp_checksum(const unsigned char* p, std::size_t n) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  if (n % 2) sum += p[n - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum);
}

// Sends an ICMP echo request from `netns` to `dst`; whether the reply came.
bool ping(int netns, const std::string& dst, std::uint16_t id, int ms) {
  UniqueFd fd = make_socket(netns, AF_INET, SOCK_RAW, IPPROTO_ICMP);
  if (!fd) {
    ADD_FAILURE() << "socket(SOCK_RAW, IPPROTO_ICMP): " << strerror(errno);
    return false;
  }
  unsigned char pkt[16] = {ICMP_ECHO,
                           0,
                           0,
                           0,
                           static_cast<unsigned char>(id >> 8),
                           static_cast<unsigned char>(id),
                           0,
                           1,
                           'c',
                           'o',
                           'r',
                           'r',
                           'a',
                           'l'};
  std::uint16_t sum = icmp_checksum(pkt, sizeof pkt);
  pkt[2] = static_cast<unsigned char>(sum >> 8);
  pkt[3] = static_cast<unsigned char>(sum);
  sockaddr_in to = v4(dst, 0);
  if (sendto(fd.get(), pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
    return false;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0 || !readable_within(fd.get(), static_cast<int>(left))) return false;
    unsigned char buf[1500];
    sockaddr_in from{};
    socklen_t len = sizeof from;
    ssize_t n = recvfrom(fd.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
    if (n < 20) continue;
    std::size_t ihl = (buf[0] & 0x0f) * 4u;
    if (static_cast<std::size_t>(n) < ihl + 8) continue;
    const unsigned char* icmp = buf + ihl;
    if (icmp[0] == ICMP_ECHOREPLY && ((icmp[4] << 8) | icmp[5]) == id &&
        from.sin_addr.s_addr == to.sin_addr.s_addr) {
      return true;
    }
  }
}

// ---- the lock between runs -------------------------------------------------------

class TestLock {
 public:
  // Binds an abstract unix socket: only one process can, and the kernel
  // lets go of it when the process ends, however it ends.
  bool acquire() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < deadline) {
      UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      const char name[] = "corral-firewall-integration-test";
      std::memcpy(a.sun_path + 1, name, sizeof name - 1);
      socklen_t len = offsetof(sockaddr_un, sun_path) + 1 + sizeof name - 1;
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) == 0) {
        fd_ = std::move(fd);
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  UniqueFd fd_;
};

// ---- the "sandboxes" ----------------------------------------------------------------

struct Box {
  std::string host_if;    // host end
  std::string host_ip;    // 10.214.0.4k+1
  std::string inside_ip;  // 10.214.0.4k+2
  UniqueFd ns;
};

// Links and namespaces made by one test, removed at its end (teardown()
// reports what could not be removed).
class Topology {
 public:
  ~Topology() { teardown(); }

  // A namespace with lo up and eth0 (the peer of `host_if`) addressed
  // 10.214.0.<4k+2>/30, default route via the host end 10.214.0.<4k+1>/30.
  // IPv6 is off on both ends (the IPv6 test turns it on). With `forwarding`
  // the host routes packets that come in on the host end (only there: the
  // host's other interfaces are not touched).
  Box* add(const std::string& host_if, int k, bool forwarding) {
    const std::string ip = ip_tool();
    auto box = std::make_unique<Box>();
    box->host_if = host_if;
    box->host_ip = "10.214.0." + std::to_string(4 * k + 1);
    box->inside_ip = "10.214.0." + std::to_string(4 * k + 2);
    box->ns = new_netns();
    if (!box->ns) {
      ADD_FAILURE() << "unshare(CLONE_NEWNET): " << strerror(errno);
      return nullptr;
    }
    const std::string ns_path =
        "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(box->ns.get());
    std::vector<std::string> add = {ip,     "link", "add",  host_if, "type", "veth",
                                    "peer", "name", "eth0", "netns", ns_path};
    CmdResult r = run_cmd(add);
    if (!r.ok()) {
      ADD_FAILURE() << describe(add, r);
      return nullptr;
    }
    links_.push_back(host_if);
    write_file("/proc/sys/net/ipv6/conf/" + host_if + "/disable_ipv6", "1");
    in_netns(box->ns.get(),
             [] { return write_file("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "1"); });
    if (forwarding && !write_file("/proc/sys/net/ipv4/conf/" + host_if + "/forwarding", "1")) {
      ADD_FAILURE() << "enabling forwarding on " << host_if;
      return nullptr;
    }
    const std::vector<std::pair<std::vector<std::string>, int>> steps = {
        {{ip, "addr", "add", box->host_ip + "/30", "dev", host_if}, -1},
        {{ip, "link", "set", host_if, "up"}, -1},
        {{ip, "link", "set", "lo", "up"}, box->ns.get()},
        {{ip, "addr", "add", box->inside_ip + "/30", "dev", "eth0"}, box->ns.get()},
        {{ip, "link", "set", "eth0", "up"}, box->ns.get()},
        {{ip, "route", "add", "default", "via", box->host_ip}, box->ns.get()},
    };
    for (const auto& [args, ns] : steps) {
      CmdResult step = run_cmd(args, ns);
      if (!step.ok()) {
        ADD_FAILURE() << describe(args, step);
        return nullptr;
      }
    }
    boxes_.push_back(std::move(box));
    return boxes_.back().get();
  }

  // Deletes the links and drops the namespaces; the names of links that are
  // still there afterwards.
  std::vector<std::string> teardown() {
    std::vector<std::string> left;
    for (const auto& link : links_) {
      if (if_nametoindex(link.c_str()) != 0) run_cmd({ip_tool(), "link", "del", link});
      if (if_nametoindex(link.c_str()) != 0) left.push_back(link);
    }
    links_.clear();
    boxes_.clear();
    return left;
  }

 private:
  std::vector<std::string> links_;
  std::vector<std::unique_ptr<Box>> boxes_;
};

// ---- fixtures ----------------------------------------------------------------------

// Deletes corral_test_<pid> tables whose process is gone (a run that was
// killed before its cleanup).
void remove_stale_test_tables() {
  CmdResult r = nft({"-j", "list", "tables", "inet"});
  if (!r.ok()) return;
  json doc = json::parse(r.output, nullptr, false);
  if (!doc.is_object() || !doc.contains("nftables") || !doc["nftables"].is_array()) return;
  for (const json& item : doc["nftables"]) {
    if (!item.is_object() || !item.contains("table") || !item["table"].is_object()) continue;
    const json& name = item["table"]["name"];
    if (!name.is_string()) continue;
    std::string n = name.get<std::string>();
    const std::string prefix = "corral_test_";
    if (n.rfind(prefix, 0) != 0) continue;
    pid_t pid = static_cast<pid_t>(std::atol(n.c_str() + prefix.size()));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) nft({"delete", "table", "inet", n});
  }
}

class FirewallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the firewall tests run as root");
    if (access("/usr/sbin/nft", X_OK) != 0) CORRAL_SKIP_OR_FAIL("nft is not installed");
    ASSERT_TRUE(lock_.acquire()) << "another firewall test run held the lock for 5 minutes";
    remove_stale_test_tables();
    const pid_t pid = getpid();
    char prefix[16];
    std::snprintf(prefix, sizeof prefix, "cfw%06x", static_cast<unsigned>(pid) & 0xffffffu);
    config_.table = "corral_test_" + std::to_string(pid);
    config_.iface_prefix = prefix;
    // Below the ephemeral range, away from the defaults, different per run.
    config_.proxy_port = static_cast<std::uint16_t>(20000 + (pid % 4000) * 2);
    config_.dns_port = static_cast<std::uint16_t>(config_.proxy_port + 1);
    armed_ = true;
  }
  void TearDown() override {
    if (!armed_) return;
    std::vector<std::string> left = topo_.teardown();
    EXPECT_TRUE(left.empty()) << "links left behind: " << left.front();
    auto removed = remove_firewall(config_);
    EXPECT_TRUE(removed) << removed.error().to_string();
    auto installed = firewall_installed(config_);
    ASSERT_TRUE(installed) << installed.error().to_string();
    EXPECT_FALSE(*installed) << "table inet " << config_.table << " left behind";
  }

  void install() {
    auto s = install_firewall(config_);
    ASSERT_TRUE(s) << s.error().to_string();
    auto installed = firewall_installed(config_);
    ASSERT_TRUE(installed) << installed.error().to_string();
    ASSERT_TRUE(*installed);
  }
  FirewallCounters counters() {
    auto c = read_firewall_counters(config_);
    EXPECT_TRUE(c) << c.error().to_string();
    return c ? *c : FirewallCounters{};
  }
  std::uint64_t grew(const FirewallCounters& before, std::string_view name) {
    return counters().get(name).packets - before.get(name).packets;
  }
  std::string sandbox_if(char c) { return config_.iface_prefix + c; }
  // Not a sandbox's: does not start with the prefix.
  std::string outside_if() { return "cfo" + config_.iface_prefix.substr(3) + "o"; }

  FirewallConfig config_;
  Topology topo_;

 private:
  TestLock lock_;
  bool armed_ = false;
};

// ---- the table itself -----------------------------------------------------------------

TEST_F(FirewallTest, InstallCheckReadRemove) {
  auto before = firewall_installed(config_);
  ASSERT_TRUE(before) << before.error().to_string();
  EXPECT_FALSE(*before);

  install();
  auto c = read_firewall_counters(config_);
  ASSERT_TRUE(c) << c.error().to_string();
  for (const auto& info : kFirewallCounters) {
    ASSERT_TRUE(c->by_name.contains(info.name)) << info.name;
    EXPECT_EQ(c->get(info.name).packets, 0u) << info.name;
  }
  EXPECT_EQ(c->by_name.size(), std::size(kFirewallCounters));

  ASSERT_TRUE(remove_firewall(config_));
  auto after = firewall_installed(config_);
  ASSERT_TRUE(after) << after.error().to_string();
  EXPECT_FALSE(*after);
  auto gone = read_firewall_counters(config_);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(remove_firewall(config_)) << "removing a missing table is fine";
}

TEST_F(FirewallTest, InstallTwiceReplacesAndRepairs) {
  install();
  install();
  CmdResult tables = nft({"list", "tables", "inet"});
  ASSERT_TRUE(tables.ok()) << tables.output;
  std::size_t n = 0;
  for (std::size_t pos = tables.output.find("table inet " + config_.table + "\n");
       pos != std::string::npos;
       pos = tables.output.find("table inet " + config_.table + "\n", pos + 1)) {
    ++n;
  }
  EXPECT_EQ(n, 1u) << tables.output;

  // A damaged table (here: the forward chain emptied) is seen as not
  // installed, and installing again restores it.
  CmdResult flush = nft({"flush", "chain", "inet", config_.table, "forward"});
  ASSERT_TRUE(flush.ok()) << flush.output;
  auto damaged = firewall_installed(config_);
  ASSERT_TRUE(damaged) << damaged.error().to_string();
  EXPECT_FALSE(*damaged);
  install();
  CmdResult forward = nft({"list", "chain", "inet", config_.table, "forward"});
  EXPECT_NE(forward.output.find("drop_forward"), std::string::npos) << forward.output;
}

// The same shape with other rules (another corral's ports) is not "this
// firewall": the fingerprint chain tells them apart, so an owner replaces
// it instead of trusting it.
TEST_F(FirewallTest, ADifferentRulesetIsNotTakenForThisOne) {
  install();
  auto same = firewall_installed(config_);
  ASSERT_TRUE(same) << same.error().to_string();
  EXPECT_TRUE(*same);
  FirewallConfig other = config_;
  other.proxy_port = static_cast<std::uint16_t>(config_.proxy_port + 2);
  auto different = firewall_installed(other);
  ASSERT_TRUE(different) << different.error().to_string();
  EXPECT_FALSE(*different);
}

TEST_F(FirewallTest, BrokenNftIsAClearError) {
  FirewallConfig broken = config_;
  broken.nft = "/nonexistent/corral-test/nft";
  auto s = install_firewall(broken);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("installing firewall table inet " + config_.table),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("exec /nonexistent/corral-test/nft"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("ENOENT"), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().hint.find("nftables"), std::string::npos) << s.error().hint;
  EXPECT_FALSE(firewall_installed(broken));
  EXPECT_FALSE(read_firewall_counters(broken));

  broken.nft = "/bin/false";
  s = install_firewall(broken);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("exit status 1"), std::string::npos) << s.error().message;

  // What the program says on stderr is in the message: `/bin/sh -f -` runs
  // the script as shell commands and complains "table: not found".
  broken.nft = "/bin/sh";
  s = install_firewall(broken);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("not found"), std::string::npos) << s.error().message;

  auto installed = firewall_installed(config_);
  ASSERT_TRUE(installed) << installed.error().to_string();
  EXPECT_FALSE(*installed) << "a failed install leaves no table";
}

TEST_F(FirewallTest, OtherTablesAreLeftAlone) {
  const std::string other = "corral_other_" + std::to_string(getpid());
  ScopeGuard drop_other([&] { nft({"delete", "table", "inet", other}); });
  CmdResult made = run_cmd({"/bin/sh", "-c",
                            "printf 'table inet " + other +
                                " {\\n chain c {\\n type filter hook input priority 0; policy "
                                "accept;\\n tcp dport 9 counter accept\\n }\\n}\\n' | "
                                "/usr/sbin/nft -f -"});
  ASSERT_TRUE(made.ok()) << made.output;
  CmdResult before = nft({"list", "table", "inet", other});
  ASSERT_TRUE(before.ok()) << before.output;

  install();
  install();
  ASSERT_TRUE(remove_firewall(config_));
  CmdResult after = nft({"list", "table", "inet", other});
  ASSERT_TRUE(after.ok()) << after.output;
  EXPECT_EQ(after.output, before.output);
}

// ---- with traffic ----------------------------------------------------------------------

class FirewallTrafficTest : public FirewallTest {
 protected:
  void SetUp() override {
    FirewallTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (ip_tool() == nullptr) CORRAL_SKIP_OR_FAIL("iproute2 (ip) is not installed");
  }
};

TEST_F(FirewallTrafficTest, TcpGoesToTheProxyWithItsOriginalDestination) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  ASSERT_NE(a, nullptr);
  UniqueFd proxy = bound(-1, SOCK_STREAM, v4(a->host_ip, config_.proxy_port));
  UniqueFd service = bound(-1, SOCK_STREAM, v4(a->host_ip, 0));  // a host service
  ASSERT_TRUE(proxy && service);
  const std::uint16_t service_port = local_port(service.get());

  // Without the firewall the sandbox reaches the host service.
  {
    UniqueFd c = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), v4(a->host_ip, service_port)), 0);
    ASSERT_TRUE(accept_within(service.get(), kArriveMs)) << "control: host service unreachable";
  }

  install();
  FirewallCounters before = counters();

  // Any destination ends at the proxy, which learns it from SO_ORIGINAL_DST.
  UniqueFd c = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
  ASSERT_EQ(tcp_connect(c.get(), v4("203.0.113.7", 80)), 0);
  UniqueFd conn = accept_within(proxy.get(), kArriveMs);
  ASSERT_TRUE(conn) << "TCP to 203.0.113.7:80 did not reach the proxy";
  sockaddr_in orig{}, peer{};
  socklen_t len = sizeof orig;
  ASSERT_EQ(getsockopt(conn.get(), SOL_IP, SO_ORIGINAL_DST, &orig, &len), 0) << strerror(errno);
  EXPECT_EQ(str(orig), "203.0.113.7:80");
  len = sizeof peer;
  ASSERT_EQ(getpeername(conn.get(), reinterpret_cast<sockaddr*>(&peer), &len), 0);
  EXPECT_EQ(str(peer).substr(0, a->inside_ip.size() + 1), a->inside_ip + ":");
  // Bytes flow both ways, and the sandbox sees the address it asked for.
  ASSERT_EQ(write(c.get(), "hello", 5), 5);
  char buf[8] = {};
  ASSERT_TRUE(readable_within(conn.get(), kArriveMs));
  ASSERT_EQ(read(conn.get(), buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_EQ(write(conn.get(), "olleh", 5), 5);
  ASSERT_TRUE(readable_within(c.get(), kArriveMs));
  ASSERT_EQ(read(c.get(), buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "olleh");
  len = sizeof peer;
  ASSERT_EQ(getpeername(c.get(), reinterpret_cast<sockaddr*>(&peer), &len), 0);
  EXPECT_EQ(str(peer), "203.0.113.7:80");

  // The host end itself, on the port of a host service: the proxy again,
  // never the service. TCP 53 goes to the proxy too.
  for (std::uint16_t port : {service_port, std::uint16_t{53}}) {
    UniqueFd d = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(d.get(), v4(a->host_ip, port)), 0) << port;
    UniqueFd dconn = accept_within(proxy.get(), kArriveMs);
    ASSERT_TRUE(dconn) << "TCP to the host end's port " << port << " did not reach the proxy";
    len = sizeof orig;
    ASSERT_EQ(getsockopt(dconn.get(), SOL_IP, SO_ORIGINAL_DST, &orig, &len), 0);
    EXPECT_EQ(str(orig), a->host_ip + ":" + std::to_string(port));
  }
  EXPECT_FALSE(accept_within(service.get(), kBlockedMs)) << "the host service was reached";
  EXPECT_GE(grew(before, "redirect_tcp"), 3u);
}

TEST_F(FirewallTrafficTest, DnsGoesToTheDnsPortAndOtherUdpIsDropped) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  ASSERT_NE(a, nullptr);
  UniqueFd dns = bound(-1, SOCK_DGRAM, v4(a->host_ip, config_.dns_port));
  UniqueFd service = bound(-1, SOCK_DGRAM, v4(a->host_ip, 0));  // a host UDP service
  ASSERT_TRUE(dns && service);
  const std::uint16_t service_port = local_port(service.get());
  {
    UniqueFd u = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
    ASSERT_TRUE(send_to(u.get(), v4(a->host_ip, service_port), "control"));
    ASSERT_TRUE(recv_within(service.get(), kArriveMs)) << "control: host UDP service unreachable";
  }

  install();
  FirewallCounters before = counters();

  UniqueFd u = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
  ASSERT_TRUE(send_to(u.get(), v4("9.9.9.9", 53), "query"));
  auto q = recv_within(dns.get(), kArriveMs);
  ASSERT_TRUE(q) << "UDP to 9.9.9.9:53 did not reach the DNS port";
  EXPECT_EQ(q->data, "query");
  EXPECT_EQ(q->from4().substr(0, a->inside_ip.size() + 1), a->inside_ip + ":");
  // The answer comes back from the address the sandbox asked.
  ASSERT_TRUE(send_to(dns.get(), *reinterpret_cast<sockaddr_in*>(&q->from), "answer"));
  auto answer = recv_within(u.get(), kArriveMs);
  ASSERT_TRUE(answer) << "the DNS answer did not come back";
  EXPECT_EQ(answer->data, "answer");
  EXPECT_EQ(answer->from4(), "9.9.9.9:53");
  EXPECT_GE(grew(before, "redirect_dns"), 1u);

  // Other UDP, to the world or to the host, is dropped and counted.
  before = counters();
  UniqueFd v = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
  ASSERT_TRUE(send_to(v.get(), v4("9.9.9.9", 123), "ntp"));
  ASSERT_TRUE(send_to(v.get(), v4(a->host_ip, service_port), "direct"));
  ASSERT_TRUE(send_to(v.get(), v4(a->host_ip, config_.dns_port), "dns port, not 53"));
  EXPECT_FALSE(recv_within(service.get(), kBlockedMs)) << "UDP reached a host service";
  EXPECT_FALSE(recv_within(dns.get(), 0)) << "UDP to the DNS port itself got there";
  EXPECT_EQ(grew(before, "drop_udp"), 3u);
}

TEST_F(FirewallTrafficTest, IcmpAndOtherProtocolsAreDropped) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  ASSERT_NE(a, nullptr);
  constexpr int kProto = 253;  // "for experimentation" (RFC 3692)
  UniqueFd raw = make_socket(-1, AF_INET, SOCK_RAW, kProto);
  UniqueFd raw_in = make_socket(a->ns.get(), AF_INET, SOCK_RAW, kProto);
  ASSERT_TRUE(raw && raw_in) << strerror(errno);
  auto other_protocol_arrives = [&](const std::string& tag) {
    if (!send_to(raw_in.get(), v4(a->host_ip, 0), tag)) return false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBlockedMs);
    while (std::chrono::steady_clock::now() < deadline) {
      auto d = recv_within(raw.get(), 50);
      if (d && d->data.find(tag) != std::string::npos) return true;
    }
    return false;
  };
  const auto id = static_cast<std::uint16_t>(getpid());
  ASSERT_TRUE(ping(a->ns.get(), a->host_ip, id, kArriveMs)) << "control: no echo reply";
  ASSERT_TRUE(other_protocol_arrives("control-253")) << "control: protocol 253 lost";

  install();
  FirewallCounters before = counters();
  EXPECT_FALSE(ping(a->ns.get(), a->host_ip, id + 1, kBlockedMs)) << "the host end answered";
  EXPECT_FALSE(ping(a->ns.get(), "203.0.113.7", id + 2, kBlockedMs));
  EXPECT_EQ(grew(before, "drop_icmp"), 2u);
  EXPECT_FALSE(other_protocol_arrives("blocked-253"));
  EXPECT_GE(grew(before, "drop_other"), 1u);
}

TEST_F(FirewallTrafficTest, SpoofedSourcesAreDropped) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  ASSERT_NE(a, nullptr);
  const std::string spoofed = "192.0.2.77";  // not routed back through the host end
  CmdResult add = run_cmd({ip_tool(), "addr", "add", spoofed + "/32", "dev", "eth0"}, a->ns.get());
  ASSERT_TRUE(add.ok()) << add.output;
  UniqueFd proxy = bound(-1, SOCK_STREAM, v4(a->host_ip, config_.proxy_port));
  UniqueFd dns = bound(-1, SOCK_DGRAM, v4(a->host_ip, config_.dns_port));
  UniqueFd service = bound(-1, SOCK_DGRAM, v4(a->host_ip, 0));
  ASSERT_TRUE(proxy && dns && service);
  const std::uint16_t service_port = local_port(service.get());
  // The kernel's own reverse-path filter is off on the host end, so the
  // control shows that only the firewall stops these (unless rp_filter is on
  // for all interfaces: then the kernel drops them too, after our check).
  ASSERT_TRUE(write_file("/proc/sys/net/ipv4/conf/" + a->host_if + "/rp_filter", "0"));
  if (read_file("/proc/sys/net/ipv4/conf/all/rp_filter") == "0\n") {
    UniqueFd u = bound(a->ns.get(), SOCK_DGRAM, v4(spoofed, 0));
    ASSERT_TRUE(send_to(u.get(), v4(a->host_ip, service_port), "control"));
    ASSERT_TRUE(recv_within(service.get(), kArriveMs)) << "control: spoofed UDP lost anyway";
  }

  install();
  FirewallCounters before = counters();
  UniqueFd u = bound(a->ns.get(), SOCK_DGRAM, v4(spoofed, 0));
  ASSERT_TRUE(send_to(u.get(), v4("9.9.9.9", 53), "spoofed query"));
  ASSERT_TRUE(send_to(u.get(), v4(a->host_ip, service_port), "spoofed direct"));
  UniqueFd tcp = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
  sockaddr_in src = v4(spoofed, 0);
  ASSERT_EQ(bind(tcp.get(), reinterpret_cast<sockaddr*>(&src), sizeof src), 0);
  EXPECT_NE(tcp_connect(tcp.get(), v4("203.0.113.7", 80), kBlockedMs), 0);
  EXPECT_FALSE(recv_within(dns.get(), 0)) << "a spoofed query reached the DNS port";
  EXPECT_FALSE(recv_within(service.get(), 0)) << "spoofed UDP reached a host service";
  EXPECT_FALSE(accept_within(proxy.get(), 0)) << "a spoofed SYN reached the proxy";
  EXPECT_GE(grew(before, "drop_spoofed"), 3u);
  EXPECT_EQ(grew(before, "redirect_tcp"), 0u);
  EXPECT_EQ(grew(before, "redirect_dns"), 0u);
}

TEST_F(FirewallTrafficTest, Ipv6IsDropped) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  ASSERT_NE(a, nullptr);
  const std::string host6 = "fd00:214::1", inside6 = "fd00:214::2";
  bool v6_on = write_file("/proc/sys/net/ipv6/conf/" + a->host_if + "/disable_ipv6", "0") &&
               in_netns(a->ns.get(), [] {
                 return write_file("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "0");
               });
  CmdResult h =
      run_cmd({ip_tool(), "-6", "addr", "add", host6 + "/64", "dev", a->host_if, "nodad"});
  CmdResult i = run_cmd({ip_tool(), "-6", "addr", "add", inside6 + "/64", "dev", "eth0", "nodad"},
                        a->ns.get());
  if (!v6_on || !h.ok() || !i.ok()) {
    CORRAL_SKIP_OR_FAIL("IPv6 addresses cannot be set on a veth here: " + h.output + i.output);
  }
  UniqueFd service = bound(-1, SOCK_DGRAM, v6(host6, 0));
  UniqueFd listener = bound(-1, SOCK_STREAM, v6(host6, 0));
  ASSERT_TRUE(service && listener);
  const std::uint16_t udp_port = local_port(service.get());
  const std::uint16_t tcp_port = local_port(listener.get());
  {
    UniqueFd u = make_socket(a->ns.get(), AF_INET6, SOCK_DGRAM);
    ASSERT_TRUE(send_to(u.get(), v6(host6, udp_port), "control"));
    ASSERT_TRUE(recv_within(service.get(), kArriveMs)) << "control: IPv6 UDP lost";
    UniqueFd c = make_socket(a->ns.get(), AF_INET6, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), v6(host6, tcp_port)), 0) << "control: IPv6 TCP";
    ASSERT_TRUE(accept_within(listener.get(), kArriveMs));
  }

  install();
  FirewallCounters before = counters();
  UniqueFd u = make_socket(a->ns.get(), AF_INET6, SOCK_DGRAM);
  ASSERT_TRUE(send_to(u.get(), v6(host6, udp_port), "blocked"));
  UniqueFd c = make_socket(a->ns.get(), AF_INET6, SOCK_STREAM);
  EXPECT_NE(tcp_connect(c.get(), v6(host6, tcp_port), kBlockedMs), 0);
  EXPECT_FALSE(recv_within(service.get(), 0)) << "IPv6 UDP got through";
  EXPECT_FALSE(accept_within(listener.get(), 0)) << "IPv6 TCP got through";
  EXPECT_GE(grew(before, "drop_ipv6"), 2u);
}

TEST_F(FirewallTrafficTest, SandboxesCannotReachEachOther) {
  // Forwarding is on for both host ends, so without the firewall the host
  // routes between them (the control below).
  Box* a = topo_.add(sandbox_if('a'), 0, true);
  Box* b = topo_.add(sandbox_if('b'), 1, true);
  ASSERT_TRUE(a && b);
  UniqueFd proxy_a = bound(-1, SOCK_STREAM, v4(a->host_ip, config_.proxy_port));
  UniqueFd proxy_b = bound(-1, SOCK_STREAM, v4(b->host_ip, config_.proxy_port));
  UniqueFd dns_a = bound(-1, SOCK_DGRAM, v4(a->host_ip, config_.dns_port));
  UniqueFd dns_b = bound(-1, SOCK_DGRAM, v4(b->host_ip, config_.dns_port));
  UniqueFd tcp_b = bound(b->ns.get(), SOCK_STREAM, v4(b->inside_ip, 0));
  UniqueFd udp_b = bound(b->ns.get(), SOCK_DGRAM, v4(b->inside_ip, 0));
  ASSERT_TRUE(proxy_a && proxy_b && dns_a && dns_b && tcp_b && udp_b);
  const std::uint16_t tcp_port = local_port(tcp_b.get()), udp_port = local_port(udp_b.get());
  {
    UniqueFd c = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), v4(b->inside_ip, tcp_port)), 0) << "control: A to B";
    ASSERT_TRUE(accept_within(tcp_b.get(), kArriveMs)) << "control: A to B";
    UniqueFd u = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
    ASSERT_TRUE(send_to(u.get(), v4(b->inside_ip, udp_port), "control"));
    ASSERT_TRUE(recv_within(udp_b.get(), kArriveMs)) << "control: A to B (UDP)";
  }

  install();
  FirewallCounters before = counters();
  // TCP to B, or to B's host end on the proxy port, ends at A's own proxy.
  for (const sockaddr_in& to : {v4(b->inside_ip, tcp_port), v4(b->host_ip, config_.proxy_port)}) {
    UniqueFd c = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), to), 0) << str(to);
    UniqueFd conn = accept_within(proxy_a.get(), kArriveMs);
    ASSERT_TRUE(conn) << str(to) << " did not end at A's proxy";
    sockaddr_in orig{};
    socklen_t len = sizeof orig;
    ASSERT_EQ(getsockopt(conn.get(), SOL_IP, SO_ORIGINAL_DST, &orig, &len), 0);
    EXPECT_EQ(str(orig), str(to));
  }
  // DNS to B's host end is A's DNS.
  UniqueFd q = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
  ASSERT_TRUE(send_to(q.get(), v4(b->host_ip, 53), "query"));
  EXPECT_TRUE(recv_within(dns_a.get(), kArriveMs)) << "DNS to B's host end did not reach A's";
  // Other UDP to B is dropped.
  UniqueFd u = make_socket(a->ns.get(), AF_INET, SOCK_DGRAM);
  ASSERT_TRUE(send_to(u.get(), v4(b->inside_ip, udp_port), "blocked"));
  EXPECT_FALSE(recv_within(udp_b.get(), kBlockedMs)) << "A's UDP reached B";
  EXPECT_FALSE(accept_within(tcp_b.get(), 0)) << "A's TCP reached B";
  EXPECT_FALSE(accept_within(proxy_b.get(), 0)) << "A reached B's proxy";
  EXPECT_FALSE(recv_within(dns_b.get(), 0)) << "A reached B's DNS";
  EXPECT_EQ(grew(before, "drop_udp"), 1u);
}

TEST_F(FirewallTrafficTest, NothingIsForwardedToASandbox) {
  // O is a network of the host that is not a sandbox (its interface does not
  // start with the prefix), and the host routes for it.
  Box* a = topo_.add(sandbox_if('a'), 0, true);
  Box* o = topo_.add(outside_if(), 2, true);
  ASSERT_TRUE(a && o);
  UniqueFd tcp_a = bound(a->ns.get(), SOCK_STREAM, v4(a->inside_ip, 0));
  UniqueFd udp_a = bound(a->ns.get(), SOCK_DGRAM, v4(a->inside_ip, 0));
  ASSERT_TRUE(tcp_a && udp_a);
  const std::uint16_t tcp_port = local_port(tcp_a.get()), udp_port = local_port(udp_a.get());
  {
    UniqueFd c = make_socket(o->ns.get(), AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), v4(a->inside_ip, tcp_port)), 0) << "control: O to A";
    ASSERT_TRUE(accept_within(tcp_a.get(), kArriveMs)) << "control: O to A";
  }

  install();
  FirewallCounters before = counters();
  UniqueFd c = make_socket(o->ns.get(), AF_INET, SOCK_STREAM);
  EXPECT_NE(tcp_connect(c.get(), v4(a->inside_ip, tcp_port), kBlockedMs), 0);
  UniqueFd u = make_socket(o->ns.get(), AF_INET, SOCK_DGRAM);
  ASSERT_TRUE(send_to(u.get(), v4(a->inside_ip, udp_port), "blocked"));
  EXPECT_FALSE(recv_within(udp_a.get(), kBlockedMs)) << "O's UDP reached A";
  EXPECT_FALSE(accept_within(tcp_a.get(), 0)) << "O's TCP reached A";
  EXPECT_GE(grew(before, "drop_forward"), 2u);
}

TEST_F(FirewallTrafficTest, ProxyAndDnsPortsRefuseOtherInterfaces) {
  Box* a = topo_.add(sandbox_if('a'), 0, false);
  Box* o = topo_.add(outside_if(), 2, false);
  ASSERT_TRUE(a && o);
  // The owner's listeners on A's host end, and (as if it had one there)
  // on O's.
  UniqueFd proxy_a = bound(-1, SOCK_STREAM, v4(a->host_ip, config_.proxy_port));
  UniqueFd proxy_o = bound(-1, SOCK_STREAM, v4(o->host_ip, config_.proxy_port));
  UniqueFd dns_a = bound(-1, SOCK_DGRAM, v4(a->host_ip, config_.dns_port));
  UniqueFd dns_o = bound(-1, SOCK_DGRAM, v4(o->host_ip, config_.dns_port));
  ASSERT_TRUE(proxy_a && proxy_o && dns_a && dns_o);
  struct Attempt {
    std::string what;
    int ns;  // where from (-1: the host)
    std::string to;
    int listener;
    int dgram;
  };
  // From O's network, and from the host itself (through lo): a host process
  // must not talk to the proxy as if it were a sandbox.
  const Attempt attempts[] = {
      {"O to its host end", o->ns.get(), o->host_ip, proxy_o.get(), dns_o.get()},
      {"the host to A's host end", -1, a->host_ip, proxy_a.get(), dns_a.get()},
  };
  for (const Attempt& at : attempts) {
    UniqueFd c = make_socket(at.ns, AF_INET, SOCK_STREAM);
    ASSERT_EQ(tcp_connect(c.get(), v4(at.to, config_.proxy_port)), 0) << "control: " << at.what;
    ASSERT_TRUE(accept_within(at.listener, kArriveMs)) << "control: " << at.what;
    UniqueFd u = make_socket(at.ns, AF_INET, SOCK_DGRAM);
    ASSERT_TRUE(send_to(u.get(), v4(at.to, config_.dns_port), "control"));
    ASSERT_TRUE(recv_within(at.dgram, kArriveMs)) << "control (DNS port): " << at.what;
  }

  install();
  FirewallCounters before = counters();
  for (const Attempt& at : attempts) {
    UniqueFd c = make_socket(at.ns, AF_INET, SOCK_STREAM);
    EXPECT_NE(tcp_connect(c.get(), v4(at.to, config_.proxy_port), kBlockedMs), 0) << at.what;
    UniqueFd u = make_socket(at.ns, AF_INET, SOCK_DGRAM);
    ASSERT_TRUE(send_to(u.get(), v4(at.to, config_.dns_port), "blocked"));
    EXPECT_FALSE(recv_within(at.dgram, kBlockedMs)) << "DNS port: " << at.what;
    EXPECT_FALSE(accept_within(at.listener, 0)) << at.what;
  }
  EXPECT_GE(grew(before, "drop_foreign"), 4u);

  // And the sandbox itself still gets through to both.
  UniqueFd c = make_socket(a->ns.get(), AF_INET, SOCK_STREAM);
  ASSERT_EQ(tcp_connect(c.get(), v4("203.0.113.7", 443)), 0);
  EXPECT_TRUE(accept_within(proxy_a.get(), kArriveMs));
}

}  // namespace
}  // namespace corral::net
