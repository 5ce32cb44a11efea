// HEAD at the HTTP layer (issue 14 item 4; RFC 9110 9.3.2, RFC 9112 6.3):
// whatever a handler writes, the answer to HEAD is the status and fields
// of the GET answer and no body byte, so the next response on a kept-alive
// connection starts where the client expects it. Raw sockets see the exact
// bytes.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "http/http_client.h"
#include "http/http_server.h"

namespace corral::http {
namespace {

// Answers by path, in every way a handler can: send(), start() with a
// length, start() chunked, a 204, and no answer at all (the server's 500).
void handler(const Peer&, const RequestHead& req, BodyReader&, ResponseWriter& out) {
  const Headers ct = {{"Content-Type", "text/plain"}};
  if (req.path == "/send") {
    (void)out.send(200, ct, "hello");
  } else if (req.path == "/length") {
    (void)out.start(200, ct, 5);
    (void)out.write("hel");
    (void)out.write("lo");
    (void)out.finish();
  } else if (req.path == "/chunked") {
    (void)out.start(200, ct, std::nullopt);
    (void)out.write("hel");
    (void)out.write("lo");
    (void)out.finish();
  } else if (req.path == "/none") {
    (void)out.send(204, {}, "");
  } else if (req.path == "/missing") {
    (void)out.send(404, ct, "no such thing");
  }  // anything else: no answer
}

class HeadServer {
 public:
  HeadServer() : server_(handler) {
    auto s = server_.listen_tcp("127.0.0.1", 0);
    EXPECT_TRUE(s.has_value()) << s.error().message;
    thread_ = std::thread([this] { server_.run(); });
  }
  ~HeadServer() {
    server_.stop();
    thread_.join();
  }
  std::uint16_t port() const { return server_.bound_port(); }
  UniqueFd connect() {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_.bound_port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }

 private:
  Server server_;
  std::thread thread_;
};

void send_all(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

// Exactly `n` bytes (fewer if the server closes first).
std::string read_n(int fd, std::size_t n) {
  std::string out;
  char buf[4096];
  while (out.size() < n) {
    pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) break;
    ssize_t got = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return out;
}

// Up to and including the blank line that ends a head.
std::string read_head(int fd) {
  std::string out;
  while (!out.ends_with("\r\n\r\n")) {
    std::string c = read_n(fd, 1);
    if (c.empty()) break;
    out += c;
  }
  return out;
}

bool has_field(const std::string& head, const std::string& line) {
  return head.find("\r\n" + line + "\r\n") != std::string::npos;
}

// HEAD, then GET on the same connection, for every way of answering: the
// HEAD answer has GET's status and framing fields, and the GET answer
// comes right after its head.
TEST(HttpServerHead, NoBodyWhateverTheHandlerWrites) {
  HeadServer s;
  UniqueFd fd = s.connect();
  struct Case {
    std::string path, status, framing;
  };
  const Case cases[] = {
      {"/send", "200", "Content-Length: 5"},
      {"/length", "200", "Content-Length: 5"},
      {"/chunked", "200", "Transfer-Encoding: chunked"},
      {"/none", "204", ""},
      {"/missing", "404", "Content-Length: 13"},
      {"/unanswered", "500", "Content-Type: application/json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    send_all(fd.get(), "HEAD " + c.path + " HTTP/1.1\r\nHost: a\r\n\r\n");
    std::string head = read_head(fd.get());
    EXPECT_TRUE(head.starts_with("HTTP/1.1 " + c.status + " ")) << head;
    if (!c.framing.empty()) {
      EXPECT_TRUE(has_field(head, c.framing)) << head;
    }
    EXPECT_FALSE(has_field(head, "Connection: close")) << head;
    // The next bytes are the next answer's.
    send_all(fd.get(), "GET /send HTTP/1.1\r\nHost: a\r\n\r\n");
    std::string next = read_head(fd.get());
    EXPECT_TRUE(next.starts_with("HTTP/1.1 200 OK\r\n")) << "after HEAD " << c.path << ": " << next;
    EXPECT_EQ(read_n(fd.get(), 5), "hello");
  }
}

// HTTP/1.0 has no chunked coding: a streamed GET ends by closing, but a
// HEAD answer ends with its head, so the connection may stay.
TEST(HttpServerHead, Http10StreamedHeadKeepsTheConnection) {
  HeadServer s;
  UniqueFd fd = s.connect();
  send_all(fd.get(), "HEAD /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  std::string head = read_head(fd.get());
  EXPECT_TRUE(head.starts_with("HTTP/1.1 200 ")) << head;
  EXPECT_EQ(head.find("Transfer-Encoding"), std::string::npos) << head;
  EXPECT_TRUE(has_field(head, "Connection: keep-alive")) << head;
  send_all(fd.get(), "GET /send HTTP/1.0\r\n\r\n");
  std::string next = read_head(fd.get());
  EXPECT_TRUE(next.starts_with("HTTP/1.1 200 OK\r\n")) << next;
  EXPECT_EQ(read_n(fd.get(), 5), "hello");
}

// The HTTP layer's own refusals of a HEAD (a malformed request) carry no
// body either; they close the connection.
TEST(HttpServerHead, RefusedHeadHasNoBody) {
  HeadServer s;
  UniqueFd fd = s.connect();
  send_all(fd.get(), "HEAD /a%zz HTTP/1.1\r\nHost: a\r\n\r\n");
  std::string head = read_head(fd.get());
  EXPECT_TRUE(head.starts_with("HTTP/1.1 400 ")) << head;
  EXPECT_TRUE(has_field(head, "Connection: close")) << head;
  EXPECT_EQ(read_n(fd.get(), 1), "") << "a body after the head of a HEAD answer";
}

// corral's own client reads a HEAD answer as ending with its head, so it
// keeps the connection in step too.
TEST(HttpServerHead, ClientReadsNoBodyAfterHead) {
  HeadServer s;
  auto ep = Endpoint::parse("http://127.0.0.1:" + std::to_string(s.port()));
  ASSERT_TRUE(ep.has_value()) << ep.error().message;
  auto c = Client::connect(*ep, std::chrono::seconds(5));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  for (const char* path : {"/send", "/chunked", "/missing"}) {
    SCOPED_TRACE(path);
    auto head = c->send("HEAD", path, {}, "");
    ASSERT_TRUE(head.has_value()) << head.error().message;
    auto none = c->read_all(1024);
    ASSERT_TRUE(none.has_value()) << none.error().message;
    EXPECT_EQ(*none, "");
    auto get = c->send("GET", "/send", {}, "");
    ASSERT_TRUE(get.has_value()) << get.error().message;
    EXPECT_EQ(get->status, 200);
    auto body = c->read_all(1024);
    ASSERT_TRUE(body.has_value()) << body.error().message;
    EXPECT_EQ(*body, "hello");
  }
}

}  // namespace
}  // namespace corral::http
