// N1: a sandbox with the default network (none) has only `lo`, reaches
// nothing outside, and its loopback is its own: host listeners on
// 127.0.0.1 and host abstract unix sockets are out of reach.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class NetworkTest : public ::testing::TestWithParam<Identity> {
 protected:
  void SetUp() override {
    if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  }
};

TEST_P(NetworkTest, OnlyLoopbackAndNoWayOut) {
  ProbeRun run = run_probe(GetParam().opts, {"net"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json ifaces = run.first("net-ifaces");
  ASSERT_TRUE(ifaces.value("ok", false)) << run.describe();
  EXPECT_EQ(ifaces["ifaces"], json::array({"lo"})) << run.describe();

  json v4 = run.find("net-connect", "target", "1.1.1.1:80");
  EXPECT_EQ(v4.value("ok", true), false) << v4.dump();
  EXPECT_EQ(v4.value("errno", json()), "ENETUNREACH") << v4.dump();
  json v6 = run.find("net-connect", "target", "[2606:4700:4700::1111]:80");
  EXPECT_EQ(v6.value("ok", true), false) << v6.dump();
  // Loopback is up and answers (a closed port is refused, not unreachable).
  bool saw_closed = false;
  for (const json& c : run.all("net-connect")) {
    if (c.value("target", "").find("(closed)") == std::string::npos) continue;
    saw_closed = true;
    EXPECT_EQ(c.value("errno", json()), "ECONNREFUSED") << c.dump();
  }
  EXPECT_TRUE(saw_closed) << run.describe();
}

// A TCP listener on the host's 127.0.0.1 is not the sandbox's 127.0.0.1.
TEST_P(NetworkTest, HostLoopbackListenerUnreachable) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(s, 8), 0);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string port = std::to_string(ntohs(a.sin_port));
  ProbeRun run = run_probe(GetParam().opts, {"tcp-connect", "127.0.0.1", port});
  close(s);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json c = run.first("tcp-connect");
  EXPECT_EQ(c.value("ok", true), false) << "host listener reached from inside: " << c.dump();
  EXPECT_EQ(c.value("errno", json()), "ECONNREFUSED") << c.dump();
}

// Abstract unix sockets are per network namespace (X11, dbus and many
// daemons listen on them): a host one must not be reachable.
TEST_P(NetworkTest, HostAbstractSocketUnreachable) {
  std::string name = unique_token("abstract");
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(listen(s, 8), 0);
  ProbeRun run = run_probe(GetParam().opts, {"abstract-connect", name});
  close(s);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json c = run.first("abstract-connect");
  EXPECT_EQ(c.value("ok", true), false) << "host abstract socket reached: " << c.dump();
  EXPECT_EQ(c.value("errno", json()), "ECONNREFUSED") << c.dump();
}

INSTANTIATE_TEST_SUITE_P(Identities, NetworkTest, ::testing::ValuesIn(identities()),
                         identity_test_name);

}  // namespace
}  // namespace corral::testing
