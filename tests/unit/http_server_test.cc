// The server and the client together, over real sockets: TCP on 127.0.0.1
// (port 0) and unix sockets in a temporary directory. Raw sockets play the
// misbehaving clients.
#include "http/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "http/http_client.h"

namespace corral::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string temp_dir() {
  std::string tmpl = ::testing::TempDir() + "corral-http-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return {};
  return tmpl;
}

// A Server running on its own thread; stops and joins when destroyed.
class TestServer {
 public:
  explicit TestServer(Handler handler, ServerOptions options = {}, bool tcp = true)
      : server_(std::move(handler), options) {
    if (tcp) {
      auto s = server_.listen_tcp("127.0.0.1", 0);
      EXPECT_TRUE(s.has_value()) << s.error().message;
    }
  }
  ~TestServer() { stop(); }

  Status listen_unix(const std::string& path, mode_t mode = 0600) {
    return server_.listen_unix(path, mode);
  }
  void start() {
    thread_ = std::thread([this] { server_.run(); });
  }
  void stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  Server& server() { return server_; }
  std::uint16_t port() const { return server_.bound_port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

 private:
  Server server_;
  std::thread thread_;
};

Client connect_client(const std::string& url) {
  auto ep = Endpoint::parse(url);
  EXPECT_TRUE(ep.has_value()) << ep.error().message;
  auto c = Client::connect(*ep, 2s);
  if (!c) ADD_FAILURE() << c.error().message;
  return std::move(*c);
}

// A raw TCP or unix connection for the tests of bad clients.
UniqueFd raw_connect(std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

void raw_send(int fd, std::string_view bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Everything until the server closes (or `limit` passes).
std::string read_until_close(int fd, std::chrono::milliseconds limit = 3000ms) {
  std::string out;
  auto deadline = Clock::now() + limit;
  char buf[4096];
  while (Clock::now() < deadline) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ADD_FAILURE() << "the server did not close the connection";
  return out;
}

// Reads up to and including the next blank line.
std::string read_head(int fd) {
  std::string out;
  char c;
  while (!out.ends_with("\r\n\r\n")) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 3000) <= 0 || ::recv(fd, &c, 1, 0) != 1) break;
    out.push_back(c);
  }
  return out;
}

Handler echo_handler() {
  return [](const Peer& peer, const RequestHead& req, BodyReader& body, ResponseWriter& w) {
    auto data = body.read_all(1 << 20);
    if (!data) {
      (void)w.send(400, {}, data.error().message);
      return;
    }
    std::string text = req.method + " " + req.path + " " + req.query + " " +
                       (peer.kind == Peer::kUnix ? "unix" : peer.address) + "\n" + *data;
    (void)w.send(200, {{"Content-Type", "text/plain"}}, text);
  };
}

TEST(HttpServer, KeepAliveOverTcp) {
  TestServer ts(echo_handler());
  ts.start();
  Client c = connect_client(ts.url());
  std::string peer;
  for (int i = 0; i < 3; ++i) {
    auto r = c.send("POST", "/v1/items?n=" + std::to_string(i), {}, "payload");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->status, 200);
    EXPECT_TRUE(r->keep_alive);
    auto body = c.read_all(1024);
    ASSERT_TRUE(body.has_value()) << body.error().message;
    std::string line = body->substr(0, body->find('\n'));
    EXPECT_TRUE(line.starts_with("POST /v1/items n=" + std::to_string(i) + " 127.0.0.1:")) << line;
    EXPECT_TRUE(body->ends_with("\npayload"));
    // The same client port each time: one connection carried all three.
    std::string this_peer = line.substr(line.rfind(' ') + 1);
    if (i == 0) peer = this_peer;
    EXPECT_EQ(this_peer, peer);
  }
  EXPECT_EQ(ts.server().active_connections(), 1u);
}

