// serve.pools (C4, docs/config.md "pools") and the match of a create's
// spec to a pool's (docs/adr/0015-warm-pools.md): what a claim binds is
// left out of the comparison, everything else is in it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/daemon_config.h"
#include "daemon/pool_service.h"

namespace corral {
namespace {

TEST(PoolConfig, PoolsAreReadWithTheirSandboxAsACreateBody) {
  auto c = parse_daemon_config(
      "serve:\n  pools:\n    - name: py\n      min: 2\n      max: 5\n      idle_limit: 30s\n"
      "      sandbox:\n        image: python\n        limits: {memory: 64Mi, cpus: 1.5}\n"
      "        env: {COUNT: \"3\"}\n        root: true\n    - name: bare\n",
      "serve.yaml");
  ASSERT_TRUE(c) << c.error().to_string();
  ASSERT_EQ(c->pools.size(), 2u);
  const auto& p = c->pools[0];
  EXPECT_EQ(p.name, "py");
  EXPECT_EQ(p.min, 2u);
  EXPECT_EQ(p.max, 5u);
  EXPECT_EQ(p.idle_limit_ms, 30'000);
  auto j = nlohmann::json::parse(p.sandbox_json);
  EXPECT_EQ(j["image"], "python");
  EXPECT_EQ(j["limits"]["memory"], "64Mi");
  EXPECT_DOUBLE_EQ(j["limits"]["cpus"].get<double>(), 1.5);
  EXPECT_EQ(j["env"]["COUNT"], "3");  // quoted: stays a string
  EXPECT_EQ(j["root"], true);
  EXPECT_EQ(c->pools[1].sandbox_json, "{}");
  EXPECT_EQ(c->pools[1].min, 1u);
}

TEST(PoolConfig, MistakesAreRefusedWithTheirLine) {
  for (const char* yaml : {
           "serve:\n  pools: {name: py}\n",
           "serve:\n  pools:\n    - name: py\n      size: 3\n",
           "serve:\n  pools:\n    - min: 3\n",
           "serve:\n  pools:\n    - name: py\n    - name: py\n",
           "serve:\n  pools:\n    - name: py\n      idle_limit: soon\n",
           "serve:\n  pools:\n    - name: py\n      sandbox: [1]\n",
       }) {
    auto c = parse_daemon_config(yaml, "serve.yaml");
    ASSERT_FALSE(c) << yaml;
    EXPECT_NE(c.error().message.find("serve.yaml:"), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("pools"), std::string::npos) << c.error().message;
  }
}

TEST(PoolMatch, ClaimTimeFieldsAreLeftOutAndEverythingElseCounts) {
  using daemon::PoolService;
  SandboxSpec pool;
  pool.limits.memory_bytes = 64 * kMiB;
  const std::string key = PoolService::match_key(pool);

  SandboxSpec claim = pool;
  claim.env = {{"TOKEN_NAME", "x"}};
  claim.workdir = "/tmp";
  claim.limits.max_lifetime = std::chrono::hours(2);
  claim.limits.timeout = std::chrono::seconds(5);
  claim.expected_duration_ms = 1000;
  // Bound at claim too (claim_identity.h): the host name and secrets of every
  // mode, but a broker host that is intercepted (its CA bundle is a mount).
  claim.hostname = "other";
  claim.secrets.push_back(SecretSpec{"k"});
  claim.secrets.push_back(SecretSpec{"f", "", "file"});
  claim.secrets.push_back(SecretSpec{"b", "", "broker", "", "", "", {{"api.example.test"}}});
  EXPECT_EQ(PoolService::match_key(claim), key);

  auto differs = [&](auto change) {
    SandboxSpec s = pool;
    change(s);
    return PoolService::match_key(s) != key;
  };
  EXPECT_TRUE(differs([](SandboxSpec& s) { s.limits.memory_bytes *= 2; }));
  EXPECT_TRUE(differs([](SandboxSpec& s) { s.limits.pids = 7; }));
  EXPECT_TRUE(differs([](SandboxSpec& s) { s.image = "python"; }));
  EXPECT_TRUE(differs([](SandboxSpec& s) { s.root = true; }));
  EXPECT_TRUE(differs([](SandboxSpec& s) {
    SecretSpec intercepted{"b", "", "broker"};
    intercepted.hosts.push_back(SecretHostSpec{"api.example.test", 443, true});
    s.secrets.push_back(intercepted);
  }));
  // Network, mounts and volumes are bound at claim (claim_binding.h): the
  // same key.
  EXPECT_FALSE(differs([](SandboxSpec& s) { s.network.mode = "open"; }));
  EXPECT_FALSE(differs([](SandboxSpec& s) { s.mounts.push_back(MountSpec{"/srv", "/m", false}); }));
  EXPECT_FALSE(differs([](SandboxSpec& s) {
    s.volumes.push_back(VolumeMountSpec{"cache", "", "/c", false});
  }));
}

}  // namespace
}  // namespace corral
