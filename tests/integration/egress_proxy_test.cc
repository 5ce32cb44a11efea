// The egress proxy (src/egress/egress_proxy.h) against real sockets. Every
// upstream is a small server of this file on a loopback address
// (127.0.0.x), names are resolved by a fake Resolver, and the policies name
// 127.0.0.0/8 by address for every port and protocol (kLoopbackNamed),
// without which the rebinding defence refuses the loopback upstreams, as one
// test shows. Tests of IP literals leave it out.
//
// Explicit clients (CONNECT, http:// URLs) connect to the proxy directly.
// The transparent path needs the firewall's redirect for SO_ORIGINAL_DST:
// one test builds a namespace, a veth pair and a throwaway nftables table
// (corral_ptest_<pid>, interfaces cpt<pid>h/p, subnet 10.215.0.0/30) with
// `ip` and `nft`, and removes them all at the end, even on failure.
#include "egress/egress_proxy.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "netns/network_policy.h"
#include "egress/tls_client_hello.h"
#include "support/client_hello.h"
#include "support/sandbox_harness.h"

namespace corral::net {
namespace {

using namespace std::chrono_literals;
using corral::testing::build_client_hello;

// --- Fakes --------------------------------------------------------------------

class FakeResolver : public Resolver {
 public:
  void set(const std::string& name, std::vector<std::string> addresses) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = table_[name];
    v.clear();
    for (const auto& a : addresses) v.push_back(*IpAddress::parse(a));
  }
  Result<std::vector<IpAddress>> resolve(const std::string& name,
                                         std::chrono::milliseconds) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    auto it = table_.find(name);
    if (it == table_.end()) return make_error(ErrorCode::kNotFound, "NXDOMAIN " + name);
    return it->second;
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<IpAddress>> table_;
  int calls_ = 0;
};

class FakeAnswers : public DnsAnswers {
 public:
  void add(const std::string& sandbox, const std::string& name, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_.insert({sandbox, name, address});
  }
  bool answered(const std::string& sandbox, const std::string& name,
                const IpAddress& address) override {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_.count({sandbox, name, address.str()}) > 0;
  }
  std::vector<std::string> names_for(const std::string& sandbox,
                                     const IpAddress& address) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [s, n, a] : answers_) {
      if (s == sandbox && a == address.str()) out.push_back(n);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::set<std::tuple<std::string, std::string, std::string>> answers_;
};

class AuditLog {
 public:
  EgressAuditSink sink() {
    return [this](const EgressEvent& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(ev);
      cv_.notify_all();
    };
  }
  // Waits until `n` events in all arrived; false after the timeout.
  bool wait_count(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return events_.size() >= n; });
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }
  EgressEvent at(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.at(i);
  }
  // The next event after the first `seen`, waiting for it.
  EgressEvent next(std::size_t& seen) {
    EXPECT_TRUE(wait_count(seen + 1)) << "no audit event #" << seen + 1;
    if (size() <= seen) return {};
    return at(seen++);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EgressEvent> events_;
};

// --- Sockets --------------------------------------------------------------------

UniqueFd dial(const std::string& ip, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  return fd;
}

void send_str(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Byte by byte up to the end of a head (so that nothing after it is taken).
std::string read_head(int fd) {
  std::string out;
  char c;
  while (out.size() < 65536 && !out.ends_with("\r\n\r\n")) {
    if (::recv(fd, &c, 1, 0) != 1) break;
    out.push_back(c);
  }
  return out;
}

// Until end of stream, reset or the 5 s receive timeout.
std::string read_to_eof(int fd, bool* clean_eof = nullptr) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (clean_eof) *clean_eof = n == 0;
    return out;
  }
}

std::string read_some(int fd, std::size_t want) {
  std::string out;
  char buf[4096];
  while (out.size() < want) {
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, want - out.size()), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Whether the peer closed (EOF or reset) within the timeout.
bool closed_within(int fd, std::chrono::milliseconds timeout) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

std::size_t open_fds() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;  // the DIR's own
}

// --- Upstreams -----------------------------------------------------------------

// A TCP server on ip:0 calling `handler` on a thread per connection; the
// destructor stops it and joins every thread.
class Upstream {
 public:
  using Handler = std::function<void(int fd, Upstream& self)>;
  Upstream(const std::string& ip, Handler handler) : handler_(std::move(handler)) {
    listen_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_.get(), 1024) != 0 ||
        ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "upstream on " << ip << ": " << strerror(errno);
      return;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~Upstream() {
    stopping_ = true;
    if (listen_) ::shutdown(listen_.get(), SHUT_RDWR);
    if (acceptor_.joinable()) acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int open_connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(open_.size());
  }
  void record(std::string bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(std::move(bytes));
    cv_.notify_all();
  }
  bool wait_records(std::size_t n, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return received_.size() >= n; });
  }
  std::string received(std::size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return i < received_.size() ? received_[i] : std::string();
  }
  std::size_t records() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_.size();
  }
  bool wait_idle(std::chrono::milliseconds timeout = 5s) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (open_connections() > 0) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping_ || errno != EINTR) return;
        continue;
      }
      ++accepted_;
      timeval tv{5, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      std::lock_guard<std::mutex> lock(mu_);
      open_.insert(fd);
      threads_.emplace_back([this, fd] {
        handler_(fd, *this);
        std::lock_guard<std::mutex> l(mu_);
        open_.erase(fd);
        ::close(fd);
      });
    }
  }

  Handler handler_;
  UniqueFd listen_;
  std::uint16_t port_ = 0;
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<int> open_;
  std::vector<std::thread> threads_;
  std::vector<std::string> received_;
};

// HTTP: reads one request (head, Content-Length or chunked body), answers,
// closes its side and records all it received until the proxy closed (a
// pipelined request must never arrive).
void http_handler(int fd, Upstream& self) {
  std::string in;
  char buf[65536];
  auto complete = [&]() {
    std::size_t end = in.find("\r\n\r\n");
    if (end == std::string::npos) return false;
    std::string head = in.substr(0, end + 4);
    std::size_t cl = head.find("content-length: ");
    if (cl != std::string::npos) return in.size() >= end + 4 + std::stoul(head.substr(cl + 16));
    if (head.find("transfer-encoding: chunked") != std::string::npos)
      return in.find("\r\n0\r\n\r\n", end) != std::string::npos;
    return true;
  };
  while (!complete()) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  std::string body = "hello from upstream\n";
  send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\nConnection: close\r\n\r\n" + body);
  // Closes its side, then takes whatever still comes until the proxy
  // closes too: the record holds every byte the proxy forwarded.
  ::shutdown(fd, SHUT_WR);
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  self.record(in);
}

// TLS: reads a ClientHello, records it, answers "ok-tls" and closes.
void tls_handler(int fd, Upstream& self) {
  std::string in;
  char buf[4096];
  while (parse_client_hello(in).status == TlsHelloStatus::kIncomplete) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  self.record(in);
  send_str(fd, "ok-tls");
}

