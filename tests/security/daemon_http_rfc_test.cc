// Issue 14 item 4, "HTTP details", against a real daemon on both listeners
// (the unix socket, and TCP with the key), through raw sockets so that the
// exact bytes on the wire are seen (docs/api.md "Conventions", "Routes",
// "Errors", "Limits"; RFC 9110 and 9112):
//   - HEAD answers with the GET answer's status and fields and no body, on
//     every GET route (JSON, chunked output, a followed output of a running
//     process, a file download) and on error answers, so HEAD then GET on
//     one kept-alive connection stays in sync;
//   - a request that repeats a single-valued field (Authorization, Host,
//     Content-Length, Content-Type, Transfer-Encoding, Idempotency-Key, ...)
//     is refused with 400 naming the field, whichever copy is the valid one;
//   - the path is matched as sent: an escape in it is never decoded, so
//     "%2F" never splits a segment; query values are decoded once;
//   - the Limits table's rows for the head: a target over 8 KiB, a head over
//     16 KiB, more than 100 fields all answer 431 head_too_large.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/daemon_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

enum class Listener { kUnix, kTcp };

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One response as it came off the wire.
struct Wire {
  int status = 0;
  std::string head;                                // status line and fields, raw
  std::multimap<std::string, std::string> fields;  // names lower-cased
  std::string body;                                // de-chunked
  std::optional<std::string> field(const std::string& name) const {
    auto it = fields.find(name);
    if (it == fields.end()) return std::nullopt;
    return it->second;
  }
  std::string code() const {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
    return j["error"].value("code", "");
  }
  std::string message() const {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
    return j["error"].value("message", "");
  }
};

// A client connection that sends bytes as given and reads responses byte
// by byte: bytes a response should not have had show up as the start of
// the next one.
class RawConn {
 public:
  RawConn(TestDaemon& d, Listener l) {
    if (l == Listener::kUnix) {
      fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, d.socket_path().c_str(),
                  std::min(d.socket_path().size() + 1, sizeof addr.sun_path - 1));
      if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) error_ = errno;
    } else {
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(d.port());
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) error_ = errno;
    }
  }
  ~RawConn() {
    if (fd_ >= 0) close(fd_);
  }
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;

  bool connected() const { return fd_ >= 0 && error_ == 0; }

  bool send(const std::string& bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }

  // One response; `to_head` for the answer to a HEAD request, which ends
  // with its head whatever its fields say (RFC 9112 6.3). Fails with a
  // reason (the daemon closed, or the bytes are not a response start).
  ::testing::AssertionResult read(Wire* out, bool to_head) {
    *out = Wire{};
    std::size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill()) return ::testing::AssertionFailure() << "no complete head; got: " << buf_;
    }
    if (!buf_.starts_with("HTTP/1.1 ")) {
      return ::testing::AssertionFailure()
             << "out of sync: the bytes after the last response are not a response: "
             << buf_.substr(0, 200);
    }
    out->head = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    out->status = std::atoi(out->head.c_str() + 9);
    std::size_t at = out->head.find("\r\n") + 2;
    while (at < out->head.size()) {
      std::size_t eol = out->head.find("\r\n", at);
      std::string line = out->head.substr(at, eol - at);
      std::size_t colon = line.find(':');
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      out->fields.emplace(lower(line.substr(0, colon)), value);
      at = eol + 2;
    }
    if (to_head || out->status == 204 || out->status == 304) return ::testing::AssertionSuccess();
    if (auto cl = out->field("content-length")) {
      std::size_t n = std::stoul(*cl);
      while (buf_.size() < n) {
        if (!fill()) return ::testing::AssertionFailure() << "body cut short: " << buf_;
      }
      out->body = buf_.substr(0, n);
      buf_.erase(0, n);
      return ::testing::AssertionSuccess();
    }
    if (out->field("transfer-encoding") == "chunked") {
      while (true) {
        std::size_t eol;
        while ((eol = buf_.find("\r\n")) == std::string::npos) {
          if (!fill()) return ::testing::AssertionFailure() << "chunk size line cut short";
        }
        std::size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
        while (buf_.size() < eol + 2 + size + 2) {
          if (!fill()) return ::testing::AssertionFailure() << "chunk cut short";
        }
        out->body.append(buf_, eol + 2, size);
        buf_.erase(0, eol + 2 + size + 2);
        if (size == 0) return ::testing::AssertionSuccess();
      }
    }
    while (fill()) {
    }
    out->body = std::move(buf_);
    buf_.clear();
    return ::testing::AssertionSuccess();
  }

  // True once the daemon closed its side with nothing more to read.
  bool closed_by_peer() {
    if (!buf_.empty()) return false;
    return !fill();
  }

 private:
  // More bytes; false at the end of the stream. The wait is a safety net
  // for a daemon that does not answer, not a timing assertion.
  bool fill() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) return false;
    char tmp[16384];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  int error_ = 0;
  std::string buf_;
};

