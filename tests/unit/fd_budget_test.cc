// The daemon's descriptor budget (issue 14 item 3, daemon/fd_budget.h):
// connection limits sized from RLIMIT_NOFILE beside the reserve for the
// daemon's own work, and serve.connections in the config.
#include "daemon/fd_budget.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace corral::daemon {
namespace {

FdBudgetInput input(std::uint64_t limit) {
  FdBudgetInput in;
  in.limit = limit;
  in.open_now = 30;
  in.max_sandboxes = 256;
  in.proxy_connections = 4096;
  return in;
}

TEST(FdBudget, PlentyOfDescriptorsGiveTheDefaults) {
  auto b = plan_fd_budget(input(524288));  // systemd's hard limit
  ASSERT_TRUE(b.has_value()) << b.error().message;
  EXPECT_EQ(b->limits.tcp, 1024u);
  EXPECT_EQ(b->limits.unix_socket, 64u);
  EXPECT_EQ(b->limits.unauthenticated, 128u);
  EXPECT_EQ(b->limits.unauthenticated_per_peer, 32u);
  EXPECT_EQ(b->limits.unauthenticated_head_timeout, std::chrono::milliseconds(10000));
  EXPECT_EQ(b->reserve, kDaemonBaseFds + 256 * kFdsPerSandbox + 4096 * kFdsPerProxyConnection);
  EXPECT_TRUE(b->warning.empty()) << b->warning;
}

// Short of descriptors: smaller limits that still fit, and a warning that
// says what to raise; never below the least working daemon.
TEST(FdBudget, FewDescriptorsScaleTheLimitsDownAndWarn) {
  for (std::uint64_t limit : {4096u, 1024u, 512u, 200u}) {
    SCOPED_TRACE(limit);
    auto b = plan_fd_budget(input(limit));
    ASSERT_TRUE(b.has_value()) << b.error().message;
    EXPECT_LT(b->limits.tcp, 1024u);
    EXPECT_GE(b->limits.tcp, 16u);
    EXPECT_GE(b->limits.unix_socket, 8u);
    EXPECT_GE(b->limits.unauthenticated, 4u);
    EXPECT_LE(b->limits.unauthenticated, b->limits.tcp);
    EXPECT_LE(b->limits.unauthenticated_per_peer, b->limits.unauthenticated);
    EXPECT_LE(b->connections, b->available);
    EXPECT_NE(b->warning.find("LimitNOFILE="), std::string::npos) << b->warning;
  }
  // Half of 20000 holds the default connections: the reserve gets the
  // rest, with a warning.
  auto half = plan_fd_budget(input(20000));
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(half->limits.tcp, 1024u);
  EXPECT_EQ(half->limits.unix_socket, 64u);
  EXPECT_NE(half->warning.find("LimitNOFILE="), std::string::npos);
  // Without sandboxes' and the proxy's reserve, 20000 is plenty.
  FdBudgetInput in = input(20000);
  in.max_sandboxes = 4;
  in.proxy_connections = 0;
  auto b = plan_fd_budget(in);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->limits.tcp, 1024u);
  EXPECT_TRUE(b->warning.empty()) << b->warning;
}

TEST(FdBudget, TooFewForEvenTheLeastIsAnError) {
  auto b = plan_fd_budget(input(100));
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().message.find("RLIMIT_NOFILE 100"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().hint.find("LimitNOFILE="), std::string::npos);
}

TEST(FdBudget, ConfiguredLimitsAreKeptOrRefused) {
  FdBudgetInput in = input(524288);
  in.configured.tcp = 5000;
  in.configured.unix_socket = 16;
  in.configured.unauthenticated = 500;
  in.configured.unauthenticated_per_peer = 50;
  auto b = plan_fd_budget(in);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->limits.tcp, 5000u);
  EXPECT_EQ(b->limits.unix_socket, 16u);
  EXPECT_EQ(b->limits.unauthenticated, 500u);
  EXPECT_EQ(b->limits.unauthenticated_per_peer, 50u);
  in.limit = 4096;  // 5000 connections cannot fit
  EXPECT_FALSE(plan_fd_budget(in).has_value());
}

TEST(FdBudget, RaiseSetsTheSoftLimitToTheHardOne) {
  struct rlimit before;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max <= 64) GTEST_SKIP() << "hard limit too low to lower the soft one";
  struct rlimit low = {64, before.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto r = raise_nofile_limit();
  struct rlimit after;
  getrlimit(RLIMIT_NOFILE, &after);
  setrlimit(RLIMIT_NOFILE, &before);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->soft_before, 64u);
  EXPECT_EQ(after.rlim_cur, before.rlim_max == RLIM_INFINITY ? r->soft : before.rlim_max);
  EXPECT_EQ(r->soft, after.rlim_cur);
  auto open = count_open_fds();
  ASSERT_TRUE(open.has_value());
  EXPECT_GE(*open, 3u);
}

TEST(DaemonConfigConnections, KeysAutoAndMistakes) {
  auto c = parse_daemon_config(R"(serve:
  connections:
    tcp: 2048
    unix: auto
    unauthenticated: 64
    unauthenticated_per_peer: 8
    unauthenticated_head_timeout: 3s
)",
                               "serve.yaml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->connections.tcp, 2048u);
  EXPECT_EQ(c->connections.unix_socket, 0u);  // auto
  EXPECT_EQ(c->connections.unauthenticated, 64u);
  EXPECT_EQ(c->connections.unauthenticated_per_peer, 8u);
  EXPECT_EQ(c->connections.unauthenticated_head_timeout_ms, 3000);
  auto d = parse_daemon_config("", "serve.yaml");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->connections.tcp, 0u);
  EXPECT_EQ(d->connections.unauthenticated_head_timeout_ms, 10000);

  auto error = [](std::string_view yaml) {
    auto r = parse_daemon_config(yaml, "serve.yaml");
    EXPECT_FALSE(r.has_value()) << yaml;
    return r.has_value() ? std::string() : r.error().to_string();
  };
  EXPECT_NE(error("serve:\n  connections:\n    tcp: 0\n").find("serve.connections.tcp"),
            std::string::npos);
  EXPECT_NE(error("serve:\n  connections:\n    tcp: 10\n    unauthenticated: 20\n")
                .find("unauthenticated is larger than tcp"),
            std::string::npos);
  EXPECT_NE(error("serve:\n  connections:\n    unauthenticated_head_timeout: 1ms\n")
                .find("must be between 100ms and 10m"),
            std::string::npos);
  EXPECT_NE(error("serve:\n  connections:\n    max: 5\n").find("did you mean tcp?"),
            std::string::npos);
}

}  // namespace
}  // namespace corral::daemon
