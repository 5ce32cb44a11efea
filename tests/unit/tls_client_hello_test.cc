#include "egress/tls_client_hello.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "../support/client_hello.h"
#include "support/skip.h"

namespace corral::net {
namespace {

using corral::testing::build_client_hello;
using corral::testing::client_hello_message;
using corral::testing::client_hello_records;
using corral::testing::ClientHelloSpec;

// The first flight of a real TLS client: `openssl s_client` connects to a
// listener of ours, which reads until the ClientHello is complete. Empty if
// openssl cannot be run.
std::string capture_openssl_hello(const std::vector<std::string>& args) {
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(l);
    return {};
  }
  std::string target = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::vector<std::string> argv_s = {"openssl", "s_client", "-connect", target};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execvp("openssl", argv.data());
    ::_exit(127);
  }
  std::string bytes;
  struct pollfd p = {l, POLLIN, 0};
  if (pid > 0 && ::poll(&p, 1, 10'000) == 1) {
    int c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c >= 0 && std::chrono::steady_clock::now() < deadline) {
      struct pollfd q = {c, POLLIN, 0};
      if (::poll(&q, 1, 1000) != 1) continue;
      char buf[4096];
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      bytes.append(buf, static_cast<std::size_t>(n));
      if (parse_client_hello(bytes).status != TlsHelloStatus::kIncomplete) break;
    }
    if (c >= 0) ::close(c);
  }
  ::close(l);
  if (pid > 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return bytes;
}

TEST(TlsClientHello, RealOpensslClientWithSni) {
  std::string hello = capture_openssl_hello({"-servername", "Real.Example.TEST"});
  if (hello.empty()) CORRAL_SKIP_OR_FAIL("openssl s_client could not be run");
  TlsHello h = parse_client_hello(hello);
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << h.describe();
  EXPECT_TRUE(h.has_sni);
  EXPECT_EQ(h.sni, "real.example.test");
  EXPECT_EQ(h.describe(), "tls (sni real.example.test)");
  EXPECT_EQ(h.consumed, hello.size());
  // Every shorter prefix asks for more bytes, and never for fewer than it has.
  for (std::size_t n = 0; n < hello.size(); ++n) {
    TlsHello p = parse_client_hello(std::string_view(hello).substr(0, n));
    ASSERT_EQ(p.status, TlsHelloStatus::kIncomplete) << "prefix " << n;
    ASSERT_GT(p.needed, n);
  }
}

TEST(TlsClientHello, RealOpensslClientWithoutSni) {
  std::string hello = capture_openssl_hello({"-noservername"});
  if (hello.empty()) CORRAL_SKIP_OR_FAIL("openssl s_client could not be run");
  TlsHello h = parse_client_hello(hello);
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << h.describe();
  EXPECT_FALSE(h.has_sni);
  EXPECT_EQ(h.sni, "");
  EXPECT_EQ(h.describe(), "tls (no sni)");
}

TEST(TlsClientHello, HandBuiltSniIsCanonical) {
  TlsHello h = parse_client_hello(build_client_hello("PyPI.org."));
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << h.describe();
  EXPECT_EQ(h.sni, "pypi.org");
  EXPECT_FALSE(h.ech);
}

TEST(TlsClientHello, BytesAfterTheHelloAreNotPartOfIt) {
  std::string hello = build_client_hello("a.example");
  TlsHello h = parse_client_hello(hello + std::string("\x17\x03\x03\x00\x05hello", 10));
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello);
  EXPECT_EQ(h.consumed, hello.size());
}

TEST(TlsClientHello, SpansSeveralRecords) {
  ClientHelloSpec spec;
  spec.host_names = {"split.example"};
  for (std::size_t size : {1, 3, 7, 100}) {
    spec.record_size = size;
    std::string bytes = build_client_hello(spec);
    TlsHello h = parse_client_hello(bytes);
    ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << size << ": " << h.describe();
    EXPECT_EQ(h.sni, "split.example");
    EXPECT_EQ(h.consumed, bytes.size());
    EXPECT_EQ(parse_client_hello(bytes.substr(0, bytes.size() - 1)).status,
              TlsHelloStatus::kIncomplete);
  }
}

TEST(TlsClientHello, IncompleteSaysHowMuchIsNeeded) {
  std::string bytes = build_client_hello("a.example");
  EXPECT_EQ(parse_client_hello("").needed, 5u);
  EXPECT_EQ(parse_client_hello(bytes.substr(0, 1)).status, TlsHelloStatus::kIncomplete);
  EXPECT_EQ(parse_client_hello(bytes.substr(0, 3)).needed, 5u);
  EXPECT_EQ(parse_client_hello(bytes.substr(0, 5)).needed, bytes.size());
  EXPECT_EQ(parse_client_hello(bytes.substr(0, 5)).describe(), "incomplete: need more bytes");
}

