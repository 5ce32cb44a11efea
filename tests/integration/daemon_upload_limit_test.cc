// serve.max_upload (docs/config.md, docs/api.md "Upload a file"): one
// uploaded file is at most this many bytes. A declared Content-Length over
// it is refused with 413 body_too_large before the body is read and before
// the file is touched; a chunked body that grows past it is stopped there,
// its partial file removed, and answered 413 too. 0 (auto) leaves only the
// sandbox's disk limit.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "http/http_client.h"
#include "support/daemon_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

constexpr std::uint64_t kLimit = 1 << 20;  // the config below
const char* const kConfig = "serve:\n  max_upload: 1Mi\n";
const http::Headers kOctets = {{"content-type", "application/octet-stream"}};

std::string code_of(const HttpReply& r) {
  json j = r.json();
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  return j["error"].value("code", "");
}

std::string describe(const HttpReply& r) {
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 400);
}

// One upload on a fresh unix-socket connection with a streamed body:
// chunked when `declared` is empty, else with that Content-Length. The
// body is `size` bytes of 'u', produced in pieces of at most 64 KiB.
HttpReply stream_upload(TestDaemon& d, const std::string& target, std::uint64_t size,
                        std::optional<std::uint64_t> declared) {
  HttpReply reply;
  auto endpoint = http::Endpoint::parse(d.unix_url());
  if (!endpoint) return reply;
  auto client = http::Client::connect(*endpoint, std::chrono::seconds(30));
  if (!client) return reply;
  client->set_io_timeout(std::chrono::seconds(60));
  std::uint64_t sent = 0;
  auto source = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    if (sent > (std::uint64_t{64} << 20))  // no test here sends this much
      return make_error(ErrorCode::kInternal, "the daemon read more than 64 MiB");
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>({cap, 64 << 10, size - sent}));
    std::fill(buf, buf + n, 'u');
    sent += n;
    return n;
  };
  auto head = client->send_streaming("PUT", target, kOctets, source, declared);
  if (!head) {
    reply.body = "client error: " + head.error().message;
    return reply;
  }
  reply.status = head->status;
  reply.headers = head->headers;
  auto all = client->read_all(1 << 20);
  if (all) reply.body = *all;
  return reply;
}

class DaemonUploadLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(d_.ready()) << d_.output();
    HttpReply r;
    id_ = d_.create_sandbox("{}", &r);
    ASSERT_FALSE(id_.empty()) << describe(r);
  }
  void TearDown() override {
    if (!id_.empty()) {
      EXPECT_EQ(d_.request("DELETE", "/v1/sandboxes/" + id_).status, 200);
    }
  }

  std::string files(const std::string& path) {
    return "/v1/sandboxes/" + id_ + "/files?path=" + path;
  }
  HttpReply put(const std::string& path, const std::string& body) {
    return d_.request("PUT", files(path), body, false, true, kOctets);
  }
  HttpReply stat(const std::string& path) {
    return d_.request("GET", "/v1/sandboxes/" + id_ + "/files/stat?path=" + path);
  }
  std::string sh(const std::string& cmd) { return d_.exec(id_, cmd).value("stdout", ""); }

  TestDaemon d_{{}, kConfig};
  std::string id_;
};

TEST_F(DaemonUploadLimit, ExactlyTheLimitIsAccepted) {
  HttpReply r = put("/workspace/with-length", std::string(kLimit, 'a'));
  ASSERT_EQ(r.status, 201) << describe(r);
  EXPECT_EQ(r.json().value("bytes", std::uint64_t{0}), kLimit);

  HttpReply chunked = stream_upload(d_, files("/workspace/chunked"), kLimit, std::nullopt);
  ASSERT_EQ(chunked.status, 201) << describe(chunked);
  EXPECT_EQ(chunked.json().value("bytes", std::uint64_t{0}), kLimit);
  EXPECT_EQ(sh("stat -c %s /workspace/with-length /workspace/chunked"),
            std::to_string(kLimit) + "\n" + std::to_string(kLimit) + "\n");
}