// Raw TCP: echoes every chunk; at end of stream sends "bye\n" and closes.
void echo_handler(int fd, Upstream& self) {
  char buf[65536];
  std::string all;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 20'000) != 1) break;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) break;
    if (n == 0) {
      send_str(fd, "bye\n");
      break;
    }
    all.append(buf, static_cast<std::size_t>(n));
    send_str(fd, std::string_view(buf, static_cast<std::size_t>(n)));
  }
  self.record(all);
}

// --- Policies and the fixture ---------------------------------------------------

constexpr const char* kLoopbackNamed = "tcp://127.0.0.0/8:*";

std::shared_ptr<const NetworkPolicy> make_policy(const std::vector<std::string>& allow,
                                                 const std::vector<std::string>& deny = {},
                                                 RateLimit rate = {0, 0},
                                                 std::chrono::milliseconds timeout = 10s) {
  auto p = std::make_shared<NetworkPolicy>();
  p->mode = NetworkMode::kAllowlist;
  for (const auto& a : allow) {
    auto r = parse_rule(a, false);
    EXPECT_TRUE(r) << a << ": " << r.error().message;
    if (r) p->rules.push_back(*r);
  }
  for (const auto& d : deny) {
    auto r = parse_rule(d, true);
    EXPECT_TRUE(r) << d;
    if (r) p->rules.push_back(*r);
  }
  p->rate = rate;
  p->request_timeout = timeout;
  return p;
}

class EgressProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    resolver_ = std::make_shared<FakeResolver>();
    answers_ = std::make_shared<FakeAnswers>();
    web_ = std::make_unique<Upstream>("127.0.0.1", http_handler);
    tls_ = std::make_unique<Upstream>("127.0.0.3", tls_handler);
    echo_ = std::make_unique<Upstream>("127.0.0.4", echo_handler);
    resolver_->set("web.test", {"127.0.0.1"});
    resolver_->set("lo.test", {"127.0.0.1"});
    resolver_->set("tls.test", {"127.0.0.3"});
    resolver_->set("other.test", {"127.0.0.3"});
    resolver_->set("echo.test", {"127.0.0.4"});
    resolver_->set("ten.test", {"10.1.2.3"});
    resolver_->set("meta.test", {"169.254.169.254"});
    auto p = EgressProxy::start(resolver_, answers_, audit_.sink());
    ASSERT_TRUE(p) << p.error().to_string();
    proxy_ = std::move(*p);
  }
  void TearDown() override { proxy_.reset(); }

  std::uint16_t add(const std::string& id, std::shared_ptr<const NetworkPolicy> policy) {
    auto port = proxy_->add_sandbox(id, "127.0.0.1", 0, std::move(policy));
    EXPECT_TRUE(port) << port.error().to_string();
    return port ? *port : 0;
  }

  std::string web_rule() const { return "web.test:" + std::to_string(web_->port()); }
  std::string web_target() const { return "web.test:" + std::to_string(web_->port()); }

  // Opens a CONNECT tunnel; the fd and the proxy's answer head.
  std::pair<UniqueFd, std::string> connect_via(std::uint16_t proxy_port, const std::string& target,
                                               const std::string& host_header = "") {
    UniqueFd fd = dial("127.0.0.1", proxy_port);
    EXPECT_TRUE(fd);
    send_str(fd.get(), "CONNECT " + target + " HTTP/1.1\r\nHost: " +
                           (host_header.empty() ? target : host_header) + "\r\n\r\n");
    std::string head = read_head(fd.get());
    return {std::move(fd), head};
  }

  std::shared_ptr<FakeResolver> resolver_;
  std::shared_ptr<FakeAnswers> answers_;
  AuditLog audit_;
  std::unique_ptr<Upstream> web_, tls_, echo_;
  std::unique_ptr<EgressProxy> proxy_;
  std::size_t seen_ = 0;
};

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

// A connection handed to the gateway is cut when a live update withdraws
// a gateway grant (or the network), not left to run on the old grant; an
// update that keeps every grant leaves it alone.
TEST(EgressProxyGateway, WithdrawingAGrantCutsAGatewayConnection) {
  std::atomic<int> ended{0};
  EgressProxyOptions options;
  options.gateway = [&](const GatewayConnection& g) {
    // Stands in for a long streamed answer: waits until the client side ends.
    char c;
    for (;;) {
      pollfd p{g.client, POLLIN, 0};
      ::poll(&p, 1, 100);
      ssize_t n = ::read(g.client, &c, 1);
      if (n == 0 || (n < 0 && errno != EAGAIN)) break;
    }
    ++ended;
  };
  AuditLog audit;
  auto proxy = EgressProxy::start(std::make_shared<FakeResolver>(), std::make_shared<FakeAnswers>(),
                                  audit.sink(), options);
  ASSERT_TRUE(proxy) << proxy.error().to_string();
  auto granted = [](std::vector<std::string> services) {
    auto p = std::make_shared<NetworkPolicy>(*make_policy({}));
    p->gateway_services = std::move(services);
    return std::shared_ptr<const NetworkPolicy>(p);
  };
  auto port = (*proxy)->add_sandbox("sb", "127.0.0.1", 0, granted({"billing", "search"}));
  ASSERT_TRUE(port) << port.error().to_string();
  UniqueFd fd = dial("127.0.0.1", *port);
  ASSERT_TRUE(fd);
  send_str(fd.get(),
           "GET http://gateway.corral.internal/billing/x HTTP/1.1\r\nHost: "
           "gateway.corral.internal\r\n\r\n");
  for (int i = 0; i < 100 && (*proxy)->active_connections("sb") == 0; ++i)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE((*proxy)->set_policy("sb", granted({"search", "billing", "more"})));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(ended.load(), 0) << "an update that kept every grant cut the connection";
  ASSERT_TRUE((*proxy)->set_policy("sb", granted({"search"})));
  for (int i = 0; i < 200 && ended.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(ended.load(), 1) << "the gateway connection outlived the withdrawn grant";
}

// --- Explicit mode -----------------------------------------------------------------

TEST_F(EgressProxyTest, ConnectToAnAllowedNameReachesTheUpstream) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  auto [fd, head] = connect_via(port, web_target());
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200 ")) << head;
  send_str(fd.get(), "GET /path?q=1 HTTP/1.1\r\nHost: web.test\r\nConnection: keep-alive\r\n\r\n");
  bool eof = false;
  std::string resp = read_to_eof(fd.get(), &eof);
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 200 OK")) << resp;
  EXPECT_NE(resp.find("hello from upstream"), std::string::npos);
  EXPECT_TRUE(eof);
  ASSERT_TRUE(web_->wait_records(1));
  // One request per upstream connection: the proxy asked it to close.
  EXPECT_EQ(web_->received(0),
            "GET /path?q=1 HTTP/1.1\r\nhost: web.test\r\nconnection: close\r\n\r\n");

  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.sandbox, "sb");
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_TRUE(ev.explicit_proxy);
  EXPECT_EQ(ev.name, "web.test");
  EXPECT_EQ(ev.connect_host, "web.test");
  EXPECT_EQ(ev.host, "web.test");
  EXPECT_EQ(ev.protocol, "http");
  EXPECT_EQ(ev.address, "127.0.0.1");
  EXPECT_EQ(ev.port, web_->port());
  EXPECT_EQ(ev.rule, web_rule());
  EXPECT_EQ(ev.refusal, EgressRefusal::kNone);
  EXPECT_EQ(ev.end, "closed");
  EXPECT_EQ(ev.bytes_up, web_->received(0).size());
  EXPECT_EQ(ev.bytes_down, resp.size());
  EXPECT_EQ(proxy_->metrics().relayed, 1u);
}

