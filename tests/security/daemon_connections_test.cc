// A client without a key cannot lock anyone out of the daemon, and the
// daemon answers when descriptors run short (issue 14, items 2 and 3;
// docs/api.md "Limits" and "Timeouts", docs/threat-model.md "The daemon's
// surface"). Real `corral serve`, raw sockets on loopback playing the
// hostile clients: slow heads held open past every cap on TCP and on the
// unix socket, from one and from several peer addresses, while requests
// with a key keep working on both listeners; a 401 closes; a slow head is
// dropped at the short unauthenticated deadline; the daemon raises its soft
// RLIMIT_NOFILE and, under a low hard one, answers 503 instead of nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "http/http_client.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A request head cut short: what a slowloris sends, and then nothing.
constexpr std::string_view kSlowHead = "GET /v1/sandboxes HTTP/1.1\r\nHost: corral\r\nX-Slow: ";

// This process holds a thousand and more sockets in the floods.
void raise_own_nofile() {
  struct rlimit r;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &r), 0);
  r.rlim_cur = r.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &r), 0);
}

rlim_t own_hard_nofile() {
  struct rlimit r;
  getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_max;
}

// A daemon started under RLIMIT_NOFILE soft:hard: CORRAL_BIN names a
// script that runs the real binary under prlimit(1) while the harness
// starts it (exec all the way, so the harness's pid is the daemon's).
std::unique_ptr<TestDaemon> daemon_with_nofile(rlim_t soft, rlim_t hard,
                                               const std::string& config = {}) {
  const std::string real = corral_bin();
  const std::string dir = make_temp_dir("nofile");
  const std::string wrapper = dir + "/corral";
  {
    std::ofstream out(wrapper);
    out << "#!/bin/sh\nexec prlimit --nofile=" << soft << ":" << hard << " -- '" << real
        << "' \"$@\"\n";
  }
  chmod(wrapper.c_str(), 0755);
  setenv("CORRAL_BIN", wrapper.c_str(), 1);
  auto td = std::make_unique<TestDaemon>(std::vector<std::string>{}, config);
  setenv("CORRAL_BIN", real.c_str(), 1);
  return td;
}

// The connection limits the start-up line reports.
struct Caps {
  std::size_t tcp = 1024, unauthenticated = 1024, per_peer = 1024, unix_socket = 1024;
  bool reported = false;
};

Caps caps_of(const TestDaemon& td) {
  Caps c;
  std::smatch m;
  static const std::regex re(
      "connections tcp ([0-9]+) \\(([0-9]+) unauthenticated, ([0-9]+) per peer\\), unix "
      "([0-9]+)");
  std::string out = td.output();
  if (!std::regex_search(out, m, re)) return c;
  c.tcp = std::stoul(m[1]);
  c.unauthenticated = std::stoul(m[2]);
  c.per_peer = std::stoul(m[3]);
  c.unix_socket = std::stoul(m[4]);
  c.reported = true;
  return c;
}

// A TCP connection to the daemon from `source` (any 127/8 address: each
// is a peer of its own), or a unix one. -1 on failure.
UniqueFd tcp_connect(std::uint16_t port, const char* source = "127.0.0.1") {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return UniqueFd();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return UniqueFd();
  return fd;
}

