// Warm pools (REQUIREMENTS.md C4, issue 16 point 1; docs/adr/0015-warm-
// pools.md) against a real daemon: pools fill from serve.pools and POST
// /v1/pools; pooled sandboxes are hidden until claimed; a claim binds the
// caller's env, workdir and lifetime and never hands one sandbox out twice;
// nothing a caller wrote reaches another; refill never oversells the
// daemon's capacity (pooled sandboxes hold reservations); a burst of claims
// beyond the pool all succeed (hits + misses); a restart rebuilds pools.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon_harness.h"
#include "support/pool_fixture.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::size_t listed(TestDaemon& d) {
  return d.request("GET", "/v1/sandboxes").json()["sandboxes"].size();
}

TEST(DaemonPools, ConfiguredPoolFillsAndItsSandboxesAreHiddenUntilClaimed) {
  TestDaemon d({}, pool_config("small", 2, 2));
  ASSERT_TRUE(d.ready()) << d.output();
  json pool = wait_ready(d, "small", 2);
  ASSERT_EQ(pool.value("ready", 0u), 2u) << pool.dump();
  EXPECT_EQ(pool.value("source", ""), "config");
  HttpReply all = d.request("GET", "/v1/pools");
  ASSERT_EQ(all.status, 200) << describe(all);
  ASSERT_EQ(all.json()["pools"].size(), 1u) << describe(all);

  // No route shows or runs anything in an unclaimed pooled sandbox.
  EXPECT_EQ(listed(d), 0u);
  std::set<std::string> ids = pooled_ids(d);
  ASSERT_GE(ids.size(), 2u);
  for (const std::string& id : ids) {
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).status, 404) << id;
    EXPECT_EQ(d.request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd": "true"})").status, 404);
    EXPECT_EQ(d.request("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/x", "planted").status,
              404);
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 404);
  }
  // The metrics name the pool.
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_ready{pool=\"small\"} 2"), std::string::npos) << metrics;
}

// The caller's env, workdir and lifetime are bound at claim: a variable one
// claim sets is in its sandbox and in no other; the pooled sandbox's own
// spec (its create record) never had it.
TEST(DaemonPools, ClaimBindsEnvWorkdirAndLifetime) {
  TestDaemon d({}, pool_config("small", 2, 2));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "small", 2).value("ready", 0u), 2u);
  const std::set<std::string> pooled = pooled_ids(d);

  HttpReply r;
  std::string a = d.create_sandbox(
      R"({"pool": "small", "env": {"CLAIM_VAR": "from-a"}, "workdir": "/tmp", "max_lifetime": "2h"})",
      &r);
  ASSERT_FALSE(a.empty()) << describe(r);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(pooled.count(a), 1u) << "a hit hands out a pooled sandbox";
  for (const json& rec : d.audit_records("sandbox.create")) {
    if (rec.value("sandbox", "") == a) {
      EXPECT_FALSE(rec["spec"]["env"].contains("CLAIM_VAR")) << rec.dump();
    }
  }
  json out = d.exec(a, "echo \"$CLAIM_VAR\"; pwd");
  EXPECT_EQ(out.value("stdout", ""), "from-a\n/tmp\n") << out.dump();
  // Its lifetime counts from the claim, not from the pool's idle limit.
  json info = d.request("GET", "/v1/sandboxes/" + a).json();
  EXPECT_EQ(info["spec"]["limits"].value("max_lifetime_ms", 0), 7'200'000) << info.dump();
  ASSERT_EQ(d.audit_records("sandbox.claim").size(), 1u);

  std::string b = d.create_sandbox(R"({"pool": "small"})", &r);
  ASSERT_FALSE(b.empty()) << describe(r);
  EXPECT_NE(a, b);
  EXPECT_EQ(d.exec(b, "echo \"${CLAIM_VAR-unset}\"").value("stdout", ""), "unset\n");
  json pool = d.request("GET", "/v1/pools/small").json();
  EXPECT_EQ(pool.value("hits", 0), 2) << pool.dump();
}