TEST_F(EgressProxyTest, AbsoluteUrlIsRewrittenAndOnlyItsRequestIsForwarded) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  UniqueFd fd = dial("127.0.0.1", port);
  const std::string url = "http://" + web_target();
  // Two pipelined requests: the second (to another host) must never reach
  // the upstream connection opened for the first.
  send_str(fd.get(), "POST " + url + "/upload HTTP/1.1\r\nHost: " + web_target() +
                         "\r\nContent-Length: 5\r\nProxy-Connection: keep-alive\r\n\r\nhello"
                         "GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
  std::string resp = read_to_eof(fd.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 200 OK")) << resp;
  ASSERT_TRUE(web_->wait_records(1));
  EXPECT_EQ(web_->received(0), "POST /upload HTTP/1.1\r\nhost: " + web_target() +
                                   "\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
  EgressEvent ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed);
  EXPECT_EQ(ev.protocol, "http");
  EXPECT_EQ(ev.connect_host, "web.test");

  // A chunked body is forwarded as it is, up to its end.
  UniqueFd fd2 = dial("127.0.0.1", port);
  send_str(fd2.get(), "POST " + url +
                          "/c HTTP/1.1\r\nHost: web.test\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nEXTRA");
  resp = read_to_eof(fd2.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 200 OK")) << resp;
  ASSERT_TRUE(web_->wait_records(2));
  EXPECT_EQ(web_->received(1),
            "POST /c HTTP/1.1\r\nhost: web.test\r\n"
            "transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            "5\r\nhello\r\n0\r\n\r\n");
}

TEST_F(EgressProxyTest, ConnectCarriesARealClientHello) {
  const std::string tls_target = "tls.test:" + std::to_string(tls_->port());
  auto port = add("sb", make_policy({"tls://" + tls_target, kLoopbackNamed}));
  auto [fd, head] = connect_via(port, tls_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200 ")) << head;
  std::string hello = build_client_hello("tls.test");
  send_str(fd.get(), hello);
  EXPECT_EQ(read_to_eof(fd.get()), "ok-tls");
  ASSERT_TRUE(tls_->wait_records(1));
  EXPECT_EQ(tls_->received(0), hello);  // byte for byte: the proxy never alters TLS
  EgressEvent ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_EQ(ev.protocol, "tls");
  EXPECT_EQ(ev.sni, "tls.test");
  EXPECT_EQ(ev.rule, "tls://" + tls_target);
  // The upstream closed; this client kept its socket open: both sides were
  // closed after the half-close timeout.
  EXPECT_EQ(ev.end, "closed (the client did not close within 2000 ms of the upstream's end)");
}

TEST_F(EgressProxyTest, AQuietClientIsTcpOnlyWhereTcpIsAllowed) {
  const std::string tls_target = "tls.test:" + std::to_string(tls_->port());
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port =
      add("sb", make_policy({"tls://" + tls_target, "tcp://" + echo_target, kLoopbackNamed}));
  // Only TLS is allowed here: a client slower than first_bytes_timeout
  // (300 ms) is waited for, not taken for tcp and refused.
  auto [fd, head] = connect_via(port, tls_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200 ")) << head;
  std::this_thread::sleep_for(700ms);
  send_str(fd.get(), build_client_hello("tls.test"));
  EXPECT_EQ(read_some(fd.get(), 6), "ok-tls");
  fd.reset();
  EgressEvent ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_EQ(ev.protocol, "tls");
  // Where tcp is allowed, a quiet client is tcp (the server may speak first).
  auto [fd2, head2] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(head2, "HTTP/1.1 200 ")) << head2;
  std::this_thread::sleep_for(700ms);
  send_str(fd2.get(), "GET / HTTP/1.1\r\nHost: echo.test\r\n\r\n");  // bytes, by now
  EXPECT_EQ(read_some(fd2.get(), 4), "GET ");
  fd2.reset();
  ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_EQ(ev.protocol, "tcp");
}

// A head that does not complete is refused after the timeout that applies:
// the sandbox's network timeout when it is shorter than the proxy's head
// timeout, and the refusal names the one that fired. In a CONNECT tunnel
// whose destination a tcp rule allows, a client that has started an HTTP
// request line stays HTTP however long it pauses (it is not taken for a
// quiet tcp client).
TEST_F(EgressProxyTest, AnIncompleteHeadIsRefusedNamingTheTimeoutThatFired) {
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({web_rule(), "tcp://" + echo_target, kLoopbackNamed}, {},
                                    {0, 0}, 700ms));
  UniqueFd fd = dial("127.0.0.1", port);
  send_str(fd.get(), "GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n");
  std::string resp = read_to_eof(fd.get());
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kTimeout) << ev.reason;
  EXPECT_NE(ev.reason.find("within 700 ms"), std::string::npos) << ev.reason;

  auto [fd2, head2] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(head2, "HTTP/1.1 200 ")) << head2;
  send_str(fd2.get(), "GET / HTTP/1.1\r\nHost: echo.test\r\n");
  std::this_thread::sleep_for(400ms);  // past first_bytes_timeout (300 ms)
  send_str(fd2.get(), "X-Late: 1\r\n");
  EXPECT_EQ(read_to_eof(fd2.get()).find("X-Late"), std::string::npos)
      << "a paused request head was relayed as raw tcp";
  ev = audit_.next(seen_);
  EXPECT_FALSE(ev.allowed);
  EXPECT_EQ(ev.refusal, EgressRefusal::kTimeout) << ev.reason;
  EXPECT_NE(ev.reason.find("within 700 ms"), std::string::npos) << ev.reason;
  // The tunnel's upstream is connected before the first bytes are read;
  // none of them may reach it.
  if (echo_->wait_records(1, 2s)) {
    EXPECT_EQ(echo_->received(0), "") << "a paused head was relayed";
  }
}

TEST_F(EgressProxyTest, OpensslClientThroughTheExplicitProxy) {
  const std::string tls_target = "tls.test:" + std::to_string(tls_->port());
  auto port = add("sb", make_policy({tls_target, kLoopbackNamed}));
  int status = 0;
  corral::testing::host_sh("command -v openssl >/dev/null", &status);
  if (status != 0) CORRAL_SKIP_OR_FAIL("openssl is not installed");
  // s_client speaks CONNECT itself (-proxy) and sends a real ClientHello.
  std::string out = corral::testing::host_sh(
      "timeout 10 openssl s_client -proxy 127.0.0.1:" + std::to_string(port) + " -connect " +
      tls_target + " -servername tls.test </dev/null 2>&1");
  ASSERT_TRUE(tls_->wait_records(1)) << out;
  TlsHello h = parse_client_hello(tls_->received(0));
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << h.describe();
  EXPECT_EQ(h.sni, "tls.test");
  EgressEvent ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed) << ev.reason;
  EXPECT_EQ(ev.protocol, "tls");
  EXPECT_EQ(ev.sni, "tls.test");
}