class DaemonHttpRfc : public ::testing::TestWithParam<Listener> {
 protected:
  static void SetUpTestSuite() { daemon_ = new TestDaemon(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ready()) << daemon_->output(); }
  // The sandbox of make_sandbox() goes whatever the test's outcome.
  void TearDown() override {
    if (sandbox_.empty()) return;
    EXPECT_EQ(d().request("DELETE", "/v1/sandboxes/" + sandbox_).status, 200);
  }

  TestDaemon& d() { return *daemon_; }
  bool tcp() const { return GetParam() == Listener::kTcp; }

  // A request head (and body) as bytes: Host, and on TCP the key, unless
  // `fields` brings its own.
  std::string request(const std::string& method, const std::string& target,
                      const std::string& fields = "", const std::string& body = "") {
    std::string out = method + " " + target + " HTTP/1.1\r\n";
    const std::string given = "\r\n" + lower(fields);
    if (given.find("\r\nhost:") == std::string::npos) out += "Host: corral\r\n";
    if (tcp() && given.find("\r\nauthorization:") == std::string::npos)
      out += "Authorization: Bearer " + d().api_key() + "\r\n";
    out += fields;
    if (!body.empty()) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    return out + "\r\n" + body;
  }

  // One request on a fresh connection.
  Wire once(const std::string& bytes, bool to_head = false) {
    RawConn c(d(), GetParam());
    Wire w;
    EXPECT_TRUE(c.connected());
    EXPECT_TRUE(c.send(bytes));
    EXPECT_TRUE(c.read(&w, to_head)) << bytes.substr(0, 300);
    return w;
  }

  // A sandbox with a file and two background processes: one ended (with
  // output), one running.
  struct Fixture {
    std::string id, ended, running;
  };
  Fixture make_sandbox() {
    Fixture f;
    HttpReply r;
    f.id = d().create_sandbox(R"({"limits": {"disk": "64Mi"}})", &r);
    sandbox_ = f.id;
    EXPECT_FALSE(f.id.empty()) << r.status << " " << r.body;
    if (f.id.empty()) return f;
    const std::string base = "/v1/sandboxes/" + f.id;
    r = d().request("PUT", base + "/files?path=/workspace/hello.txt", "hello, head\n", false, true,
                    {{"content-type", "application/octet-stream"}});
    EXPECT_EQ(r.status, 201) << r.body;
    r = d().request("POST", base + "/processes", R"({"cmd": "echo out; echo err >&2"})");
    EXPECT_EQ(r.status, 201) << r.body;
    f.ended = r.json().value("id", "");
    r = d().request("POST", base + "/processes/" + f.ended + "/wait?timeout=60");
    EXPECT_EQ(r.status, 200) << r.body;
    r = d().request("POST", base + "/processes", R"({"cmd": "echo started; exec sleep 600"})");
    EXPECT_EQ(r.status, 201) << r.body;
    f.running = r.json().value("id", "");
    return f;
  }
  static TestDaemon* daemon_;
  std::string sandbox_;
};

TestDaemon* DaemonHttpRfc::daemon_ = nullptr;

