// The test "internet" (tests/support/net_world.h) works from the host: its
// HTTP, TLS (with its own CA) and echo servers answer on their addresses,
// count what they saw, and everything is gone after the world is.
#include "support/net_world.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

UniqueFd connect_to(const char* address, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &sa.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return UniqueFd();
  timeval tv{5, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

bool link_exists(const std::string& name) {
  return access(("/sys/class/net/" + name).c_str(), F_OK) == 0;
}

TEST(NetWorld, ServesHttpTlsAndEchoAndLeavesNothing) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  std::string netns;
  {
    auto world = NetWorld::create();
    ASSERT_TRUE(world.has_value()) << world.error().message;
    netns = (*world)->netns_name();

    UniqueFd http = connect_to(NetWorld::kAllowedAddress, 80);
    ASSERT_TRUE(http);
    std::string req = "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    ASSERT_EQ(::write(http.get(), req.data(), req.size()), static_cast<ssize_t>(req.size()));
    EXPECT_NE(read_all(http.get()).find("hello from allowed.test"), std::string::npos);
    EXPECT_EQ((*world)->http_requests("allowed.test"), 1);

    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    ASSERT_EQ(SSL_CTX_load_verify_locations(ctx, (*world)->ca_pem_path().c_str(), nullptr), 1);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    UniqueFd tls = connect_to(NetWorld::kAllowedAddress, 443);
    ASSERT_TRUE(tls);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, tls.get());
    SSL_set_tlsext_host_name(ssl, "www.allowed.test");
    SSL_set1_host(ssl, "www.allowed.test");
    ASSERT_EQ(SSL_connect(ssl), 1) << "the world's CA does not verify its certificate";
    SSL_write(ssl, req.data(), static_cast<int>(req.size()));
    char buf[512];
    int n = SSL_read(ssl, buf, sizeof buf);
    ASSERT_GT(n, 0);
    EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find("hello from www.allowed.test"),
              std::string::npos);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    EXPECT_EQ((*world)->tls_handshakes("www.allowed.test"), 1);

    UniqueFd echo = connect_to(NetWorld::kDeniedAddress, 5432);
    ASSERT_TRUE(echo);
    ASSERT_EQ(::write(echo.get(), "ping", 4), 4);
    char e[4];
    ASSERT_EQ(::read(echo.get(), e, 4), 4);
    EXPECT_EQ(std::string(e, 4), "ping");
    EXPECT_TRUE(link_exists("cw" + netns.substr(std::string("corral-tw-").size())));
  }
  EXPECT_FALSE(link_exists("cw" + netns.substr(std::string("corral-tw-").size())));
  EXPECT_NE(access(("/run/netns/" + netns).c_str(), F_OK), 0) << "netns left behind";
}

}  // namespace
}  // namespace corral::testing