TEST_F(EgressProxyTest, DeniedNameGets403AndIsAudited) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}, {"evil.test"}));
  const int before = resolver_->calls();
  for (const std::string target : {"nowhere.test:443", "evil.test:443"}) {
    auto [fd, head] = connect_via(port, target);
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 403 Forbidden")) << head;
    EXPECT_NE(head.find("X-Corral-Refusal: denied"), std::string::npos);
    std::string body = read_to_eof(fd.get());
    EXPECT_TRUE(starts_with(body, "corral egress proxy: ")) << body;
    EgressEvent ev = audit_.next(seen_);
    EXPECT_FALSE(ev.allowed);
    EXPECT_EQ(ev.refusal, EgressRefusal::kDenied);
    EXPECT_EQ(ev.name, target.substr(0, target.find(':')));
    EXPECT_NE(body.find(ev.reason), std::string::npos) << body << " vs " << ev.reason;
  }
  EXPECT_EQ(audit_.at(0).reason, "no rule allows tls to nowhere.test:443");
  EXPECT_EQ(audit_.at(1).rule, "evil.test:*");
  EXPECT_EQ(resolver_->calls(), before);  // refused before any resolution
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kDenied), 2u);
}

TEST_F(EgressProxyTest, ConnectHostAndSniMustAgree) {
  const std::string tls_target = "tls.test:" + std::to_string(tls_->port());
  auto port =
      add("sb",
          make_policy({tls_target, "other.test:" + std::to_string(tls_->port()), kLoopbackNamed}));
  auto [fd, head] = connect_via(port, tls_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200 ")) << head;
  send_str(fd.get(), build_client_hello("other.test"));
  EXPECT_EQ(read_to_eof(fd.get()), "");
  EgressEvent ev = audit_.next(seen_);
  EXPECT_FALSE(ev.allowed);
  EXPECT_EQ(ev.refusal, EgressRefusal::kMismatch);
  EXPECT_EQ(ev.sni, "other.test");
  EXPECT_EQ(ev.connect_host, "tls.test");
  EXPECT_NE(ev.reason.find("SNI other.test does not match the CONNECT host tls.test"),
            std::string::npos);
  // The upstream saw a connection that carried nothing.
  ASSERT_TRUE(tls_->wait_records(1));
  EXPECT_EQ(tls_->received(0), "");
}

TEST_F(EgressProxyTest, ConnectHostAndHttpHostMustAgree) {
  auto port =
      add("sb",
          make_policy({web_rule(), "other.test:" + std::to_string(web_->port()), kLoopbackNamed}));
  auto [fd, head] = connect_via(port, web_target());
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200 ")) << head;
  send_str(fd.get(), "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n");
  EXPECT_EQ(read_to_eof(fd.get()), "");
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kMismatch);
  EXPECT_EQ(ev.host, "other.test");

  // The same in an absolute URL: the URL's host and Host disagree.
  UniqueFd fd2 = dial("127.0.0.1", port);
  send_str(fd2.get(), "GET http://" + web_target() + "/ HTTP/1.1\r\nHost: other.test\r\n\r\n");
  std::string resp = read_to_eof(fd2.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 403")) << resp;
  ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kMismatch);
  // The tunnel had connected upstream before the mismatch showed; nothing
  // went through it. The URL was refused before any connection.
  ASSERT_TRUE(web_->wait_records(1));
  EXPECT_EQ(web_->received(0), "");
  EXPECT_EQ(web_->accepted(), 1);
}

TEST_F(EgressProxyTest, PortNotAllowed) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  auto [fd, head] = connect_via(port, "web.test:8443");
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 403")) << head;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kDenied);
  EXPECT_EQ(ev.port, 8443);
  EXPECT_EQ(ev.reason, "no rule allows tls to web.test:8443");
}

TEST_F(EgressProxyTest, IpLiteralNeedsAnAddressRule) {
  const std::string literal = "127.0.0.4:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://echo.test:" + std::to_string(echo_->port())}));
  auto [fd, head] = connect_via(port, literal);
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 403")) << head;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kDenied);
  EXPECT_EQ(ev.reason, "no rule allows tls to " + literal);
  EXPECT_EQ(echo_->accepted(), 0);

  ASSERT_TRUE(proxy_->set_policy("sb", make_policy({"tcp://" + literal})));
  auto [fd2, head2] = connect_via(port, literal);
  ASSERT_TRUE(starts_with(head2, "HTTP/1.1 200")) << head2;
  send_str(fd2.get(), "ping");
  EXPECT_EQ(read_some(fd2.get(), 4), "ping");
}

TEST_F(EgressProxyTest, RebindingDefenceRefusesNonPublicAddressesUnlessNamed) {
  const std::string p = std::to_string(web_->port());
  auto port = add("sb", make_policy({"lo.test:" + p, "ten.test:" + p, "meta.test:" + p}));
  struct Case {
    std::string name, address, cls;
  };
  for (const Case& c :
       {Case{"lo.test", "127.0.0.1", "loopback"}, Case{"ten.test", "10.1.2.3", "private"},
        Case{"meta.test", "169.254.169.254", "cloud metadata"}}) {
    auto [fd, head] = connect_via(port, c.name + ":" + p);
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 403")) << head;
    EXPECT_NE(head.find("X-Corral-Refusal: address"), std::string::npos) << head;
    EgressEvent ev = audit_.next(seen_);
    EXPECT_EQ(ev.refusal, EgressRefusal::kAddress) << c.name;
    EXPECT_EQ(ev.address, c.address);
    EXPECT_NE(
        ev.reason.find(c.name + " resolved to " + c.address + ": " + c.address + " is a " + c.cls),
        std::string::npos)
        << ev.reason;
  }
  EXPECT_EQ(web_->accepted(), 0);
  // Named by address, the loopback upstream is reachable.
  ASSERT_TRUE(proxy_->set_policy("sb", make_policy({"lo.test:" + p, kLoopbackNamed})));
  auto [fd, head] = connect_via(port, "lo.test:" + p);
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 200")) << head;
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kAddress), 3u);
}

