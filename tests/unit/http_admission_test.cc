// Which connections the HTTP server admits (issue 14; http/connection_table.h):
// authenticated connections are never closed for unauthenticated ones and
// fill the TCP budget only by themselves; accept() out of descriptors
// answers 503 through the spare descriptor instead of leaving clients in
// the backlog. Real sockets on 127.0.0.1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "http/http_server.h"

namespace corral::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Handler ok_handler() {
  return [](const Peer&, const RequestHead&, BodyReader&, ResponseWriter& out) {
    (void)out.send(200, {}, "ok");
  };
}

class RunningServer {
 public:
  explicit RunningServer(ServerOptions options) : server_(ok_handler(), std::move(options)) {
    EXPECT_TRUE(server_.listen_tcp("127.0.0.1", 0).has_value());
    thread_ = std::thread([this] { server_.run(); });
  }
  ~RunningServer() {
    server_.stop();
    thread_.join();
  }
  Server& server() { return server_; }
  std::uint16_t port() const { return server_.bound_port(); }

 private:
  Server server_;
  std::thread thread_;
};

bool connect_to(int fd, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

// From `source`: every 127/8 address is loopback, and a peer of its own.
UniqueFd open_connection(std::uint16_t port, std::string_view send_first,
                         const char* source = "127.0.0.1") {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return UniqueFd();
  if (!connect_to(fd.get(), port)) return UniqueFd();
  (void)::send(fd.get(), send_first.data(), send_first.size(), MSG_NOSIGNAL);
  return fd;
}

// One response (small: the whole of it arrives in one piece or a few).
std::string read_reply(int fd, std::chrono::milliseconds limit = 5000ms) {
  std::string out;
  auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) {
      if (out.find("\r\n\r\n") != std::string::npos) return out;
      continue;
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

bool still_open(int fd) {
  char c;
  ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

constexpr std::string_view kKeyed = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n";
constexpr std::string_view kSlow = "GET / HTTP/1.1\r\nHost: x\r\n";

ServerOptions authenticating(std::size_t tcp, std::size_t unauth, std::size_t per_peer) {
  ServerOptions opt;
  opt.connections.tcp = tcp;
  opt.connections.unauthenticated = unauth;
  opt.connections.unauthenticated_per_peer = per_peer;
  opt.authenticate = [](const Peer&, const RequestHead& head) {
    auto v = head.header("authorization");
    return v && *v == "yes";
  };
  return opt;
}

// Authenticated connections keep their slots through a flood of slow
// unauthenticated ones, a new keyed connection still gets in, and only
// authenticated connections can fill the TCP budget (then: 503).
TEST(HttpAdmission, AuthenticatedConnectionsAreNeverPushedOut) {
  RunningServer s(authenticating(8, 4, 4));
  std::vector<UniqueFd> keyed;
  for (int i = 0; i < 4; ++i) {
    keyed.push_back(open_connection(s.port(), kKeyed));
    ASSERT_TRUE(read_reply(keyed.back().get()).starts_with("HTTP/1.1 200 ")) << i;
  }
  std::vector<UniqueFd> flood;
  for (int i = 0; i < 40; ++i) flood.push_back(open_connection(s.port(), kSlow));
  UniqueFd late = open_connection(s.port(), kKeyed);
  EXPECT_TRUE(read_reply(late.get()).starts_with("HTTP/1.1 200 "));
  for (auto& fd : keyed) {
    ASSERT_TRUE(still_open(fd.get()));
    ASSERT_EQ(::send(fd.get(), kKeyed.data(), kKeyed.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(kKeyed.size()));
    EXPECT_TRUE(read_reply(fd.get()).starts_with("HTTP/1.1 200 "));
  }
  ConnectionStats st = s.server().connection_stats();
  EXPECT_EQ(st.tcp_authenticated, 5u);
  EXPECT_LE(st.tcp_unauthenticated, 3u);  // 8 - 5 room left
  EXPECT_GE(st.evicted, 36u);

  // Fill the rest with keyed connections: then a newcomer gets 503, with
  // or without a key, because no unauthenticated connection is left to go.
  keyed.push_back(std::move(late));
  for (int i = 0; i < 3; ++i) {
    keyed.push_back(open_connection(s.port(), kKeyed));
    ASSERT_TRUE(read_reply(keyed.back().get()).starts_with("HTTP/1.1 200 ")) << i;
  }
  UniqueFd refused = open_connection(s.port(), kKeyed);
  std::string reply = read_reply(refused.get());
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 503 ")) << reply;
  EXPECT_NE(reply.find("\"code\":\"overloaded\""), std::string::npos) << reply;
}

// The unauthenticated total is full: a newcomer from another address makes
// room at the expense of the address holding the most, not of the small
// holder; and that big holder's further connections replace its own.
TEST(HttpAdmission, EvictionHitsTheBiggestHolder) {
  RunningServer s(authenticating(64, 8, 8));
  std::vector<UniqueFd> a, b;
  for (int i = 0; i < 7; ++i) a.push_back(open_connection(s.port(), kSlow, "127.0.0.2"));
  for (int i = 0; i < 3; ++i) b.push_back(open_connection(s.port(), kSlow, "127.0.0.3"));
  for (int i = 0; i < 10; ++i) a.push_back(open_connection(s.port(), kSlow, "127.0.0.2"));
  auto open_count = [](const std::vector<UniqueFd>& v) {
    std::size_t n = 0;
    for (const auto& fd : v) n += still_open(fd.get()) ? 1 : 0;
    return n;
  };
  for (auto deadline = Clock::now() + 3s;
       Clock::now() < deadline && open_count(a) + open_count(b) > 8;)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(open_count(b), 3u);
  EXPECT_EQ(open_count(a), 5u);
  EXPECT_EQ(s.server().connection_stats().tcp_unauthenticated, 8u);
}

// Without an authenticate callback the server knows no credentials: every
// TCP connection is admitted as authenticated (the old single cap).
TEST(HttpAdmission, NoCallbackMeansOneTcpBudget) {
  ServerOptions opt;
  opt.connections.tcp = 3;
  opt.connections.unauthenticated = 1;
  RunningServer s(opt);
  std::vector<UniqueFd> held;
  for (int i = 0; i < 3; ++i) held.push_back(open_connection(s.port(), kSlow));
  UniqueFd fourth = open_connection(s.port(), kSlow);
  EXPECT_TRUE(read_reply(fourth.get()).starts_with("HTTP/1.1 503 "));
  for (auto& fd : held) EXPECT_TRUE(still_open(fd.get()));
  EXPECT_EQ(s.server().connection_stats().evicted, 0u);
}

// accept() fails with EMFILE: the pending clients get 503 overloaded (the
// spare descriptor makes room for one accept at a time), not silence. The
// test lowers its own soft RLIMIT_NOFILE just above the descriptors open,
// with the clients' sockets made before, so that only the server's
// accepts run out.
TEST(HttpAdmission, OutOfDescriptorsAnswers503) {
  ServerOptions opt;
  opt.connections.tcp = 1000;
  RunningServer s(opt);
  // Idle connection threads made beforehand serve the connections below:
  // a thread started with no descriptor left trips UBSan's vptr check,
  // which needs a pipe to probe memory (a sanitizer build only).
  {
    std::vector<UniqueFd> warm;
    for (int i = 0; i < 4; ++i) {
      warm.push_back(open_connection(s.port(), kKeyed));
      ASSERT_TRUE(read_reply(warm.back().get()).starts_with("HTTP/1.1 200 ")) << i;
    }
  }
  for (int i = 0; i < 500 && s.server().connection_stats().tcp_authenticated > 0; ++i)
    std::this_thread::sleep_for(10ms);
  std::vector<UniqueFd> clients;
  for (int i = 0; i < 8; ++i) clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int lowest_free = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lowest_free, 0);
  ::close(lowest_free);
  struct rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  // Room for two accepted connections (numbers lowest_free and +1) only,
  // if nothing else holds a higher number below the limit.
  struct rlimit low = {static_cast<rlim_t>(lowest_free + 2), before.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<std::string> replies;
  for (auto& fd : clients) {
    if (!connect_to(fd.get(), s.port())) {
      replies.push_back("connect failed");
      continue;
    }
    (void)::send(fd.get(), kKeyed.data(), kKeyed.size(), MSG_NOSIGNAL);
    replies.push_back(read_reply(fd.get()));
  }
  ConnectionStats st = s.server().connection_stats();
  setrlimit(RLIMIT_NOFILE, &before);
  int ok = 0, refused = 0;
  for (const auto& r : replies) {
    if (r.starts_with("HTTP/1.1 200 ")) {
      ++ok;
    } else {
      EXPECT_TRUE(r.starts_with("HTTP/1.1 503 ")) << r;
      EXPECT_NE(r.find("out of file descriptors"), std::string::npos) << r;
      ++refused;
    }
  }
  EXPECT_LE(ok, 2);
  EXPECT_GE(refused, 6);
  EXPECT_EQ(st.refused_no_descriptor, static_cast<std::uint64_t>(refused));
  // Descriptors back: the server accepts again.
  UniqueFd after = open_connection(s.port(), kKeyed);
  EXPECT_TRUE(read_reply(after.get()).starts_with("HTTP/1.1 200 "));
}

}  // namespace
}  // namespace corral::http