TEST(HttpServer, UnixSocketWithPeerCredentials) {
  std::string dir = temp_dir();
  std::string path = dir + "/corral.sock";
  TestServer ts(
      [](const Peer& peer, const RequestHead&, BodyReader&, ResponseWriter& w) {
        (void)w.send(
            200, {},
            std::to_string(peer.pid) + " " + std::to_string(peer.uid) + " " + peer.address);
      },
      {}, false);
  ASSERT_TRUE(ts.listen_unix(path).has_value());
  ts.start();
  for (std::string url : {"unix:" + path, "unix://" + path}) {
    Client c = connect_client(url);
    auto r = c.send("GET", "/whoami", {}, "");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(c.read_all(1024).value(),
              std::to_string(::getpid()) + " " + std::to_string(::getuid()) + " " + path);
  }
  ts.stop();
  // The socket file goes with the server.
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

TEST(HttpServer, ChunkedRequestAndResponseBodies) {
  TestServer ts([](const Peer&, const RequestHead& req, BodyReader& body, ResponseWriter& w) {
    EXPECT_TRUE(req.chunked);
    EXPECT_FALSE(body.declared_length().has_value());
    ASSERT_TRUE(w.start(200, {}, std::nullopt).has_value());
    // Echo each piece back as its own chunk, upper-cased.
    char buf[7];
    while (true) {
      auto n = body.read(buf, sizeof(buf));
      ASSERT_TRUE(n.has_value()) << n.error().message;
      if (*n == 0) break;
      for (std::size_t i = 0; i < *n; ++i) buf[i] = static_cast<char>(std::toupper(buf[i]));
      ASSERT_TRUE(w.write(std::string_view(buf, *n)).has_value());
    }
    ASSERT_TRUE(w.write("").has_value());  // no-op, does not end the body
    ASSERT_TRUE(w.finish().has_value());
    ASSERT_TRUE(w.finish().has_value());  // idempotent
  });
  ts.start();
  Client c = connect_client(ts.url());
  std::vector<std::string> pieces = {"hello ", "chunked ", "", "world", "!"};
  std::size_t next = 0;
  BodySource source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    while (next < pieces.size() && pieces[next].empty()) ++next;  // 0 would end the body
    if (next == pieces.size()) return 0;
    std::string& p = pieces[next++];
    std::memcpy(buf, p.data(), std::min(cap, p.size()));
    return p.size();
  };
  for (int round = 0; round < 2; ++round) {
    next = 0;
    auto r = c.send_streaming("PUT", "/upload", {}, source, std::nullopt);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_TRUE(r->chunked);
    EXPECT_EQ(c.read_all(1024).value(), "HELLO CHUNKED WORLD!");
  }
}