TEST(TlsClientHello, NoSniAndEchFlag) {
  ClientHelloSpec spec;
  spec.ech = true;
  TlsHello h = parse_client_hello(build_client_hello(spec));
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello);
  EXPECT_FALSE(h.has_sni);
  EXPECT_TRUE(h.ech);
}

TEST(TlsClientHello, OtherProtocolsAreNotTls) {
  const std::vector<std::string> others = {"GET / HTTP/1.1\r\n",
                                           "SSH-2.0-OpenSSH_9.2\r\n",
                                           "\x16\x02",
                                           "\x16\x03\x05",
                                           std::string("\x80\x2e\x01\x03\x01", 5),
                                           std::string("\x17\x03\x03", 3)};
  for (const std::string& s : others) {
    TlsHello h = parse_client_hello(s);
    EXPECT_EQ(h.status, TlsHelloStatus::kNotTls) << s;
    EXPECT_EQ(h.describe(), "not TLS");
    EXPECT_FALSE(looks_like_tls(s));
  }
  EXPECT_TRUE(looks_like_tls("\x16"));
  EXPECT_TRUE(looks_like_tls("\x16\x03\x01"));
}

std::string malformed_reason(const std::string& bytes) {
  TlsHello h = parse_client_hello(bytes);
  EXPECT_EQ(h.status, TlsHelloStatus::kMalformed) << h.describe();
  EXPECT_FALSE(h.error.empty());
  return h.error;
}

TEST(TlsClientHello, RefusesAmbiguousOrInvalidNames) {
  ClientHelloSpec two;
  two.host_names = {"a.example", "b.example"};
  EXPECT_NE(malformed_reason(build_client_hello(two)).find("more than one host name"),
            std::string::npos);
  ClientHelloSpec dup;
  dup.host_names = {"a.example"};
  dup.duplicate_sni_extension = true;
  EXPECT_NE(malformed_reason(build_client_hello(dup)).find("twice"), std::string::npos);
  const std::vector<std::string> bad_names = {"1.2.3.4",
                                              "127.1",
                                              "a..example",
                                              std::string("a.example\0.evil", 15),
                                              "a b.example",
                                              "",
                                              std::string(64, 'a') + ".example",
                                              std::string(254, 'a')};
  for (const std::string& bad : bad_names) {
    ClientHelloSpec s;
    s.host_names = {bad};
    EXPECT_NE(malformed_reason(build_client_hello(s)).find("not a valid DNS host name"),
              std::string::npos)
        << bad;
  }
}

TEST(TlsClientHello, RefusesBrokenFraming) {
  std::string msg = client_hello_message(ClientHelloSpec{{"a.example"}});
  // Zero-length record.
  malformed_reason(std::string("\x16\x03\x01\x00\x00", 5));
  // Record longer than 2^14.
  malformed_reason(std::string("\x16\x03\x01\x40\x01", 5));
  // Another record type in the middle of a fragmented hello.
  std::string first = client_hello_records(msg.substr(0, 10));
  EXPECT_NE(malformed_reason(first + std::string("\x17\x03\x03\x00\x01x", 6)).find("type 23"),
            std::string::npos);
  // Not a ClientHello (ServerHello, type 2).
  std::string server = msg;
  server[0] = 2;
  malformed_reason(client_hello_records(server));
  // A handshake length beyond the bound.
  std::string huge = msg;
  huge[1] = 0x01;  // 64 KiB + ...
  EXPECT_NE(malformed_reason(client_hello_records(huge)).find("longer than"), std::string::npos);
  // Extension block length off by one.
  std::string off = msg;
  std::size_t ext_len_at = 4 + 2 + 32 + 1 + 32 + 2 + 6 + 2;
  off[ext_len_at + 1] = static_cast<char>(off[ext_len_at + 1] + 1);
  malformed_reason(client_hello_records(off));
  // Truncated inside the body while the handshake length says it is complete.
  std::string cut = msg.substr(0, 50);
  cut[1] = 0;
  cut[2] = 0;
  cut[3] = 46;
  malformed_reason(client_hello_records(cut));
}

TEST(TlsClientHello, LargePaddingWithinTheBound) {
  ClientHelloSpec spec;
  spec.host_names = {"pad.example"};
  spec.padding = 12000;
  spec.record_size = 4000;
  TlsHello h = parse_client_hello(build_client_hello(spec));
  ASSERT_EQ(h.status, TlsHelloStatus::kClientHello) << h.describe();
  EXPECT_EQ(h.sni, "pad.example");
  spec.padding = kMaxClientHelloBytes;
  EXPECT_EQ(parse_client_hello(build_client_hello(spec)).status, TlsHelloStatus::kMalformed);
}

}  // namespace
}  // namespace corral::net