UniqueFd unix_connect(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  path.copy(a.sun_path, sizeof a.sun_path - 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return UniqueFd();
  return fd;
}

bool send_text(int fd, std::string_view text) {
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Everything the daemon sends until it closes the connection, or until
// `limit` passes (then *closed is false).
std::string read_until_close(int fd, std::chrono::milliseconds limit, bool* closed) {
  std::string out;
  *closed = false;
  auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      *closed = true;
      return out;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// One response on a kept-alive connection: head and Content-Length body.
std::string read_response(int fd, std::chrono::milliseconds limit) {
  std::string out;
  auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    auto end = out.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::smatch m;
      static const std::regex len("Content-Length: ([0-9]+)", std::regex::icase);
      std::string head = out.substr(0, end);
      std::size_t body = std::regex_search(head, m, len) ? std::stoul(m[1]) : 0;
      if (out.size() >= end + 4 + body) return out;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// Still open: nothing to read and no end of stream, without waiting.
bool still_open(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

std::string authorized_get(const TestDaemon& td, const std::string& target) {
  return "GET " + target + " HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer " + td.api_key() +
         "\r\n\r\n";
}

// Slow heads from `source`, kept at `count` open: whenever the daemon
// closes one, another replaces it (at most one a millisecond: a slowloris,
// not a SYN flood, which is the firewall's to stop).
class Slowloris {
 public:
  Slowloris(std::uint16_t port, std::size_t count, const char* source = "127.0.0.1")
      : port_(port), source_(source) {
    for (std::size_t i = 0; i < count; ++i) fds_.push_back(open_one());
  }
  ~Slowloris() { stop(); }
  void keep_reopening() {
    thread_ = std::thread([this] {
      while (!stop_) {
        for (auto& fd : fds_) {
          if (stop_) break;
          if (fd && still_open(fd.get())) continue;
          fd = open_one();
          std::this_thread::sleep_for(1ms);
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::size_t open_now() const {
    std::size_t n = 0;
    for (const auto& fd : fds_) n += fd && still_open(fd.get()) ? 1 : 0;
    return n;
  }

 private:
  UniqueFd open_one() {
    UniqueFd fd = tcp_connect(port_, source_);
    if (fd) (void)send_text(fd.get(), kSlowHead);
    return fd;
  }
  std::uint16_t port_;
  const char* source_;
  std::vector<UniqueFd> fds_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

// A metric's value from /metrics over the unix socket (-1: not there).
double metric(TestDaemon& td, const std::string& series) {
  auto r = td.request("GET", "/metrics");
  for (std::size_t at = r.body.find(series + " "); at != std::string::npos;
       at = r.body.find(series + " ", at + 1)) {
    if (at == 0 || r.body[at - 1] == '\n') return std::atof(r.body.c_str() + at + series.size());
  }
  return -1;
}

class DaemonConnections : public ::testing::Test {
 protected:
  void SetUp() override { raise_own_nofile(); }
  // A hard limit the test may give a daemon: this process's own (raising
  // it needs CAP_SYS_RESOURCE), at most 1M.
  rlim_t hard() const { return std::min<rlim_t>(own_hard_nofile(), 1 << 20); }
};

// More slow unauthenticated TCP connections than the whole TCP cap, kept
// open by reopening what the daemon closes: requests with a key still get
// in over TCP (fresh connections and one opened before the flood), the
// unix socket still answers, and the daemon holds no more unauthenticated
// connections than their budget.
TEST_F(DaemonConnections, SlowlorisOverTheCapLeavesRoomForKeysOnBothListeners) {
  auto td = daemon_with_nofile(1024, hard());
  ASSERT_TRUE(td->ready()) << td->output();
  Caps caps = caps_of(*td);
  EXPECT_TRUE(caps.reported) << "no connection limits on the start-up line:\n" << td->output();

  // A client with a key, connected before the flood, kept alive.
  UniqueFd early = tcp_connect(td->port());
  ASSERT_TRUE(send_text(early.get(), authorized_get(*td, "/v1/sandboxes")));
  ASSERT_EQ(status_of(read_response(early.get(), 10s)), 200);

  Slowloris flood(td->port(), std::max<std::size_t>(1100, caps.tcp + 100));
  flood.keep_reopening();
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    auto tcp = td->request("GET", "/v1/sandboxes", {}, /*via_tcp=*/true);
    EXPECT_EQ(tcp.status, 200) << tcp.body;
    auto unix_reply = td->request("GET", "/v1/sandboxes");
    EXPECT_EQ(unix_reply.status, 200) << unix_reply.body;
  }
  ASSERT_TRUE(send_text(early.get(), authorized_get(*td, "/v1/sandboxes")));
  EXPECT_EQ(status_of(read_response(early.get(), 10s)), 200);

  double unauth = metric(*td, "corral_http_connections{listener=\"tcp\",state=\"unauthenticated\"}");
  EXPECT_GE(unauth, 0);
  EXPECT_LE(unauth, static_cast<double>(caps.unauthenticated));
  EXPECT_GT(metric(*td, "corral_http_connections_evicted_total"), 0);
  flood.stop();
  // What the client still holds open: no more than the budget (once the
  // last evictions have reached it).
  for (auto deadline = Clock::now() + 3s;
       Clock::now() < deadline && flood.open_now() > caps.unauthenticated;)
    std::this_thread::sleep_for(50ms);
  EXPECT_LE(flood.open_now(), caps.unauthenticated);
}

// The unix socket's own budget: slow connections beyond it get 503
// overloaded at once (not a hang), a TCP client with a key is not touched,
// and the socket answers again once they are gone.
TEST_F(DaemonConnections, UnixSocketHasABudgetOfItsOwn) {
  auto td = daemon_with_nofile(1024, hard());
  ASSERT_TRUE(td->ready()) << td->output();
  Caps caps = caps_of(*td);
  EXPECT_TRUE(caps.reported) << td->output();
  const std::size_t unix_cap = caps.reported ? caps.unix_socket : 64;

  std::vector<UniqueFd> held;
  for (std::size_t i = 0; i < unix_cap; ++i) {
    held.push_back(unix_connect(td->socket_path()));
    ASSERT_TRUE(held.back()) << "connection " << i;
    ASSERT_TRUE(send_text(held.back().get(), kSlowHead));
  }
  std::vector<UniqueFd> extra;
  for (int i = 0; i < 10; ++i) extra.push_back(unix_connect(td->socket_path()));
  for (auto& fd : extra) {
    ASSERT_TRUE(fd);
    bool closed = false;
    std::string reply = read_until_close(fd.get(), 10s, &closed);
    EXPECT_TRUE(closed) << "no answer beyond the unix socket's budget";
    EXPECT_EQ(status_of(reply), 503) << reply;
    EXPECT_NE(reply.find("\"code\":\"overloaded\""), std::string::npos) << reply;
  }
  auto tcp = td->request("GET", "/v1/sandboxes", {}, /*via_tcp=*/true);
  EXPECT_EQ(tcp.status, 200) << tcp.body;
  held.clear();
  // Their threads notice the close; the budget frees up.
  int status = 0;
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline && status != 200;) {
    status = td->request("GET", "/v1/sandboxes").status;
    if (status != 200) std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(status, 200);
}

// A 401 ends the connection: a client without a key cannot keep one open
// by asking again. With a key, the connection stays.
TEST_F(DaemonConnections, UnauthorizedClosesTheConnection) {
  TestDaemon td;
  ASSERT_TRUE(td.ready()) << td.output();
  for (std::string auth : {"", "Authorization: Bearer not-the-key-0123456789\r\n"}) {
    SCOPED_TRACE(auth.empty() ? "no key" : "a wrong key");
    UniqueFd fd = tcp_connect(td.port());
    ASSERT_TRUE(send_text(fd.get(), "GET /v1/sandboxes HTTP/1.1\r\nHost: corral\r\n" + auth +
                                        "\r\n"));
    bool closed = false;
    std::string reply = read_until_close(fd.get(), 10s, &closed);
    EXPECT_EQ(status_of(reply), 401) << reply;
    EXPECT_NE(reply.find("Connection: close\r\n"), std::string::npos) << reply;
    EXPECT_TRUE(closed) << "the connection stayed open after the 401";
  }
  UniqueFd keyed = tcp_connect(td.port());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(send_text(keyed.get(), authorized_get(td, "/v1/sandboxes")));
    EXPECT_EQ(status_of(read_response(keyed.get(), 10s)), 200);
  }
  EXPECT_TRUE(still_open(keyed.get()));
}

// A TCP connection that has not authenticated must send its head within
// serve.connections.unauthenticated_head_timeout (N7's per-request bound,
// made tighter for callers without a key) (here 500 ms, well below
// the 30 s every other head gets): a slow one gets 408 and is closed, a
// silent one is closed without a word, while an authenticated connection
// sending a slow head at the same time is still served.
TEST_F(DaemonConnections, UnauthenticatedHeadDeadlineDropsASlowHead) {
  TestDaemon td({}, "serve:\n  connections:\n    unauthenticated_head_timeout: 500ms\n");
  ASSERT_TRUE(td.ready()) << td.output();
  UniqueFd keyed = tcp_connect(td.port());
  ASSERT_TRUE(send_text(keyed.get(), authorized_get(td, "/v1/sandboxes")));
  ASSERT_EQ(status_of(read_response(keyed.get(), 10s)), 200);
  const std::string next = authorized_get(td, "/v1/sandboxes");
  ASSERT_TRUE(send_text(keyed.get(), next.substr(0, 20)));

  UniqueFd slow = tcp_connect(td.port());
  ASSERT_TRUE(send_text(slow.get(), kSlowHead));
  UniqueFd silent = tcp_connect(td.port());
  bool closed = false;
  std::string reply = read_until_close(slow.get(), 10s, &closed);
  EXPECT_TRUE(closed) << "a slow unauthenticated head kept its connection for 10 s";
  EXPECT_EQ(status_of(reply), 408) << reply;
  EXPECT_NE(reply.find("\"code\":\"request_timeout\""), std::string::npos) << reply;
  EXPECT_EQ(read_until_close(silent.get(), 10s, &closed), "");
  EXPECT_TRUE(closed);

  EXPECT_TRUE(still_open(keyed.get()));
  ASSERT_TRUE(send_text(keyed.get(), next.substr(20)));
  EXPECT_EQ(status_of(read_response(keyed.get(), 10s)), 200);
}

// One address cannot take more than its share of the unauthenticated
// budget: its connections beyond the share are closed (its own oldest
// first), and another address's slow connections are left alone while the
// first keeps opening more.
TEST_F(DaemonConnections, PerPeerBoundOnUnauthenticatedConnections) {
  auto td = daemon_with_nofile(1024, hard());
  ASSERT_TRUE(td->ready()) << td->output();
  Caps caps = caps_of(*td);
  EXPECT_TRUE(caps.reported) << td->output();
  const std::size_t share = caps.reported ? caps.per_peer : 32;

  Slowloris a(td->port(), share + 20, "127.0.0.2");
  Slowloris b(td->port(), 4, "127.0.0.3");
  Slowloris a_more(td->port(), share + 20, "127.0.0.2");
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline && a.open_now() + a_more.open_now() > share)
    std::this_thread::sleep_for(20ms);
  EXPECT_LE(a.open_now() + a_more.open_now(), share);
  EXPECT_EQ(b.open_now(), 4u) << "another peer's flood closed this peer's connections";
  // The newest of A's are the ones kept.
  EXPECT_GT(a_more.open_now(), 0u);
}

// Under systemd's soft limit of 1024 the daemon raises its soft
// RLIMIT_NOFILE to the hard one.
TEST_F(DaemonConnections, RaisesTheSoftDescriptorLimit) {
  const rlim_t hard_limit = std::min<rlim_t>(hard(), 16384);
  ASSERT_GT(hard_limit, 1024u) << "this host's hard RLIMIT_NOFILE is too low for the test";
  auto td = daemon_with_nofile(1024, hard_limit);
  ASSERT_TRUE(td->ready()) << td->output();
  std::ifstream limits("/proc/" + std::to_string(td->pid()) + "/limits");
  std::string line, soft, hard_text;
  while (std::getline(limits, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    fields >> soft >> hard_text;
  }
  EXPECT_EQ(soft, std::to_string(hard_limit));
  EXPECT_EQ(hard_text, std::to_string(hard_limit));
}

// With a hard limit of 512 the daemon sizes its connection limits down
// (and warns): clients with a key that fill them get 503 overloaded, not
// silence, and the unix socket still answers.
TEST_F(DaemonConnections, LowDescriptorLimitAnswers503AndTheSocketStillAnswers) {
  auto td = daemon_with_nofile(512, 512);
  ASSERT_TRUE(td->ready()) << td->output();
  EXPECT_TRUE(td->wait_output("warning: the descriptor limit RLIMIT_NOFILE 512"))
      << td->output();
  std::vector<UniqueFd> kept;
  int refused_at = -1;
  for (int i = 0; i < 600 && refused_at < 0; ++i) {
    UniqueFd fd = tcp_connect(td->port());
    ASSERT_TRUE(fd) << "connect " << i;
    ASSERT_TRUE(send_text(fd.get(), authorized_get(*td, "/v1/sandboxes")));
    std::string reply = read_response(fd.get(), 10s);
    int status = status_of(reply);
    ASSERT_TRUE(status == 200 || status == 503) << "connection " << i << ": " << reply;
    if (status == 503) {
      EXPECT_NE(reply.find("\"code\":\"overloaded\""), std::string::npos) << reply;
      refused_at = i;
    }
    kept.push_back(std::move(fd));
  }
  EXPECT_GT(refused_at, 0) << "no 503 after 600 connections";
  auto unix_reply = td->request("GET", "/v1/sandboxes");
  EXPECT_EQ(unix_reply.status, 200) << unix_reply.body;
}

}  // namespace
}  // namespace corral::testing