TEST(HttpServer, ExpectContinueIsAnsweredWhenTheHandlerReads) {
  TestServer ts(echo_handler());
  ts.start();
  UniqueFd fd = raw_connect(ts.port());
  raw_send(fd.get(),
           "POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(read_head(fd.get()), "HTTP/1.1 100 Continue\r\n\r\n");
  raw_send(fd.get(), "hello");
  std::string head = read_head(fd.get());
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 OK\r\n")) << head;

  // Through the client as well.
  Client c = connect_client(ts.url());
  auto r = c.send("POST", "/e", {{"Expect", "100-continue"}}, "body!");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(c.read_all(1024)->ends_with("\nbody!"));
}

TEST(HttpServer, ExpectContinueRefusedWithoutReadingTheBody) {
  TestServer ts([](const Peer&, const RequestHead&, BodyReader&, ResponseWriter& w) {
    (void)w.send(413, {}, "too big");
  });
  ts.start();
  UniqueFd fd = raw_connect(ts.port());
  raw_send(fd.get(),
           "PUT /f HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 99999\r\n\r\n");
  std::string all = read_until_close(fd.get());
  EXPECT_TRUE(all.starts_with("HTTP/1.1 413 Content Too Large\r\n")) << all;
  EXPECT_NE(all.find("Connection: close\r\n"), std::string::npos) << all;

  // The client learns the answer without sending the body.
  Client c = connect_client(ts.url());
  bool source_called = false;
  auto r = c.send_streaming(
      "PUT", "/f", {{"Expect", "100-continue"}},
      [&](char*, std::size_t) -> Result<std::size_t> {
        source_called = true;
        return 0;
      },
      std::uint64_t{1} << 30);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(c.read_all(100).value(), "too big");
  EXPECT_FALSE(source_called);
}

// Fletcher-style sum over 64-bit words, position-dependent. Pieces are
// staged into aligned 1 MiB blocks so the sum runs over aligned words (fast
// even in the unoptimized sanitizer build).
class Checksum {
 public:
  void update(const char* p, std::size_t n) {
    while (n > 0) {
      std::size_t k = std::min(n, kBlock - staged_);
      std::memcpy(bytes() + staged_, p, k);
      staged_ += k;
      p += k;
      n -= k;
      if (staged_ == kBlock) flush();
    }
  }
  std::uint64_t value() {
    flush();
    return a_ ^ (b_ * 0x9E3779B97F4A7C15ull) ^ total_;
  }

 private:
  static constexpr std::size_t kBlock = 1 << 20;
  void flush() {
    std::memset(bytes() + staged_, 0, (8 - staged_ % 8) % 8);
    const std::uint64_t* w = words_.get();
    for (std::size_t i = 0, words = (staged_ + 7) / 8; i < words; ++i) {
      a_ += w[i];
      b_ += a_;
    }
    total_ += staged_;
    staged_ = 0;
  }
  char* bytes() { return reinterpret_cast<char*>(words_.get()); }
  std::unique_ptr<std::uint64_t[]> words_{new std::uint64_t[kBlock / 8]};
  std::size_t staged_ = 0;
  std::uint64_t a_ = 1, b_ = 0, total_ = 0;
};

// A fixed pseudo-random block; stream byte i is block[i % size].
const std::string& pattern_block() {
  static const std::string block = [] {
    std::string b(1 << 20, '\0');
    std::uint64_t x = 0x243F6A8885A308D3ull;
    for (char& c : b) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      c = static_cast<char>(x);
    }
    return b;
  }();
  return block;
}

std::uint64_t expected_sum(std::uint64_t size) {
  const std::string& block = pattern_block();
  Checksum sum;
  for (std::uint64_t i = 0; i < size; i += block.size()) sum.update(block.data(), block.size());
  return sum.value();
}