// RFC 9110 9.3.2 and 9112 6.3: HEAD, GET and HEAD again on one connection,
// for every GET route and for error answers. A HEAD answer with a body
// would make the next read start inside that body.
TEST_P(DaemonHttpRfc, HeadThenGetOnOneConnectionStaysInSync) {
  Fixture f = make_sandbox();
  ASSERT_FALSE(f.id.empty());
  const std::string sb = "/v1/sandboxes/" + f.id;
  struct Case {
    std::string target;
    int status;
    bool same_length;  // the GET body cannot change between the requests
  };
  const std::vector<Case> cases = {
      {"/healthz", 200, true},
      {"/metrics", 200, false},  // counts these very requests
      {"/v1/sandboxes", 200, true},
      {sb, 200, true},
      {sb + "/processes", 200, false},  // the running process's state may change
      {sb + "/processes/" + f.ended, 200, true},
      {sb + "/processes/" + f.ended + "/output", 200, true},                // chunked
      {sb + "/processes/" + f.ended + "/output?stream=stderr", 200, true},  // chunked
      {sb + "/processes/" + f.running + "/output?follow=1", 200, false},    // never ends
      {sb + "/files?path=/workspace/hello.txt", 200, true},                 // Content-Length
      {sb + "/files/list?path=/workspace", 200, true},
      {sb + "/files/stat?path=/workspace/hello.txt", 200, true},
      {sb + "/files?path=/workspace/missing", 404, true},
      {sb + "/files", 400, true},  // no path
      {"/v1/sandboxes/sb-000000000000", 404, true},
      // These messages name the method ("no route HEAD ..."), so the two
      // lengths differ by the method's.
      {"/v1/nothing-here", 404, false},
      {sb + "/exec", 405, false},  // POST only: HEAD is refused as GET is
  };
  RawConn c(d(), GetParam());
  ASSERT_TRUE(c.connected());
  for (const Case& k : cases) {
    if (k.target.find("follow=1") != std::string::npos) {
      // GET would wait for the process's end; only HEAD is asked, and it
      // must not wait.
      Wire h;
      ASSERT_TRUE(c.send(request("HEAD", k.target)));
      ASSERT_TRUE(c.read(&h, true)) << k.target;
      EXPECT_EQ(h.status, k.status) << k.target << "\n" << h.head;
      EXPECT_EQ(h.field("transfer-encoding"), "chunked") << h.head;
      continue;
    }
    Wire head1, get, head2;
    ASSERT_TRUE(c.send(request("HEAD", k.target)));
    ASSERT_TRUE(c.read(&head1, true)) << "HEAD " << k.target;
    ASSERT_TRUE(c.send(request("GET", k.target)));
    ASSERT_TRUE(c.read(&get, false)) << "GET after HEAD " << k.target << "\n" << head1.head;
    ASSERT_TRUE(c.send(request("HEAD", k.target)));
    ASSERT_TRUE(c.read(&head2, true)) << "HEAD after GET " << k.target;
    SCOPED_TRACE(k.target + "\nHEAD: " + head1.head + "\nGET: " + get.head);
    EXPECT_EQ(get.status, k.status) << get.body;
    EXPECT_EQ(head1.status, get.status);
    EXPECT_EQ(head2.status, get.status);
    EXPECT_EQ(head1.field("content-type"), get.field("content-type"));
    EXPECT_EQ(head1.field("allow"), get.field("allow"));
    EXPECT_EQ(head1.field("transfer-encoding"), get.field("transfer-encoding"));
    EXPECT_EQ(head1.field("content-length").has_value(), get.field("content-length").has_value());
    if (k.same_length && get.field("content-length")) {
      EXPECT_EQ(head1.field("content-length"), std::to_string(get.body.size()));
    }
    EXPECT_FALSE(head1.field("connection").has_value()) << "HEAD closed the connection";
  }
  // The last HEAD left nothing behind either.
  Wire last;
  ASSERT_TRUE(c.send(request("GET", "/healthz")));
  ASSERT_TRUE(c.read(&last, false));
  EXPECT_EQ(last.status, 200);
  // HEAD of a download sends no content: only the GET is audited as a read
  // (the HEADs as stats).
  int reads = 0;
  for (const auto& rec : d().wait_audit("file.read", 1))
    reads += rec.value("path", "") == "/workspace/hello.txt" ? 1 : 0;
  EXPECT_EQ(reads, 1);
}