TEST_F(EgressProxyTest, RateLimitBites) {
  auto port =
      add("sb", make_policy({"tcp://echo.test:" + std::to_string(echo_->port()), kLoopbackNamed},
                            {}, RateLimit{0.01, 3}));
  const std::string target = "echo.test:" + std::to_string(echo_->port());
  std::vector<UniqueFd> open;
  for (int i = 0; i < 3; ++i) {
    auto [fd, head] = connect_via(port, target);
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 200")) << i << ": " << head;
    open.push_back(std::move(fd));
  }
  auto [fd, head] = connect_via(port, target);
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 429")) << head;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kRateLimited);
  EXPECT_EQ(ev.name, "echo.test");
  EXPECT_NE(ev.reason.find("rate limited"), std::string::npos);
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kRateLimited), 1u);
  // Another sandbox has its own bucket.
  auto port2 = add("sb2", make_policy({"tcp://" + target, kLoopbackNamed}, {}, RateLimit{0.01, 1}));
  auto [fd2, head2] = connect_via(port2, target);
  EXPECT_TRUE(starts_with(head2, "HTTP/1.1 200")) << head2;
}

// Connections opened faster than the sandbox's rate: beyond the burst they
// are refused (429, rate_limited, audited, counted) before any upstream is
// dialled, and once the bucket has refilled, connections pass again.
TEST_F(EgressProxyTest, RateLimitRefusesTheExcessBeforeTheUpstreamAndRefills) {
  constexpr double kRate = 2;  // per second
  constexpr int kBurst = 2;
  const std::string target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://" + target, web_rule(), kLoopbackNamed}, {},
                                    RateLimit{kRate, kBurst}));
  const int accepted_before = echo_->accepted();

  // A burst of 8 CONNECTs as fast as the client can open them.
  constexpr int kTries = 8;
  int allowed = 0, limited = 0;
  std::vector<UniqueFd> tunnels;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kTries; ++i) {
    auto [fd, head] = connect_via(port, target);
    if (starts_with(head, "HTTP/1.1 200")) {
      ++allowed;
      tunnels.push_back(std::move(fd));
    } else {
      EXPECT_TRUE(starts_with(head, "HTTP/1.1 429")) << i << ": " << head;
      EXPECT_NE(head.find("X-Corral-Refusal: rate_limited"), std::string::npos) << head;
      ++limited;
    }
  }
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The burst passes; beyond it only what the rate refilled meanwhile.
  EXPECT_GE(allowed, kBurst);
  EXPECT_LE(allowed, kBurst + static_cast<int>(spent * kRate) + 1) << "in " << spent << " s";
  ASSERT_LT(spent, 2.0) << "too slow to test a rate of " << kRate << "/s";
  EXPECT_GE(limited, kTries - kBurst - static_cast<int>(spent * kRate) - 1);
  EXPECT_GT(limited, 0);

  // An HTTP request over the limit meets the same bucket, and is answered
  // without the web upstream seeing it.
  {
    UniqueFd fd = dial("127.0.0.1", port);
    send_str(fd.get(),
             "GET http://" + web_target() + "/x HTTP/1.1\r\nHost: " + web_target() + "\r\n\r\n");
    std::string head = read_head(fd.get());
    if (starts_with(head, "HTTP/1.1 200")) {
      ++allowed;  // a token refilled meanwhile (a slow machine): not a refusal to check
    } else {
      EXPECT_TRUE(starts_with(head, "HTTP/1.1 429")) << head;
      ++limited;
      EXPECT_EQ(web_->accepted(), 0);
    }
  }

  // Every refusal is audited as rate_limited, and counted.
  ASSERT_TRUE(audit_.wait_count(static_cast<std::size_t>(limited)));
  int audited_limited = 0;
  for (std::size_t i = 0; i < audit_.size(); ++i) {
    EgressEvent ev = audit_.at(i);
    if (ev.refusal != EgressRefusal::kRateLimited) continue;
    ++audited_limited;
    EXPECT_FALSE(ev.allowed);
    EXPECT_TRUE(ev.address.empty()) << "dialled " << ev.address;
    EXPECT_NE(ev.reason.find("rate limited"), std::string::npos) << ev.reason;
  }
  EXPECT_EQ(audited_limited, limited);
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kRateLimited),
            static_cast<std::uint64_t>(limited));
  // The upstream saw the allowed tunnels and nothing else.
  const int echo_allowed = static_cast<int>(tunnels.size());
  auto until = std::chrono::steady_clock::now() + 5s;
  while (echo_->accepted() - accepted_before < echo_allowed &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(echo_->accepted() - accepted_before, echo_allowed);

  // After a wait the bucket has refilled (to at most the burst): new
  // connections pass and reach the upstream.
  std::this_thread::sleep_for(
      std::chrono::milliseconds(static_cast<int>(kBurst / kRate * 1000) + 100));
  for (int i = 0; i < kBurst; ++i) {
    auto [fd, head] = connect_via(port, target);
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 200")) << "after the refill, " << i << ": " << head;
    send_str(fd.get(), "ping");
    EXPECT_EQ(read_some(fd.get(), 4), "ping");
    tunnels.push_back(std::move(fd));
  }
  EXPECT_EQ(echo_->accepted() - accepted_before, echo_allowed + kBurst);
}

TEST_F(EgressProxyTest, PolicyChangeClosesWhatItNoLongerAllowsAndGrantsWhatItAdds) {
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://" + echo_target, kLoopbackNamed}));
  auto [fd, head] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200")) << head;
  send_str(fd.get(), "ping");
  ASSERT_EQ(read_some(fd.get(), 4), "ping");
  auto [denied, dhead] = connect_via(port, web_target());
  EXPECT_TRUE(starts_with(dhead, "HTTP/1.1 403")) << dhead;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.name, "web.test");
  EXPECT_FALSE(ev.allowed);

  // An unrelated change keeps the tunnel.
  ASSERT_TRUE(
      proxy_->set_policy("sb", make_policy({"tcp://" + echo_target, "x.test", kLoopbackNamed})));
  send_str(fd.get(), "pong");
  ASSERT_EQ(read_some(fd.get(), 4), "pong");
  EXPECT_EQ(proxy_->active_connections("sb"), 1u);

  ASSERT_TRUE(proxy_->set_policy("sb", make_policy({web_rule(), kLoopbackNamed})));
  EXPECT_TRUE(closed_within(fd.get(), 2s));
  ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed);
  EXPECT_EQ(ev.name, "echo.test");
  EXPECT_EQ(ev.refusal, EgressRefusal::kPolicyChanged);
  EXPECT_NE(ev.end.find("policy changed: no rule allows tcp to echo.test"), std::string::npos)
      << ev.end;
  EXPECT_EQ(ev.bytes_up, 8u);
  ASSERT_TRUE(echo_->wait_records(1));  // the upstream side was closed too
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kPolicyChanged), 1u);

  auto [granted, ghead] = connect_via(port, web_target());
  EXPECT_TRUE(starts_with(ghead, "HTTP/1.1 200")) << ghead;
}

