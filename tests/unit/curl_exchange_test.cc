// http::CurlSession (http/curl_exchange.h): what it refuses before libcurl
// sees it, and how a server that is down, silent or too talkative ends an
// exchange. The servers are raw sockets on loopback in this process.
#include "http/curl_exchange.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/fs.h"

namespace corral::http {
namespace {

// A listener on 127.0.0.1 that runs `serve` on its first connection.
class RawServer {
 public:
  explicit RawServer(std::function<void(int)> serve) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 4);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      serve(c);
      close(c);
    });
  }
  ~RawServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/x"; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// What the client sent, up to and with `marker` (or until it closed).
std::string read_until(int c, std::string_view marker) {
  std::string got;
  char buf[4096];
  while (got.find(marker) == std::string::npos) {
    ssize_t n = read(c, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}

void read_head(int c) { (void)read_until(c, "\r\n\r\n"); }

TEST(CurlExchange, RefusesUrlsAndHeadersItWillNotSend) {
  CurlSession s;
  for (const char* url : {"ftp://127.0.0.1/x", "file:///etc/passwd", "http://127.0.0.1/a b",
                          "http://127.0.0.1/a\r\nX: 1", "127.0.0.1:80/x", ""}) {
    CurlRequest r;
    r.url = url;
    auto a = s.fetch(r, 1024);
    ASSERT_FALSE(a) << url;
    EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument) << url;
  }
  for (auto [name, value] : {std::pair<std::string, std::string>{"x-token", "abc\r\nX-Injected: 1"},
                             {"x-token", std::string("a\0b", 3)},
                             {"bad name", "v"},
                             {"bad:name", "v"},
                             {"", "v"}}) {
    CurlRequest r;
    r.url = "http://127.0.0.1:1/x";
    r.headers = {{name, value}};
    auto a = s.fetch(r, 1024);
    ASSERT_FALSE(a) << name;
    EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument) << name << ": " << a.error().to_string();
  }
}

TEST(CurlExchange, AServerThatIsDownIsUnavailable) {
  CurlSession s;
  CurlRequest r;
  r.url = "http://127.0.0.1:1/x";  // nothing listens on port 1
  auto a = s.fetch(r, 1024);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kUnavailable) << a.error().to_string();
}

TEST(CurlExchange, ASilentServerTimesOutAtTheStallTimeout) {
  std::atomic<bool> done{false};
  RawServer server([&](int c) {
    read_head(c);
    while (!done) usleep(20'000);  // never answers
  });
  CurlSession s;
  CurlRequest r;
  r.url = server.url();
  r.stall_timeout = std::chrono::milliseconds(1000);
  auto a = s.fetch(r, 1024);
  done = true;
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kTimeout) << a.error().to_string();
}

TEST(CurlExchange, AnAnswerOverTheLimitStopsTheExchange) {
  RawServer server([](int c) {
    read_head(c);
    const std::string body(64 * 1024, 'x');
    (void)write_all(
        c, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  CurlSession s;
  CurlRequest r;
  r.url = server.url();
  auto a = s.fetch(r, 1024);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kResourceExhausted) << a.error().to_string();
}

TEST(CurlExchange, TheStatusAndBodyOfAnyAnswerAreTheCallers) {
  std::string seen;
  RawServer server([&](int c) {
    seen = read_until(c, "body!");
    (void)write_all(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
  });
  CurlSession s;
  CurlRequest r;
  r.method = "DELETE";
  r.url = server.url();
  r.headers = {{"x-api-key", "k1"}, {"x-empty", ""}};
  r.body = "body!";
  auto a = s.fetch(r, 1024);
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(a->status, 404);
  EXPECT_EQ(a->body, "nope");
  EXPECT_EQ(seen.rfind("DELETE /x HTTP/1.1\r\n", 0), 0u) << seen;
  EXPECT_NE(seen.find("x-api-key: k1\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("x-empty:"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Expect:"), std::string::npos) << seen;
}

}  // namespace
}  // namespace corral::http