// 64 MiB each way with Content-Length, 16 MiB each way chunked.
TEST(HttpServer, Streams64MiBBothWaysWithChecksums) {
  const std::string& block = pattern_block();

  std::string dir = temp_dir();
  TestServer ts(
      [&](const Peer&, const RequestHead& req, BodyReader& body, ResponseWriter& w) {
        if (req.method == "PUT") {
          Checksum sum;
          std::unique_ptr<char[]> buf(new char[1 << 20]);
          while (true) {
            auto n = body.read(buf.get(), 1 << 20);
            if (!n) return (void)w.send(400, {}, n.error().message);
            if (*n == 0) break;
            sum.update(buf.get(), *n);
          }
          (void)w.send(200, {}, std::to_string(sum.value()));
          return;
        }
        // GET: with a length, or chunked when asked.
        bool chunked = req.query == "chunked";
        std::uint64_t size = (chunked ? 16ull : 64ull) << 20;
        if (!w.start(200, {}, chunked ? std::nullopt : std::optional<std::uint64_t>(size))) {
          return;
        }
        for (std::uint64_t sent = 0; sent < size; sent += block.size()) {
          if (!w.write(block)) return;
        }
        (void)w.finish();
      },
      {}, false);
  ASSERT_TRUE(ts.listen_unix(dir + "/s.sock").has_value());
  ts.start();
  Client c = connect_client("unix:" + dir + "/s.sock");

  for (bool chunked : {false, true}) {
    const std::uint64_t kSize = (chunked ? 16ull : 64ull) << 20;
    const std::uint64_t expected = expected_sum(kSize);
    std::uint64_t produced = 0;
    BodySource source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
      std::size_t n = std::min<std::uint64_t>({cap, kSize - produced, block.size()});
      std::memcpy(buf, block.data(), n);  // cap is a multiple of the block size
      produced += n;
      return n;
    };
    auto t0 = Clock::now();
    auto r = c.send_streaming("PUT", "/big", {}, source,
                              chunked ? std::nullopt : std::optional<std::uint64_t>(kSize));
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(c.read_all(100).value(), std::to_string(expected));
    double up = std::chrono::duration<double>(Clock::now() - t0).count();

    t0 = Clock::now();
    r = c.send("GET", chunked ? "/big?chunked" : "/big", {}, "");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->chunked, chunked);
    Checksum got;
    std::unique_ptr<char[]> buf(new char[1 << 20]);
    while (true) {
      auto n = c.read_body(buf.get(), 1 << 20);
      ASSERT_TRUE(n.has_value()) << n.error().message;
      if (*n == 0) break;
      got.update(buf.get(), *n);
    }
    double down = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(got.value(), expected);
    std::printf("%llu MiB over a unix socket (%s): upload %.0f MB/s, download %.0f MB/s\n",
                static_cast<unsigned long long>(kSize >> 20),
                chunked ? "chunked" : "content-length", kSize / up / 1e6, kSize / down / 1e6);
  }
  ts.stop();
  std::filesystem::remove_all(dir);
}