TEST_F(DaemonUploadLimit, DeclaredLengthOverTheLimitIsRefusedAndTheFileUntouched) {
  ASSERT_EQ(put("/workspace/keep", "old content\n").status, 201);

  HttpReply r = put("/workspace/keep", std::string(kLimit + 1, 'b'));
  EXPECT_EQ(r.status, 413) << describe(r);
  EXPECT_EQ(code_of(r), "body_too_large") << describe(r);
  EXPECT_NE(r.body.find("serve.max_upload"), std::string::npos) << describe(r);
  // Refused before the file was opened: the old content is still there.
  EXPECT_EQ(sh("cat /workspace/keep"), "old content\n");

  HttpReply fresh = put("/workspace/new", std::string(kLimit + 1, 'b'));
  EXPECT_EQ(fresh.status, 413) << describe(fresh);
  EXPECT_EQ(stat("/workspace/new").status, 404) << "a refused upload created its file";

  // The daemon still takes uploads on the next connection.
  EXPECT_EQ(put("/workspace/small", "fits").status, 201);
}

TEST_F(DaemonUploadLimit, DeclaredLengthOverTheLimitIsRefusedBeforeReading) {
  // Only the head is sent, announcing 8 GiB: the answer must come without
  // a byte of the body (a daemon that waited for the body would answer
  // 408 after serve.request_timeout, 30 s).
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0) << strerror(errno);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(d_.socket_path().size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, d_.socket_path().c_str(), d_.socket_path().size() + 1);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  const std::string head = "PUT " + files("/workspace/huge") +
                           " HTTP/1.1\r\nHost: corral\r\nContent-Type: application/octet-stream\r\n"
                           "Content-Length: 8589934592\r\n\r\n";
  ASSERT_EQ(write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  std::string response;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;  // the daemon closes: the body it did not read ends the connection
    response.append(buf, static_cast<std::size_t>(n));
  }
  EXPECT_TRUE(response.starts_with("HTTP/1.1 413 ")) << response;
  EXPECT_NE(response.find("\"code\":\"body_too_large\""), std::string::npos) << response;
  EXPECT_NE(response.find("8589934592"), std::string::npos) << response;
  EXPECT_EQ(stat("/workspace/huge").status, 404);
}

TEST_F(DaemonUploadLimit, ChunkedBodyPastTheLimitIsStoppedAndRemoved) {
  HttpReply r = stream_upload(d_, files("/workspace/grows"), 4 * kLimit, std::nullopt);
  EXPECT_EQ(r.status, 413) << describe(r);
  EXPECT_EQ(code_of(r), "body_too_large") << describe(r);
  // Nothing is left behind: no partial file, not even an empty one.
  EXPECT_EQ(stat("/workspace/grows").status, 404);
  EXPECT_EQ(sh("ls -A /workspace"), "");

  // Over an existing file too (an upload replaces the file it names).
  ASSERT_EQ(put("/workspace/replaced", "old").status, 201);
  HttpReply again = stream_upload(d_, files("/workspace/replaced"), 2 * kLimit, std::nullopt);
  EXPECT_EQ(again.status, 413) << describe(again);
  EXPECT_EQ(stat("/workspace/replaced").status, 404);

  // The sandbox and the daemon keep working.
  EXPECT_EQ(put("/workspace/small", "fits").status, 201);
  EXPECT_EQ(sh("cat /workspace/small"), "fits");
}

TEST(DaemonUploadLimitAuto, WithoutMaxUploadOnlyTheDiskLimitApplies) {
  TestDaemon d;  // serve.max_upload: auto
  ASSERT_TRUE(d.ready()) << d.output();
  std::string id = d.create_sandbox(R"({"limits": {"disk": "16Mi"}})");
  ASSERT_FALSE(id.empty());
  const std::string target = "/v1/sandboxes/" + id + "/files?path=/workspace/";
  HttpReply big =
      d.request("PUT", target + "big", std::string(4 * kLimit, 'c'), false, true, kOctets);
  EXPECT_EQ(big.status, 201) << describe(big);
  HttpReply chunked = stream_upload(d, target + "chunked", 4 * kLimit, std::nullopt);
  EXPECT_EQ(chunked.status, 201) << describe(chunked);
  // Past the disk limit it is 507, as before.
  HttpReply full = stream_upload(d, target + "full", 32 * kLimit, std::nullopt);
  EXPECT_EQ(full.status, 507) << describe(full);
  EXPECT_EQ(code_of(full), "insufficient_storage") << describe(full);
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

}  // namespace
}  // namespace corral::testing