// Each claim gets a sandbox no one has used: a file one caller writes is in
// no sandbox a later claim gets, and no id is handed out twice.
TEST(DaemonPools, NoCallerDataSurvivesIntoAnotherClaim) {
  TestDaemon d({}, pool_config("small", 2, 2));
  ASSERT_TRUE(d.ready()) << d.output();
  std::set<std::string> seen;
  for (int round = 0; round < 4; ++round) {
    ASSERT_GE(wait_ready(d, "small", 1).value("ready", 0u), 1u) << "round " << round;
    HttpReply r;
    std::string id = d.create_sandbox(R"({"pool": "small"})", &r);
    ASSERT_FALSE(id.empty()) << describe(r);
    EXPECT_TRUE(seen.insert(id).second) << id << " was handed out twice";
    json out = d.exec(id, "ls -A /workspace /tmp; echo caller-" + std::to_string(round) +
                              " > /workspace/mine; echo x > /tmp/mine");
    EXPECT_EQ(out.value("stdout", ""), "/tmp:\n\n/workspace:\n") << out.dump();
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  }
  EXPECT_GE(d.request("GET", "/v1/pools/small").json().value("hits", 0), 1);
}

// 50 concurrent creates naming a pool of 10: every one succeeds, each with
// its own sandbox, and the pool counts each as a hit or a miss.
TEST(DaemonPools, BurstOfFiftyClaimsAgainstAPoolOfTenAllSucceed) {
  TestDaemon d({}, pool_config("burst", 10, 10));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "burst", 10).value("ready", 0u), 10u);
  std::mutex mu;
  std::vector<std::string> ids;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < 10; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        HttpReply r;
        std::string id = d.create_sandbox(R"({"pool": "burst"})", &r);
        std::lock_guard lock(mu);
        if (id.empty())
          failures.push_back(describe(r));
        else
          ids.push_back(id);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size());
  json pool = d.request("GET", "/v1/pools/burst").json();
  EXPECT_EQ(pool.value("hits", 0) + pool.value("misses", 0), 50) << pool.dump();
  EXPECT_GE(pool.value("hits", 0), 10) << pool.dump();
  for (const std::string& id : ids) d.request("DELETE", "/v1/sandboxes/" + id);
}