// Two requests written at once (pipelined): the HEAD answer must end where
// the GET answer begins.
TEST_P(DaemonHttpRfc, PipelinedHeadAndGet) {
  RawConn c(d(), GetParam());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send(request("HEAD", "/v1/sandboxes") + request("GET", "/v1/sandboxes") +
                     request("HEAD", "/v1/nope") + request("GET", "/healthz")));
  Wire a, b, e, h;
  ASSERT_TRUE(c.read(&a, true));
  ASSERT_TRUE(c.read(&b, false));
  ASSERT_TRUE(c.read(&e, true));
  ASSERT_TRUE(c.read(&h, false));
  EXPECT_EQ(a.status, 200) << a.head;
  EXPECT_EQ(b.status, 200) << b.head;
  EXPECT_EQ(a.field("content-length"), std::to_string(b.body.size()));
  EXPECT_EQ(e.status, 404) << e.head;
  EXPECT_EQ(h.status, 200) << h.head;
}

// A refused HEAD (no key on TCP, a malformed request on either) has no body
// either: what follows its head is the next response or the end.
TEST_P(DaemonHttpRfc, RefusedHeadHasNoBody) {
  if (tcp()) {
    RawConn c(d(), GetParam());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send("HEAD /v1/sandboxes HTTP/1.1\r\nHost: corral\r\n\r\n" +
                       std::string("GET /healthz HTTP/1.1\r\nHost: corral\r\n\r\n")));
    Wire w;
    ASSERT_TRUE(c.read(&w, true));
    EXPECT_EQ(w.status, 401) << w.head;
    EXPECT_EQ(w.field("www-authenticate"), "Bearer");
    Wire next;
    if (!c.closed_by_peer()) {  // a 401 may close the connection
      ASSERT_TRUE(c.read(&next, false));
      EXPECT_EQ(next.status, 200) << next.head;
    }
    // /healthz needs no key, for HEAD as for GET.
    RawConn h(d(), GetParam());
    ASSERT_TRUE(
        h.send("HEAD /healthz HTTP/1.1\r\nHost: corral\r\n\r\n"
               "GET /healthz HTTP/1.1\r\nHost: corral\r\n\r\n"));
    Wire head, get;
    ASSERT_TRUE(h.read(&head, true));
    ASSERT_TRUE(h.read(&get, false));
    EXPECT_EQ(head.status, 200) << head.head;
    EXPECT_EQ(head.field("content-length"), std::to_string(get.body.size()));
  }
  RawConn c(d(), GetParam());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("HEAD /v1/%zz HTTP/1.1\r\nHost: corral\r\n\r\n"));
  Wire w;
  ASSERT_TRUE(c.read(&w, true));
  EXPECT_EQ(w.status, 400) << w.head;
  EXPECT_TRUE(c.closed_by_peer()) << "bytes after a HEAD answer";
}