TEST(HttpServer, ConnectionCapAnswers503) {
  ServerOptions opt;
  opt.connections.tcp = 1;
  TestServer ts(echo_handler(), opt);
  ts.start();
  Client a = connect_client(ts.url());
  ASSERT_TRUE(a.send("GET", "/", {}, "").has_value());
  ASSERT_TRUE(a.read_all(1024).has_value());
  ASSERT_EQ(ts.server().active_connections(), 1u);  // a stays connected

  UniqueFd b = raw_connect(ts.port());
  std::string all = read_until_close(b.get());
  EXPECT_TRUE(all.starts_with("HTTP/1.1 503 Service Unavailable\r\n")) << all;
  EXPECT_NE(all.find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(
      all.ends_with("{\"error\":{\"code\":\"overloaded\","
                    "\"message\":\"too many connections; retry later\"}}"))
      << all;
  // The first connection still works.
  ASSERT_TRUE(a.send("GET", "/", {}, "").has_value());
  EXPECT_TRUE(a.read_all(1024).has_value());
}

TEST(HttpServer, HeadTimeout) {
  ServerOptions opt;
  opt.head_timeout = 150ms;
  TestServer ts(echo_handler(), opt);
  ts.start();
  // Half a head: 408, then close.
  UniqueFd fd = raw_connect(ts.port());
  auto t0 = Clock::now();
  raw_send(fd.get(), "GET / HTTP/1.1\r\nHo");
  std::string all = read_until_close(fd.get());
  EXPECT_LT(Clock::now() - t0, 1500ms);
  EXPECT_TRUE(all.starts_with("HTTP/1.1 408 Request Timeout\r\n")) << all;
  EXPECT_NE(all.find("\"code\":\"request_timeout\""), std::string::npos) << all;
  // Nothing at all: closed without a word.
  UniqueFd quiet = raw_connect(ts.port());
  EXPECT_EQ(read_until_close(quiet.get()), "");
}

TEST(HttpServer, IdleKeepAliveTimeoutClosesAndTheClientReconnects) {
  ServerOptions opt;
  opt.idle_timeout = 100ms;
  TestServer ts(echo_handler(), opt);
  ts.start();
  Client c = connect_client(ts.url());
  ASSERT_TRUE(c.send("GET", "/1", {}, "").has_value());
  ASSERT_TRUE(c.read_all(1024).has_value());
  auto deadline = Clock::now() + 2s;
  while (ts.server().active_connections() != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(ts.server().active_connections(), 0u);
  auto r = c.send("GET", "/2", {}, "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(c.read_all(1024)->starts_with("GET /2 "));
}

TEST(HttpServer, MalformedHeadsGet400Json) {
  TestServer ts(echo_handler());
  ts.start();
  for (std::string bad : {
           "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
           "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n",
           "GET / HTTP/1.1\nHost: a\r\n\r\n",
           "GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n",
           "GET / HTTP/1.1\r\n\r\n",
           "BREW /pot HTCPCP/1.0\r\n\r\n",
       }) {
    UniqueFd fd = raw_connect(ts.port());
    raw_send(fd.get(), bad);
    std::string all = read_until_close(fd.get());
    EXPECT_TRUE(all.starts_with("HTTP/1.1 400 Bad Request\r\n")) << all;
    EXPECT_NE(all.find("Content-Type: application/json\r\n"), std::string::npos);
    EXPECT_NE(all.find("Connection: close\r\n"), std::string::npos);
    EXPECT_NE(all.find("\r\n\r\n{\"error\":{\"code\":\"bad_request\",\"message\":\""),
              std::string::npos)
        << all;
  }
  // A head over the limit: 431.
  UniqueFd fd = raw_connect(ts.port());
  raw_send(fd.get(), "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(20000, 'x'));
  std::string all = read_until_close(fd.get());
  EXPECT_TRUE(all.starts_with("HTTP/1.1 431 ")) << all.substr(0, 100);
}

TEST(HttpServer, UnixSocketModeIsExactWhateverTheUmask) {
  std::string dir = temp_dir();
  mode_t old = ::umask(0);
  {
    TestServer ts(echo_handler(), {}, false);
    ASSERT_TRUE(ts.listen_unix(dir + "/a.sock", 0600).has_value());
    struct stat st;
    ASSERT_EQ(::stat((dir + "/a.sock").c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  ::umask(077);
  {
    TestServer ts(echo_handler(), {}, false);
    ASSERT_TRUE(ts.listen_unix(dir + "/b.sock", 0660).has_value());
    struct stat st;
    ASSERT_EQ(::stat((dir + "/b.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
  }
  ::umask(old);
  // No temporary names are left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ADD_FAILURE() << "left over: " << e.path();
  }
  std::filesystem::remove_all(dir);
}

TEST(HttpServer, UnixSocketPathRules) {
  std::string dir = temp_dir();
  // A regular file is never replaced.
  std::string file = dir + "/file";
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  TestServer a(echo_handler(), {}, false);
  auto s = a.listen_unix(file);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kAlreadyExists);

  // A live socket is not taken over; a stale one is replaced.
  std::string path = dir + "/s.sock";
  ASSERT_TRUE(a.listen_unix(path).has_value());
  TestServer b(echo_handler(), {}, false);
  s = b.listen_unix(path);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.error().message.find("another server listens"), std::string::npos);

  UniqueFd stale(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un un = {};
  un.sun_family = AF_UNIX;
  std::string stale_path = dir + "/stale.sock";
  std::memcpy(un.sun_path, stale_path.c_str(), stale_path.size() + 1);
  ASSERT_EQ(::bind(stale.get(), reinterpret_cast<sockaddr*>(&un), sizeof(un)), 0);
  stale.reset();  // the file stays, nobody listens
  EXPECT_TRUE(b.listen_unix(stale_path).has_value());
  std::filesystem::remove_all(dir);
}

TEST(HttpServer, StopWhileAConnectionIsIdle) {
  ServerOptions opt;
  opt.idle_timeout = 60s;
  auto ts = std::make_unique<TestServer>(echo_handler(), opt);
  ts->start();
  Client c = connect_client(ts->url());
  ASSERT_TRUE(c.send("GET", "/", {}, "").has_value());
  ASSERT_TRUE(c.read_all(1024).has_value());
  ASSERT_EQ(ts->server().active_connections(), 1u);
  auto t0 = Clock::now();
  ts->stop();  // run() returns only after the connection thread ended
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(ts->server().active_connections(), 0u);
  ts.reset();
}

TEST(HttpServer, StopBeforeRunAndFromAnotherThread) {
  TestServer ts(echo_handler());
  ts.server().stop();
  ts.server().run();  // returns at once
  SUCCEED();
}

TEST(HttpServer, WhatHandlersForget) {
  TestServer ts([](const Peer&, const RequestHead& req, BodyReader& body, ResponseWriter& w) {
    if (req.path == "/nothing") return;  // 500
    if (req.path == "/unfinished") {
      (void)w.start(200, {}, std::nullopt);
      (void)w.write("part");
      return;  // the server ends the chunked body
    }
    if (req.path == "/ignore-body") {
      (void)w.send(200, {}, "ignored " + std::to_string(body.declared_length().value_or(0)));
      return;  // a small body is drained, the connection stays
    }
    if (req.path == "/bad-header") {
      auto s = w.send(200, {{"X-Evil", "a\r\nSet-Cookie: x"}}, "");
      (void)w.send(200, {}, s ? "sent" : "refused");
      return;
    }
    if (req.path == "/throw") throw std::runtime_error("handler bug");
    (void)w.send(200, {}, "ok");
  });
  ts.start();
  Client c = connect_client(ts.url());
  auto r = c.send("GET", "/nothing", {}, "");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(c.read_all(1024).value(),
            "{\"error\":{\"code\":\"internal\",\"message\":\"the request handler sent no "
            "response\"}}");

  r = c.send("GET", "/unfinished", {}, "");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(c.read_all(1024).value(), "part");

  r = c.send("POST", "/ignore-body", {}, std::string(100000, 'z'));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->keep_alive);
  EXPECT_EQ(c.read_all(1024).value(), "ignored 100000");

  r = c.send("GET", "/bad-header", {}, "");
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->header("set-cookie").has_value());
  EXPECT_EQ(c.read_all(1024).value(), "refused");

  r = c.send("GET", "/throw", {}, "");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 500);
  EXPECT_FALSE(r->keep_alive);
  ASSERT_TRUE(c.read_all(1024).has_value());

  // A big unread body is not drained: the connection closes instead.
  r = c.send("POST", "/ignore-body", {}, std::string(3 << 20, 'z'));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(r->keep_alive);
  EXPECT_EQ(c.read_all(1024).value(), "ignored 3145728");
  r = c.send("GET", "/ok", {}, "");  // on a new connection
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(c.read_all(1024).value(), "ok");
}

TEST(HttpServer, PipelinedRequestsAndHttp10) {
  TestServer ts(echo_handler());
  ts.start();
  UniqueFd fd = raw_connect(ts.port());
  raw_send(fd.get(),
           "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
           "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string all = read_until_close(fd.get());
  std::size_t first = all.find("POST /a ");
  std::size_t second = all.find("GET /b ");
  EXPECT_NE(first, std::string::npos) << all;
  EXPECT_NE(second, std::string::npos) << all;
  EXPECT_LT(first, second);

  // HTTP/1.0 without keep-alive: one response, then close.
  UniqueFd old = raw_connect(ts.port());
  raw_send(old.get(), "GET /old HTTP/1.0\r\n\r\n");
  all = read_until_close(old.get());
  EXPECT_TRUE(all.starts_with("HTTP/1.1 200 OK\r\n")) << all;
  EXPECT_NE(all.find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpServer, StreamingHandlerSeesThePeerLeave) {
  std::atomic<bool> saw_gone{false};
  TestServer ts([&](const Peer&, const RequestHead&, BodyReader&, ResponseWriter& w) {
    (void)w.start(200, {}, std::nullopt);
    std::string piece(4096, 'x');
    auto deadline = Clock::now() + 3s;
    while (Clock::now() < deadline) {
      if (w.peer_gone() || !w.write(piece)) {
        saw_gone = true;
        return;
      }
      std::this_thread::sleep_for(1ms);
    }
  });
  ts.start();
  {
    Client c = connect_client(ts.url());
    ASSERT_TRUE(c.send("GET", "/stream", {}, "").has_value());
    char buf[100];
    ASSERT_TRUE(c.read_body(buf, sizeof(buf)).has_value());
  }  // the client goes away mid-stream
  auto deadline = Clock::now() + 2s;
  while (!saw_gone && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(saw_gone);
}

TEST(HttpClient, EndpointParse) {
  auto ep = Endpoint::parse("unix:/run/corral/corral.sock");
  ASSERT_TRUE(ep.has_value());
  EXPECT_TRUE(ep->is_unix);
  EXPECT_EQ(ep->unix_path, "/run/corral/corral.sock");
  EXPECT_EQ(ep->host_header(), "localhost");
  EXPECT_EQ(Endpoint::parse("unix:///run/x.sock")->unix_path, "/run/x.sock");

  ep = Endpoint::parse("http://127.0.0.1:7070");
  ASSERT_TRUE(ep.has_value());
  EXPECT_FALSE(ep->is_unix);
  EXPECT_EQ(ep->host, "127.0.0.1");
  EXPECT_EQ(ep->port, 7070);
  EXPECT_EQ(ep->host_header(), "127.0.0.1:7070");
  ep = Endpoint::parse("http://localhost/");
  EXPECT_EQ(ep->port, 80);
  EXPECT_EQ(ep->host_header(), "localhost");
  ep = Endpoint::parse("http://[::1]:7070");
  ASSERT_TRUE(ep.has_value());
  EXPECT_EQ(ep->host, "::1");
  EXPECT_EQ(ep->host_header(), "[::1]:7070");

  auto https = Endpoint::parse("https://127.0.0.1:7070");
  ASSERT_FALSE(https.has_value());
  EXPECT_NE(https.error().message.find("https is not supported"), std::string::npos);
  for (std::string bad : std::vector<std::string>{
           "", "ftp://x", "unix:", "unix:relative.sock", "http://", "http://:80",
           "http://127.0.0.1:0", "http://127.0.0.1:65536", "http://127.0.0.1:x",
           "http://127.0.0.1/api", "http://user@127.0.0.1", "http://[::1", "http://[127.0.0.1]:80",
           "http://example.com", std::string("unix:/") + std::string(200, 'a')}) {
    auto r = Endpoint::parse(bad);
    EXPECT_FALSE(r.has_value()) << bad;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(HttpClient, ConnectFailsWithAHint) {
  std::string dir = temp_dir();
  auto c = Client::connect(Endpoint::parse("unix:" + dir + "/none.sock").value(), 500ms);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("connecting to unix:"), std::string::npos);
  EXPECT_NE(c.error().hint.find("daemon running"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HttpClient, RefusesHeadersThatWouldSplitTheRequest) {
  TestServer ts(echo_handler());
  ts.start();
  Client c = connect_client(ts.url());
  EXPECT_FALSE(c.send("GET", "/a b", {}, "").has_value());
  EXPECT_FALSE(c.send("GET", "/", {{"X", "a\r\nY: b"}}, "").has_value());
  EXPECT_FALSE(c.send("GET", "/", {{"Content-Length", "3"}}, "").has_value());
  EXPECT_FALSE(c.send("G T", "/", {}, "").has_value());
  auto r = c.send("GET", "/still-fine", {}, "");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(c.read_all(1024)->starts_with("GET /still-fine "));
}

}  // namespace
}  // namespace corral::http