TEST_F(EgressProxyTest, RemoveSandboxClosesEverything) {
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://" + echo_target, kLoopbackNamed}));
  auto other = add("other", make_policy({"tcp://" + echo_target, kLoopbackNamed}));
  auto [a, ahead] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(ahead, "HTTP/1.1 200")) << ahead;
  send_str(a.get(), "a");
  ASSERT_EQ(read_some(a.get(), 1), "a");
  UniqueFd silent = dial("127.0.0.1", port);  // connected, never sends its request
  auto [b, bhead] = connect_via(other, echo_target);
  ASSERT_TRUE(starts_with(bhead, "HTTP/1.1 200")) << bhead;
  for (int i = 0; i < 100 && proxy_->active_connections("sb") < 2; ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(proxy_->active_connections("sb"), 2u);

  EXPECT_TRUE(proxy_->remove_sandbox("sb"));
  EXPECT_EQ(proxy_->active_connections("sb"), 0u);
  EXPECT_TRUE(closed_within(a.get(), 1s));
  EXPECT_TRUE(closed_within(silent.get(), 1s));
  EXPECT_FALSE(dial("127.0.0.1", port));  // the listener is gone
  EXPECT_TRUE(echo_->wait_records(1));    // and the upstream connection
  ASSERT_TRUE(audit_.wait_count(2));
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(audit_.at(i).end, "sandbox removed");
  EXPECT_FALSE(proxy_->remove_sandbox("sb"));

  // The other sandbox is untouched.
  send_str(b.get(), "b");
  EXPECT_EQ(read_some(b.get(), 1), "b");
  // The id and the port can be used again.
  auto again = proxy_->add_sandbox("sb", "127.0.0.1", port, make_policy({kLoopbackNamed}));
  EXPECT_TRUE(again) << again.error().to_string();
}

TEST_F(EgressProxyTest, HalfCloseDeliversTheAnswerThenBothSidesClose) {
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://" + echo_target, kLoopbackNamed}));
  auto [fd, head] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200")) << head;
  send_str(fd.get(), "hello");
  ASSERT_EQ(read_some(fd.get(), 5), "hello");
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  bool eof = false;
  EXPECT_EQ(read_to_eof(fd.get(), &eof), "bye\n");  // sent by the upstream after our EOF
  EXPECT_TRUE(eof);
  EgressEvent ev = audit_.next(seen_);
  EXPECT_TRUE(ev.allowed);
  EXPECT_EQ(ev.protocol, "tcp");
  EXPECT_EQ(ev.end, "closed");
  EXPECT_EQ(ev.bytes_up, 5u);
  EXPECT_EQ(ev.bytes_down, 9u);
  EXPECT_TRUE(echo_->wait_idle());
  EXPECT_EQ(proxy_->metrics().active, 0u);
}

TEST_F(EgressProxyTest, IdleTimeoutClosesBothSides) {
  const std::string echo_target = "echo.test:" + std::to_string(echo_->port());
  auto port = add("sb", make_policy({"tcp://" + echo_target, kLoopbackNamed}, {}, {0, 0}, 400ms));
  auto [fd, head] = connect_via(port, echo_target);
  ASSERT_TRUE(starts_with(head, "HTTP/1.1 200")) << head;
  send_str(fd.get(), "x");
  ASSERT_EQ(read_some(fd.get(), 1), "x");
  EXPECT_TRUE(closed_within(fd.get(), 3s));
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.end, "idle timeout (400 ms)");
  EXPECT_TRUE(echo_->wait_idle());
}