// Refill under a memory cap: a pool that asks for more than serve.capacity
// holds what fits and no more, backs off, and counts its failures; the
// pooled sandboxes hold their share, so a create that would need it is
// refused (C2: never oversold).
TEST(DaemonPools, RefillUnderAMemoryCapNeverOversells) {
  TestDaemon d({}, pool_config("greedy", 6, 6, "  capacity:\n    memory: 256Mi\n    disk: 1Gi\n") +
                       "sandbox:\n  memory_limit: 64Mi\n  disk_limit: 16Mi\n");
  ASSERT_TRUE(d.ready()) << d.output();
  json pool;
  for (int i = 0; i < 600; ++i) {
    pool = d.request("GET", "/v1/pools/greedy").json();
    if (pool.value("ready", 0u) == 4u && pool.value("refill_failures", 0) > 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(pool.value("ready", 0u), 4u) << pool.dump();  // 4 x 64Mi = 256Mi
  EXPECT_GT(pool.value("refill_failures", 0), 0) << pool.dump();
  EXPECT_NE(pool.value("last_error", json()).dump().find("memory"), std::string::npos)
      << pool.dump();
  HttpReply r = d.request("POST", "/v1/sandboxes", R"({"limits": {"memory": "64Mi", "disk": "16Mi"}, "root": true})");
  EXPECT_EQ(r.status, 429) << describe(r);
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_capacity_reserved{resource=\"memory_bytes\"} 268435456"),
            std::string::npos)
      << metrics.substr(0, 4000);
  // A claim frees nothing and takes nothing: the pool refills into the room
  // a deleted claimed sandbox gives back, never beyond.
  std::string id = d.create_sandbox(R"({"pool": "greedy"})", &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  for (int i = 0; i < 600; ++i) {
    pool = d.request("GET", "/v1/pools/greedy").json();
    if (pool.value("ready", 0u) == 4u) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(pool.value("ready", 0u), 4u) << pool.dump();
}

// A create whose spec equals a pool's (identity left out) claims without
// naming it; one that differs in what a claim cannot bind goes cold,
// without an error, and is counted as a miss only when it named the pool.
TEST(DaemonPools, MatchingSpecsClaimAndOthersGoCold) {
  TestDaemon d({}, pool_config("small", 1, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "small", 1).value("ready", 0u), 1u);
  HttpReply r;
  std::string matched = d.create_sandbox(
      R"({"limits": {"memory": "64Mi", "disk": "16Mi"}, "env": {"A": "1"}})", &r);
  ASSERT_FALSE(matched.empty()) << describe(r);
  EXPECT_EQ(pooled_ids(d).count(matched), 1u);
  ASSERT_EQ(wait_ready(d, "small", 1).value("ready", 0u), 1u);
  // A root user is not bound at claim (the layer's owners, the idmap):
  // cold, no error. (A hostname is: daemon_pools_identity_test.cc.)
  std::string cold = d.create_sandbox(R"({"pool": "small", "root": true})", &r);
  ASSERT_FALSE(cold.empty()) << describe(r);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(pooled_ids(d).count(cold), 0u);
  EXPECT_EQ(d.exec(cold, "id -u").value("stdout", ""), "0\n");
  // An Idempotency-Key claims, and its retry answers the same sandbox.
  r = d.request("POST", "/v1/sandboxes", R"({"pool": "small"})", false, true,
                {{"Idempotency-Key", "k-1"}});
  ASSERT_EQ(r.status, 201) << describe(r);
  const std::string keyed = r.json().value("id", "");
  EXPECT_EQ(pooled_ids(d).count(keyed), 1u);
  r = d.request("POST", "/v1/sandboxes", R"({"pool": "small"})", false, true,
                {{"Idempotency-Key", "k-1"}});
  EXPECT_EQ(r.status, 200) << describe(r);
  EXPECT_EQ(r.json().value("id", ""), keyed);
  json pool = d.request("GET", "/v1/pools/small").json();
  EXPECT_EQ(pool.value("hits", 0), 2) << pool.dump();
  EXPECT_EQ(pool.value("misses", 0), 1) << pool.dump();
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_misses_total{pool=\"small\",reason=\"spec\"} 1"),
            std::string::npos);
  // An unknown pool is the caller's mistake; the pool key prefix is ours.
  r = d.request("POST", "/v1/sandboxes", R"({"pool": "nope"})");
  EXPECT_EQ(r.status, 404) << describe(r);
  r = d.request("POST", "/v1/sandboxes", "{}", false, true,
                {{"Idempotency-Key", "corral-pool:small:x"}});
  EXPECT_EQ(r.status, 400) << describe(r);
}

TEST(DaemonPools, PoolsAreAddedAndEndedThroughTheApi) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply r = d.request("POST", "/v1/pools",
                          R"({"name": "api", "min": 1, "idle_limit": "5m",
                              "sandbox": {"limits": {"memory": "64Mi", "disk": "16Mi"}}})");
  ASSERT_EQ(r.status, 201) << describe(r);
  EXPECT_EQ(r.json().value("source", ""), "api");
  EXPECT_EQ(d.request("POST", "/v1/pools", R"({"name": "api", "min": 1})").status, 409);
  // Identity belongs to the claim: a pool of it is refused, naming it.
  for (const char* body :
       {R"({"name": "n", "sandbox": {"network": {"mode": "open"}}})",
        R"({"name": "s", "sandbox": {"secrets": [{"name": "k"}]}})",
        R"({"name": "m", "sandbox": {"mounts": [{"source": "/tmp", "target": "/m"}]}})",
        R"({"name": "Bad Name"})", R"({"name": "x", "min": 3, "max": 2})",
        R"({"name": "x", "colour": "red"})"}) {
    r = d.request("POST", "/v1/pools", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << describe(r);
  }
  ASSERT_EQ(wait_ready(d, "api", 1).value("ready", 0u), 1u);
  const std::set<std::string> pooled = pooled_ids(d);
  r = d.request("DELETE", "/v1/pools/api");
  ASSERT_EQ(r.status, 200) << describe(r);
  EXPECT_EQ(d.request("GET", "/v1/pools/api").status, 404);
  EXPECT_EQ(d.request("DELETE", "/v1/pools/api").status, 404);
  // Its ready sandboxes went with it.
  for (const std::string& id : pooled)
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned") << id;
}

// After a restart the previous daemon's pooled sandboxes are destroyed and
// the pool is made again (ADR 0015: rebuilt, not re-adopted); a claimed
// sandbox is the caller's and lives on.
TEST(DaemonPools, RestartRebuildsPoolsAndKeepsClaimedSandboxes) {
  TestDaemon d({}, pool_config("small", 2, 2));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "small", 2).value("ready", 0u), 2u);
  HttpReply r;
  std::string claimed = d.create_sandbox(R"({"pool": "small"})", &r);
  ASSERT_FALSE(claimed.empty()) << describe(r);
  ASSERT_EQ(wait_ready(d, "small", 2).value("ready", 0u), 2u);
  const std::set<std::string> before = pooled_ids(d);
  ASSERT_TRUE(d.restart()) << d.output();
  ASSERT_EQ(wait_ready(d, "small", 2).value("ready", 0u), 2u);
  for (const std::string& id : before) {
    if (id == claimed) continue;
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned") << id;
  }
  EXPECT_EQ(d.exec(claimed, "echo still").value("stdout", ""), "still\n");
  EXPECT_EQ(listed(d), 1u);
}

}  // namespace
}  // namespace corral::testing