// Single-valued fields, each sent twice: refused with 400 bad_request
// naming the field, before any route runs, and the connection ends.
TEST_P(DaemonHttpRfc, RepeatedSingleValuedFieldsAreRefused) {
  const std::string key = "Bearer " + d().api_key();
  struct Case {
    std::string name, first, second;
    std::string method = "GET";
    std::string body;
  };
  const std::vector<Case> cases = {
      {"Authorization", key, "Bearer wrong"},
      {"Authorization", "Bearer wrong", key},
      {"Authorization", key, key},
      {"Host", "corral", "corral"},
      {"Content-Length", "0", "0"},
      {"Content-Length", "2", "3", "POST", "{}"},
      {"Content-Type", "application/json", "text/plain", "POST", "{}"},
      {"Transfer-Encoding", "chunked", "chunked", "POST", "0\r\n\r\n"},
      {"Idempotency-Key", "k1", "k2", "POST", "{}"},
      {"Proxy-Authorization", "Basic eA==", "Basic eA=="},
      {"X-Corral-Gateway-Token", "a", "b"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name + ": " + k.first + " / " + k.second);
    // The key goes in the pair itself for Authorization; otherwise on TCP
    // as usual. The body is raw (framing fields are part of the case).
    std::string fields =
        k.name + ": " + k.first + "\r\nX-Between: 1\r\n" + lower(k.name) + ": " + k.second + "\r\n";
    std::string bytes = request(k.method, "/v1/sandboxes", fields) + k.body;
    RawConn c(d(), GetParam());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send(bytes));
    Wire w;
    ASSERT_TRUE(c.read(&w, false));
    EXPECT_EQ(w.status, 400) << w.head << w.body;
    EXPECT_EQ(w.code(), "bad_request") << w.body;
    EXPECT_NE(w.message().find("more than one " + k.name + " header"), std::string::npos) << w.body;
    EXPECT_EQ(w.field("connection"), "close");
    EXPECT_TRUE(c.closed_by_peer());
  }
  // One of each is fine, and list fields may repeat.
  Wire ok = once(request("GET", "/v1/sandboxes", "Accept: application/json\r\nAccept: */*\r\n"));
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// The path is matched as sent (docs/api.md "Routes"): an escape is never
// decoded, so an encoded slash stays inside its segment and an encoded
// letter is not that letter. Query values are decoded once.
TEST_P(DaemonHttpRfc, EscapesInThePathAreNotDecoded) {
  Fixture f = make_sandbox();
  ASSERT_FALSE(f.id.empty());
  const std::string sb = "/v1/sandboxes/" + f.id;
  ASSERT_EQ(once(request("GET", sb)).status, 200);
  ASSERT_EQ(once(request("GET", sb + "/processes")).status, 200);

  struct Case {
    std::string target;
    int status;
    std::string code;
  };
  std::string spelled = f.id;
  spelled.replace(0, 1, "%73");  // "sb-..." with its 's' escaped
  const std::vector<Case> cases = {
      {sb + "%2Fprocesses", 404, "not_found"},  // one segment: an unknown sandbox
      {sb + "%2fprocesses", 404, "not_found"},
      {sb + "%252Fprocesses", 404, "not_found"},
      {sb + "%2Ffiles%2Flist?path=/workspace", 404, "not_found"},
      {sb + "/files%2Flist?path=/workspace", 404, "not_found"},  // no such route
      {sb + "/processes/" + f.ended + "%2Foutput", 404, "not_found"},
      {"/v1%2Fsandboxes", 404, "not_found"},
      {"/v1/sandboxes%2F" + f.id, 404, "not_found"},
      {"/v1/sandboxes/" + spelled, 404, "not_found"},
      {"/v1/sandboxes%00", 404, "not_found"},  // three characters, no NUL
      {"/v1/sandboxes/%C0%AF", 404, "not_found"},
      {"/v1/sandboxes/%zz", 400, "bad_request"},  // not an escape at all
      // Query values are decoded (once): a path in the sandbox.
      {sb + "/files?path=%2Fworkspace%2Fhello.txt", 200, ""},
      {sb + "/files?path=%252Fworkspace%252Fhello.txt", 404, "not_found"},
      {sb + "/files?path=%2Fworkspace%2Fhello.txt%00", 400, "invalid_value"},
      {sb + "/files?path=%2e%2e%2f%2e%2e%2fetc%2fpasswd", 400, "path_escape"},
      // An overlong UTF-8 "." is a byte sequence, not a dot.
      {sb + "/files?path=%C0%AE%C0%AE%2F%C0%AE%C0%AE%2Fetc%2Fpasswd", 404, "not_found"},
  };
  for (const Case& k : cases) {
    Wire w = once(request("GET", k.target));
    EXPECT_EQ(w.status, k.status) << k.target << "\n" << w.head << w.body;
    EXPECT_EQ(w.code(), k.code) << k.target << " " << w.body;
    if (k.status == 200) {
      EXPECT_EQ(w.body, "hello, head\n");
    }
  }
}