TEST_F(EgressProxyTest, NotAProxyRequest) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  UniqueFd fd = dial("127.0.0.1", port);
  send_str(fd.get(), "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
  std::string resp = read_to_eof(fd.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 400")) << resp;
  EXPECT_EQ(audit_.next(seen_).refusal, EgressRefusal::kMalformed);

  UniqueFd tls = dial("127.0.0.1", port);
  send_str(tls.get(), build_client_hello("web.test"));
  EXPECT_EQ(read_to_eof(tls.get()), "");
  EXPECT_EQ(audit_.next(seen_).refusal, EgressRefusal::kMalformed);

  UniqueFd junk = dial("127.0.0.1", port);
  send_str(junk.get(), "CONNECT web.test HTTP/1.1\r\nHost: web.test\r\n\r\n");
  resp = read_to_eof(junk.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 400")) << resp;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kMalformed);
  EXPECT_NE(ev.reason.find("is not host:port"), std::string::npos) << ev.reason;
}

TEST_F(EgressProxyTest, ResolveAndConnectFailures) {
  auto port = add("sb", make_policy({"*.test:*", kLoopbackNamed}));
  auto [fd, head] = connect_via(port, "unknown.test:443");
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 502")) << head;
  EXPECT_EQ(audit_.next(seen_).refusal, EgressRefusal::kResolveFailed);
  // A port nobody listens on (any more).
  std::uint16_t dead = 0;
  {
    Upstream tmp("127.0.0.5", [](int, Upstream&) {});
    dead = tmp.port();
  }
  resolver_->set("dead.test", {"127.0.0.5"});
  auto [fd2, head2] = connect_via(port, "dead.test:" + std::to_string(dead));
  EXPECT_TRUE(starts_with(head2, "HTTP/1.1 502")) << head2;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_EQ(ev.refusal, EgressRefusal::kConnectFailed);
  EXPECT_NE(ev.reason.find("ECONNREFUSED"), std::string::npos) << ev.reason;
}

TEST_F(EgressProxyTest, ThousandConnectionsLeaveNoFdsBehind) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  // Warm up (threads, lazily opened files), then measure.
  {
    auto [fd, head] = connect_via(port, web_target());
    send_str(fd.get(), "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
    read_to_eof(fd.get());
  }
  ASSERT_TRUE(audit_.wait_count(1));
  ASSERT_TRUE(web_->wait_idle());
  const std::size_t baseline = open_fds();
  constexpr int kConnections = 1000;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = t; i < kConnections; i += 4) {
        switch (i % 4) {
          case 0: {  // allowed tunnel with a request
            auto [fd, head] = connect_via(port, web_target());
            send_str(fd.get(), "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
            if (read_to_eof(fd.get()).find("hello from upstream") != std::string::npos) ++ok;
            break;
          }
          case 1: {  // denied
            auto [fd, head] = connect_via(port, "denied.test:443");
            if (starts_with(head, "HTTP/1.1 403")) ++ok;
            break;
          }
          case 2: {  // absolute URL
            UniqueFd fd = dial("127.0.0.1", port);
            send_str(fd.get(),
                     "GET http://" + web_target() + "/ HTTP/1.1\r\nHost: web.test\r\n\r\n");
            if (read_to_eof(fd.get()).find("hello from upstream") != std::string::npos) ++ok;
            break;
          }
          case 3: {  // the client goes away mid-way
            auto [fd, head] = connect_via(port, web_target());
            if (starts_with(head, "HTTP/1.1 200")) ++ok;
            break;
          }
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), kConnections);
  ASSERT_TRUE(audit_.wait_count(kConnections + 1, 20s)) << audit_.size();
  ASSERT_TRUE(web_->wait_idle(10s));
  EXPECT_EQ(proxy_->metrics().active, 0u);
  EXPECT_EQ(proxy_->active_connections("sb"), 0u);
  EXPECT_EQ(open_fds(), baseline);
}

// --- Transparent mode -----------------------------------------------------------------

// A namespace with a veth pair to the host and a throwaway nftables table
// that redirects its TCP to the proxy, as the real firewall does for crl*.
class TransparentNet {
 public:
  explicit TransparentNet(const std::string& tag) {
    const std::string pid = std::to_string(::getpid());
    ns_ = "cpt" + pid + tag;
    host_if_ = "cpt" + pid + "h";
    peer_if_ = "cpt" + pid + "p";
    table_ = "corral_ptest_" + pid;
  }
  ~TransparentNet() {
    run("nft delete table inet " + table_);
    run("ip link del " + host_if_);
    run("ip netns del " + ns_);
  }
  // Empty on success, or what failed.
  std::string setup() {
    for (const std::string& cmd :
         {"ip netns add " + ns_,
          "ip link add " + host_if_ + " type veth peer name " + peer_if_ + " netns " + ns_,
          "ip addr add 10.215.0.1/30 dev " + host_if_, "ip link set " + host_if_ + " up",
          "ip -n " + ns_ + " addr add 10.215.0.2/30 dev " + peer_if_,
          "ip -n " + ns_ + " link set " + peer_if_ + " up", "ip -n " + ns_ + " link set lo up",
          "ip -n " + ns_ + " route add default via 10.215.0.1"}) {
      if (std::string err = run(cmd); !err.empty()) return err;
    }
    return {};
  }
  std::string redirect_to(std::uint16_t port) {
    return run("printf '%s\\n' 'table inet " + table_ +
               " { chain prerouting { type nat hook prerouting priority dstnat; iifname \"" +
               host_if_ + "\" meta l4proto tcp redirect to :" + std::to_string(port) +
               "; }; }' | nft -f -");
  }
  const std::string& ns() const { return ns_; }
  bool gone() {
    int a = 0, b = 0, c = 0;
    corral::testing::host_sh("ip link show " + host_if_ + " >/dev/null 2>&1", &a);
    corral::testing::host_sh("ip netns list | grep -qw " + ns_, &b);
    corral::testing::host_sh("nft list table inet " + table_ + " >/dev/null 2>&1", &c);
    return a != 0 && b != 0 && c != 0;
  }
  // Runs fn on a thread inside the namespace: its sockets are made there.
  void in_ns(const std::function<void()>& fn) {
    std::thread([&] {
      UniqueFd nsfd(::open(("/run/netns/" + ns_).c_str(), O_RDONLY | O_CLOEXEC));
      ASSERT_TRUE(nsfd) << strerror(errno);
      ASSERT_EQ(::setns(nsfd.get(), CLONE_NEWNET), 0) << strerror(errno);
      fn();
    }).join();
  }

  static std::string run(const std::string& cmd) {
    int status = 0;
    std::string out = corral::testing::host_sh(cmd + " 2>&1", &status);
    return status == 0 ? std::string() : cmd + ": " + out;
  }

 private:
  std::string ns_, host_if_, peer_if_, table_;
};

TEST_F(EgressProxyTest, TransparentHttpTlsAndTcp) {
  if (::geteuid() != 0) CORRAL_SKIP_OR_FAIL("needs root (netns, veth, nftables)");
  for (const char* tool : {"ip", "nft"}) {
    int status = 0;
    corral::testing::host_sh(std::string("command -v ") + tool + " >/dev/null", &status);
    if (status != 0) CORRAL_SKIP_OR_FAIL(std::string(tool) + " is not installed");
  }
  {
    TransparentNet net("t");
    if (std::string err = net.setup(); !err.empty()) {
      CORRAL_SKIP_OR_FAIL("cannot build the test network: " + err);
    }
    Upstream raw("10.215.0.1", echo_handler);  // where tcp goes: the address the sandbox chose
    answers_->add("sb", "db.test", "10.215.0.1");
    const std::string wp = std::to_string(web_->port()), tp = std::to_string(tls_->port()),
                      rp = std::to_string(raw.port());
    // db.test has an http/tls rule on the raw port, not a tcp one yet.
    auto port =
        proxy_->add_sandbox("sb", "10.215.0.1", 0,
                            make_policy({"web.test:" + wp, "tls.test:" + tp, "db.test:" + rp,
                                         kLoopbackNamed, "10.215.0.0/30:" + rp}));
    ASSERT_TRUE(port) << port.error().to_string();
    if (std::string err = net.redirect_to(*port); !err.empty())
      CORRAL_SKIP_OR_FAIL("cannot install the nftables redirect: " + err);

    // HTTP to an address of the sandbox's choosing: the proxy routes by Host.
    std::string resp;
    net.in_ns([&] {
      UniqueFd fd = dial("203.0.113.10", web_->port());
      ASSERT_TRUE(fd) << strerror(errno);
      send_str(fd.get(), "GET /t HTTP/1.1\r\nHost: web.test\r\n\r\n");
      resp = read_to_eof(fd.get());
    });
    EXPECT_TRUE(starts_with(resp, "HTTP/1.1 200 OK")) << resp;
    EgressEvent ev = audit_.next(seen_);
    EXPECT_TRUE(ev.allowed) << ev.reason;
    EXPECT_FALSE(ev.explicit_proxy);
    EXPECT_EQ(ev.protocol, "http");
    EXPECT_EQ(ev.host, "web.test");
    EXPECT_EQ(ev.original_address, "203.0.113.10");
    EXPECT_EQ(ev.address, "127.0.0.1");  // what the proxy resolved, not what the sandbox chose
    ASSERT_TRUE(web_->wait_records(1));
    EXPECT_EQ(web_->received(0), "GET /t HTTP/1.1\r\nhost: web.test\r\nconnection: close\r\n\r\n");

    // A real TLS client: classified by its SNI, its bytes passed unchanged.
    std::string out = TransparentNet::run("timeout 10 ip netns exec " + net.ns() +
                                          " openssl s_client -connect 203.0.113.11:" + tp +
                                          " -servername tls.test </dev/null");
    ASSERT_TRUE(tls_->wait_records(1)) << out;
    TlsHello h = parse_client_hello(tls_->received(0));
    EXPECT_EQ(h.status, TlsHelloStatus::kClientHello);
    EXPECT_EQ(h.sni, "tls.test");
    ev = audit_.next(seen_);
    EXPECT_TRUE(ev.allowed) << ev.reason;
    EXPECT_EQ(ev.protocol, "tls");
    EXPECT_EQ(ev.sni, "tls.test");
    EXPECT_EQ(ev.original_address, "203.0.113.11");
    EXPECT_EQ(ev.address, "127.0.0.3");

    // Raw TCP to the address corral's DNS answered for db.test: refused
    // without a tcp rule...
    std::string got;
    net.in_ns([&] {
      UniqueFd fd = dial("10.215.0.1", raw.port());
      ASSERT_TRUE(fd);
      send_str(fd.get(), "ping\n");
      got = read_to_eof(fd.get());
    });
    EXPECT_EQ(got, "");
    ev = audit_.next(seen_);
    EXPECT_FALSE(ev.allowed);
    EXPECT_EQ(ev.protocol, "tcp");
    EXPECT_EQ(ev.name, "db.test");
    EXPECT_EQ(ev.refusal, EgressRefusal::kDenied);
    EXPECT_EQ(raw.accepted(), 0);

    // ... and allowed with one.
    ASSERT_TRUE(proxy_->set_policy(
        "sb", make_policy({"tcp://db.test:" + rp, kLoopbackNamed, "tcp://10.215.0.0/30:" + rp})));
    net.in_ns([&] {
      UniqueFd fd = dial("10.215.0.1", raw.port());
      ASSERT_TRUE(fd);
      send_str(fd.get(), "ping\n");
      got = read_some(fd.get(), 5);
      ::shutdown(fd.get(), SHUT_WR);
      got += read_to_eof(fd.get());
    });
    EXPECT_EQ(got, "ping\nbye\n");
    ev = audit_.next(seen_);
    EXPECT_TRUE(ev.allowed) << ev.reason;
    EXPECT_EQ(ev.protocol, "tcp");
    EXPECT_EQ(ev.rule, "tcp://db.test:" + rp);
    EXPECT_EQ(ev.address, "10.215.0.1");

    // Another port of the same address is not in the tcp rule.
    Upstream raw2("10.215.0.1", echo_handler);
    net.in_ns([&] {
      UniqueFd fd = dial("10.215.0.1", raw2.port());
      ASSERT_TRUE(fd);
      send_str(fd.get(), "ping\n");
      got = read_to_eof(fd.get());
    });
    EXPECT_EQ(got, "");
    ev = audit_.next(seen_);
    EXPECT_EQ(ev.refusal, EgressRefusal::kDenied);  // port not in the tcp rule
    proxy_.reset();  // closes the listener on the host end before the veth goes
  }
  // All of it removed.
  TransparentNet check("t");
  EXPECT_TRUE(check.gone());
}


// --- Dry run (X2, docs/dry-run.md) ------------------------------------------------

std::shared_ptr<const NetworkPolicy> dry(std::shared_ptr<const NetworkPolicy> p) {
  auto copy = std::make_shared<NetworkPolicy>(*p);
  copy->dry_run = true;
  return copy;
}

// Every way in (a CONNECT tunnel, an absolute URL, allowed or denied) is
// recorded with what names it and answered by the proxy: no resolution,
// no connection to any upstream.
TEST_F(EgressProxyTest, DryRunAnswersLocallyAndRecordsTheRequest) {
  auto port = add("sb", dry(make_policy({web_rule(), kLoopbackNamed}, {"evil.test"})));
  const int resolved = resolver_->calls();

  UniqueFd fd = dial("127.0.0.1", port);
  send_str(fd.get(), "POST http://" + web_target() + "/upload?x=1 HTTP/1.1\r\nHost: " +
                         web_target() + "\r\nContent-Length: 5\r\n\r\nhello");
  std::string resp = read_to_eof(fd.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 503 Service Unavailable")) << resp;
  EXPECT_NE(resp.find("X-Corral-Refusal: dry_run"), std::string::npos) << resp;
  EXPECT_NE(resp.find("dry run: nothing was sent; a real run would relay it"), std::string::npos)
      << resp;
  EgressEvent ev = audit_.next(seen_);
  EXPECT_FALSE(ev.allowed);
  EXPECT_EQ(ev.refusal, EgressRefusal::kDryRun);
  EXPECT_EQ(ev.name, "web.test");
  EXPECT_EQ(ev.port, web_->port());
  EXPECT_EQ(ev.protocol, "http");
  EXPECT_EQ(ev.method, "POST");
  EXPECT_EQ(ev.path, "/upload");

  {
    auto [tunnel, head] = connect_via(port, web_target());
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 503 ")) << head;
    EgressEvent c = audit_.next(seen_);
    EXPECT_EQ(c.refusal, EgressRefusal::kDryRun);
    EXPECT_EQ(c.name, "web.test");
  }
  {
    // Refused before routing, as in a real run, and recorded so.
    auto [tunnel, head] = connect_via(port, "evil.test:443");
    EXPECT_TRUE(starts_with(head, "HTTP/1.1 403 ")) << head;
    EgressEvent c = audit_.next(seen_);
    EXPECT_EQ(c.refusal, EgressRefusal::kDenied);
    EXPECT_EQ(c.name, "evil.test");
  }
  EXPECT_EQ(web_->accepted(), 0) << "a dry run reached the upstream";
  EXPECT_EQ(resolver_->calls(), resolved) << "a dry run resolved a name upstream";
  EXPECT_EQ(proxy_->metrics().relayed, 0u);
  EXPECT_EQ(proxy_->metrics().count(EgressRefusal::kDryRun), 2u);
}

// The control: the same request without dry_run reaches the upstream.
TEST_F(EgressProxyTest, WithoutDryRunTheSameRequestIsRelayed) {
  auto port = add("sb", make_policy({web_rule(), kLoopbackNamed}));
  UniqueFd fd = dial("127.0.0.1", port);
  send_str(fd.get(), "GET http://" + web_target() + "/ HTTP/1.1\r\nHost: " + web_target() +
                         "\r\n\r\n");
  std::string resp = read_to_eof(fd.get());
  EXPECT_TRUE(starts_with(resp, "HTTP/1.1 200 OK")) << resp;
  EXPECT_EQ(web_->accepted(), 1);
  EXPECT_TRUE(audit_.next(seen_).method.empty()) << "a normal run keeps no path";
}

}  // namespace
}  // namespace corral::net