// docs/api.md "Limits": request head / number of fields / request target,
// 16 KiB / 100 / 8 KiB, each answered 431 head_too_large; at the limit, the
// request is served.
TEST_P(DaemonHttpRfc, HeadLimitsAnswer431) {
  auto padded_target = [](std::size_t size) {
    std::string t = "/healthz?pad=";
    return t + std::string(size - t.size(), 'a');
  };
  Wire at = once(request("GET", padded_target(8192)));
  EXPECT_EQ(at.status, 200) << at.head << at.body;
  Wire over = once(request("GET", padded_target(8193)));
  EXPECT_EQ(over.status, 431) << over.head << over.body;
  EXPECT_EQ(over.code(), "head_too_large") << over.body;
  EXPECT_NE(over.message().find("request target longer than 8192 bytes"), std::string::npos)
      << over.body;
  // A target far over the limit, past the head limit too.
  Wire far = once(request("GET", padded_target(20000)));
  EXPECT_EQ(far.status, 431) << far.head << far.body;

  // 100 fields in all (Host, the key on TCP, and X-N) pass; 101 do not.
  auto with_fields = [&](int total) {
    std::string fields;
    for (int i = tcp() ? 2 : 1; i < total; ++i) fields += "X-F" + std::to_string(i) + ": v\r\n";
    return request("GET", "/healthz", fields);
  };
  EXPECT_EQ(once(with_fields(100)).status, 200);
  Wire many = once(with_fields(101));
  EXPECT_EQ(many.status, 431) << many.body;
  EXPECT_EQ(many.code(), "head_too_large");

  Wire big = once(request("GET", "/healthz", "X-Big: " + std::string(16 * 1024, 'b') + "\r\n"));
  EXPECT_EQ(big.status, 431) << big.body;
  EXPECT_EQ(big.code(), "head_too_large");
}

// docs/api.md "Limits", the rows of the JSON routes, checked against
// behaviour: a declared body over the create limit is 413 before it is
// read; deep nesting, a long string and a long Idempotency-Key are refused
// with their codes.
TEST_P(DaemonHttpRfc, LimitsTableJsonRows) {
  Wire create = once(request("POST", "/v1/sandboxes",
                             "Content-Type: application/json\r\nContent-Length: 1048577\r\n"));
  EXPECT_EQ(create.status, 413) << create.body;
  EXPECT_EQ(create.code(), "body_too_large");

  std::string deep = std::string(33, '[') + std::string(33, ']');
  Wire nested = once(request("POST", "/v1/sandboxes", "Content-Type: application/json\r\n",
                             R"({"env": )" + deep + "}"));
  EXPECT_EQ(nested.status, 400) << nested.body;
  EXPECT_EQ(nested.code(), "bad_json") << nested.body;

  Wire string = once(request("POST", "/v1/sandboxes", "Content-Type: application/json\r\n",
                             R"({"env": {"A": ")" + std::string(128 * 1024 + 1, 'h') + "\"}}"));
  EXPECT_EQ(string.status, 400) << string.body.substr(0, 300);
  EXPECT_EQ(string.code(), "invalid_value") << string.body.substr(0, 300);
  EXPECT_NE(string.message().find("longer than 131072 bytes"), std::string::npos)
      << string.body.substr(0, 300);

  Wire key = once(request(
      "POST", "/v1/sandboxes",
      "Content-Type: application/json\r\nIdempotency-Key: " + std::string(201, 'k') + "\r\n",
      "{}"));
  EXPECT_EQ(key.status, 400) << key.body;
  EXPECT_EQ(key.code(), "invalid_value") << key.body;
}

INSTANTIATE_TEST_SUITE_P(Listeners, DaemonHttpRfc,
                         ::testing::Values(Listener::kUnix, Listener::kTcp), [](const auto& info) {
                           return std::string(info.param == Listener::kUnix ? "Unix" : "Tcp");
                         });

}  // namespace
}  // namespace corral::testing
