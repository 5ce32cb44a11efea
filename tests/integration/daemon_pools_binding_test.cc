// Warm pools bind the caller's network, mounts and volumes at claim
// (REQUIREMENTS.md C4, issue 16 point 1; docs/adr/0015-warm-pools.md):
// against a real daemon, real pooled sandboxes and the test's own network
// namespace of upstreams (support/net_world.h). A pooled sandbox has
// loopback only; a claim with an allowlist gets exactly that policy (the
// allowed name through corral's DNS and proxy, the denied one refused, the
// self-check at claim checked it); a mount or volume bound at claim has
// its mode, seen from the host (rw writes land there, ro refuses writes);
// two claims never share a sandbox and nothing of one reaches another; a
// binding that fails destroys the sandbox and the create goes cold; each
// bound claim is a hit.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "support/daemon_harness.h"
#include "support/pool_fixture.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// The sandboxes the daemon made for the pool, and the spec each was made
// with (their create records carry the pool's idempotency key).
std::map<std::string, json> pooled(const TestDaemon& d) {
  std::map<std::string, json> out;
  for (const json& rec : d.audit_records("sandbox.create")) {
    const json key = rec.value("idempotency_key", json());
    if (key.is_string() && key.get<std::string>().rfind("corral-pool:", 0) == 0)
      out[rec.value("sandbox", "")] = rec.value("spec", json());
  }
  return out;
}

std::string read_host_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool host_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string stdout_of(const json& r) { return r.value("stdout", ""); }

// Interfaces of the sandbox's network namespace, as it sees them.
std::string interfaces(TestDaemon& d, const std::string& id) {
  return stdout_of(
      d.exec(id, "awk -F: 'NR > 2 {print $1}' /proc/net/dev | tr -d ' ' | sort | tr '\\n' ' '"));
}

const char* const kFetch =
    "/usr/bin/python3 -c \"import sys, urllib.request as u\n"
    "try:\n"
    "  print(u.urlopen('http://' + sys.argv[1] + '/', timeout=5).status)\n"
    "except Exception as e:\n"
    "  print('refused', getattr(e, 'code', type(e).__name__))\" ";

TEST(DaemonPoolsBinding, AClaimGetsExactlyItsAllowlistAndThePoolHadNoNetwork) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  NetWorld& world = **world_or;
  TestDaemon d({}, pool_config("p", 2, 2, "  network:\n    dns_servers: [\"" + world.dns_endpoint() +
                                      "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 2).value("ready", 0u), 2u) << d.output();

  // Claimed with no network, a pooled sandbox shows what every pooled one
  // has: loopback only, no resolver of corral's, no proxy.
  HttpReply r;
  const std::string plain = d.create_sandbox(R"({"pool": "p"})", &r);
  ASSERT_FALSE(plain.empty()) << describe(r);
  EXPECT_EQ(interfaces(d, plain), "lo ");
  EXPECT_EQ(stdout_of(d.exec(plain, "echo \"${HTTP_PROXY-unset}\"")), "unset\n");
  EXPECT_NE(stdout_of(d.exec(plain, std::string(kFetch) + "allowed.test")).find("refused"),
            std::string::npos);
  ASSERT_EQ(wait_ready(d, "p", 2).value("ready", 0u), 2u);

  const std::string id = d.create_sandbox(
      R"({"pool": "p", "network": {"mode": "allowlist", "allow": ["allowed.test"]}})", &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  EXPECT_EQ(r.status, 201) << describe(r);
  const auto made = pooled(d);
  ASSERT_EQ(made.count(id), 1u) << "a hit hands out a pooled sandbox";
  EXPECT_EQ(made.at(id)["network"].value("mode", ""), "none") << made.at(id).dump();

  // Exactly its policy: the stored spec and the network status say so.
  json info = d.request("GET", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(info["spec"]["network"].value("mode", ""), "allowlist") << info.dump();
  EXPECT_EQ(info["network"].value("mode", ""), "allowlist") << info.dump();
  EXPECT_EQ(info["network"]["allow"], json::array({"allowed.test:80,443"})) << info.dump();
  // The self-check at claim looked at the network it was given.
  std::set<std::string> checked;
  for (const json& c : info["self_check"]["checks"]) {
    checked.insert(c.value("name", ""));
    EXPECT_TRUE(c.value("ok", false)) << c.dump();
  }
  EXPECT_EQ(checked.count("dns") + checked.count("canary") + checked.count("proxy"), 3u)
      << info.dump();

  EXPECT_EQ(interfaces(d, id), "eth0 lo ");
  EXPECT_NE(stdout_of(d.exec(id, "cat /etc/resolv.conf")).find("nameserver 10."),
            std::string::npos);
  // The allowed name, through corral's resolver and the proxy (the proxy
  // variables bound at claim), reaches the test's upstream.
  json got = d.exec(id, std::string(kFetch) + "allowed.test");
  EXPECT_EQ(stdout_of(got), "200\n") << got.dump();
  EXPECT_GE(world.http_requests("allowed.test"), 1);
  // The denied one is refused by the proxy, and by DNS; no byte reaches it.
  got = d.exec(id, std::string(kFetch) + "denied.test");
  EXPECT_NE(stdout_of(got).find("refused"), std::string::npos) << got.dump();
  EXPECT_EQ(stdout_of(d.exec(id, "getent hosts denied.test >/dev/null; echo rc=$?")), "rc=2\n");
  EXPECT_EQ(world.http_requests("denied.test"), 0);

  json pool = d.request("GET", "/v1/pools/p").json();
  EXPECT_EQ(pool.value("hits", 0), 2) << pool.dump();
  EXPECT_EQ(pool.value("misses", 0), 0) << pool.dump();

  // Its teardown takes the link away with it (no residue).
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("residue", json::array()),
            json::array());
}

TEST(DaemonPoolsBinding, MountsBoundAtClaimHaveTheirModesSeenFromTheHost) {
  const std::string root = make_temp_dir("pool-mounts");
  const std::string rw = root + "/rw", ro = root + "/ro";
  ASSERT_EQ(::mkdir(rw.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(rw.c_str(), 0777), 0);  // past the umask: the sandbox's user writes here
  ASSERT_EQ(::mkdir(ro.c_str(), 0755), 0);
  { std::ofstream(ro + "/given") << "read me\n"; }
  TestDaemon d({}, pool_config("p", 2, 2, "  mount_roots: [\"" + root + "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 2).value("ready", 0u), 2u) << d.output();

  HttpReply r;
  const std::string id = d.create_sandbox(
      R"({"pool": "p", "mounts": [{"source": ")" + rw +
          R"(", "target": "/workspace/rw", "writable": true},
                   {"source": ")" + ro + R"(", "target": "/workspace/ro"}]})",
      &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  ASSERT_EQ(pooled(d).count(id), 1u) << "the claim was a hit";
  EXPECT_EQ(d.request("GET", "/v1/pools/p").json().value("hits", 0), 1);

  // rw: what the sandbox writes is on the host.
  json w = d.exec(id, "echo from-claim > /workspace/rw/out && echo ok");
  EXPECT_EQ(stdout_of(w), "ok\n") << w.dump();
  EXPECT_EQ(read_host_file(rw + "/out"), "from-claim\n");
  // ro: readable, never writable (the host dir is unchanged).
  EXPECT_EQ(stdout_of(d.exec(id, "cat /workspace/ro/given")), "read me\n");
  w = d.exec(id, "if echo x > /workspace/ro/planted; then echo wrote; else echo refused; fi; "
                 "rm -f /workspace/ro/given 2>/dev/null || echo kept");
  EXPECT_EQ(stdout_of(w), "refused\nkept\n") << w.dump();
  EXPECT_FALSE(host_exists(ro + "/planted"));
  EXPECT_EQ(read_host_file(ro + "/given"), "read me\n");
  // The mount flags are the planner's: nosuid, nodev; ro for the ro one.
  const std::string mounts = stdout_of(d.exec(id, "grep ' /workspace/r[ow] ' /proc/self/mountinfo"));
  std::istringstream lines(mounts);
  std::string line;
  int seen = 0;
  while (std::getline(lines, line)) {
    ++seen;
    EXPECT_NE(line.find("nosuid"), std::string::npos) << line;
    EXPECT_NE(line.find("nodev"), std::string::npos) << line;
    const bool is_ro = line.find(" /workspace/ro ") != std::string::npos;
    EXPECT_EQ(line.find(" ro,") != std::string::npos, is_ro) << line;
  }
  EXPECT_EQ(seen, 2) << mounts;
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  d.stop();
  std::system(("rm -rf '" + root + "'").c_str());
}

TEST(DaemonPoolsBinding, AVolumeBoundAtClaimIsTheVolume) {
  struct stat st {};
  if (::stat("/dev/loop-control", &st) != 0)
    CORRAL_SKIP_OR_FAIL("no /dev/loop-control: volumes need loop devices");
  TestDaemon d({}, pool_config("p", 1, 1, "  volumes:\n    max_quota: 64Mi\n    max_total: 256Mi\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply made = d.request("POST", "/v1/volumes", R"({"name": "vol", "quota": "16Mi"})");
  ASSERT_EQ(made.status / 100, 2) << describe(made);
  ASSERT_EQ(wait_ready(d, "p", 1).value("ready", 0u), 1u) << d.output();
  HttpReply r;
  const std::string id = d.create_sandbox(
      R"({"pool": "p", "volumes": [{"volume": "vol", "target": "/workspace/vol", "writable": true}]})",
      &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  ASSERT_EQ(pooled(d).count(id), 1u) << "the claim was a hit";
  json w = d.exec(id, "echo kept > /workspace/vol/file && echo ok");
  EXPECT_EQ(stdout_of(w), "ok\n") << w.dump();
  const std::string host = d.data_dir() + "/volumes/mnt/default/vol/file";
  EXPECT_EQ(read_host_file(host), "kept\n") << host;
  // In use while the sandbox lives: the volume cannot be removed under it.
  EXPECT_NE(d.request("DELETE", "/v1/volumes/vol").status / 100, 2);
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// The network a claim bound is re-attached by a restarted daemon as a cold
// create's: the pooled sandbox's init held the slot's lock from the start.
TEST(DaemonPoolsBinding, ARestartKeepsTheNetworkBoundAtClaim) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  TestDaemon d({}, pool_config("p", 1, 1, "  network:\n    dns_servers: [\"" +
                                      (*world_or)->dns_endpoint() + "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 1).value("ready", 0u), 1u) << d.output();
  HttpReply r;
  const std::string id = d.create_sandbox(
      R"({"pool": "p", "network": {"mode": "allowlist", "allow": ["allowed.test"]}})", &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  ASSERT_EQ(pooled(d).count(id), 1u);
  ASSERT_TRUE(d.restart()) << d.output();
  json info = d.request("GET", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(info.value("state", ""), "ready") << info.dump();
  EXPECT_EQ(info["network"].value("mode", ""), "allowlist") << info.dump();
  json got = d.exec(id, std::string(kFetch) + "allowed.test");
  EXPECT_EQ(stdout_of(got), "200\n") << got.dump();
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
}

// Two claims, each with its own network and mount: never one sandbox for
// both, and nothing of the first (its files, its mount, its resolver, its
// proxy variables, its link) is in the second.
TEST(DaemonPoolsBinding, TwoClaimsNeverShareAndNothingOfAReachesB) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  const std::string root = make_temp_dir("pool-share");
  const std::string dir_a = root + "/a";
  ASSERT_EQ(::mkdir(dir_a.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir_a.c_str(), 0777), 0);
  TestDaemon d({}, pool_config("p", 2, 2, "  mount_roots: [\"" + root + "\"]\n  network:\n    dns_servers: [\"" +
                                      (*world_or)->dns_endpoint() + "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 2).value("ready", 0u), 2u) << d.output();

  HttpReply r;
  const std::string a = d.create_sandbox(
      R"({"pool": "p", "network": {"mode": "allowlist", "allow": ["allowed.test"]},
          "mounts": [{"source": ")" + dir_a + R"(", "target": "/workspace/a", "writable": true}]})",
      &r);
  ASSERT_FALSE(a.empty()) << describe(r);
  EXPECT_EQ(stdout_of(d.exec(a, "echo secret-of-a > /workspace/a/f; echo mine > /workspace/own; "
                                "echo ok")),
            "ok\n");
  const std::string b = d.create_sandbox(R"({"pool": "p"})", &r);
  ASSERT_FALSE(b.empty()) << describe(r);
  EXPECT_NE(a, b);
  const auto made = pooled(d);
  EXPECT_EQ(made.count(a) + made.count(b), 2u) << "both claims were hits";
  json seen = d.exec(b, "ls -A /workspace; cat /etc/resolv.conf 2>/dev/null | grep -c 10.211 || true; "
                        "echo \"${HTTP_PROXY-unset}\"");
  EXPECT_EQ(stdout_of(seen), "0\nunset\n") << seen.dump();
  EXPECT_EQ(interfaces(d, b), "lo ");
  EXPECT_EQ(d.request("GET", "/v1/pools/p").json().value("hits", 0), 2);
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + a).status, 200);
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + b).status, 200);
  d.stop();
  std::system(("rm -rf '" + root + "'").c_str());
}

// A mount whose target cannot be made in the running sandbox (under a
// file of the image) fails at claim: the pooled sandbox is destroyed,
// never handed out, and the create goes cold (where it fails the same
// way, and says so). The miss is counted as a binding failure.
TEST(DaemonPoolsBinding, AFailedBindingDestroysTheSandboxAndTheCreateGoesCold) {
  const std::string root = make_temp_dir("pool-bindfail");
  TestDaemon d({}, pool_config("p", 1, 1, "  mount_roots: [\"" + root + "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 1).value("ready", 0u), 1u) << d.output();
  const std::set<std::string> before = [&] {
    std::set<std::string> ids;
    for (const auto& kv : pooled(d)) ids.insert(kv.first);
    return ids;
  }();
  ASSERT_EQ(before.size(), 1u);
  const std::string victim = *before.begin();

  HttpReply r;
  const std::string id = d.create_sandbox(
      R"({"pool": "p", "mounts": [{"source": ")" + root + R"(", "target": "/etc/passwd/x"}]})",
      &r);
  EXPECT_TRUE(id.empty()) << "a create whose mount cannot be made was answered with " << id;
  EXPECT_NE(r.status, 201) << describe(r);
  // The pooled sandbox it was tried on is gone, torn down with the reason.
  json info = d.request("GET", "/v1/sandboxes/" + victim).json();
  EXPECT_EQ(info.value("state", ""), "cleaned") << info.dump();
  bool said = false;
  for (const json& rec : d.audit_records("sandbox.destroy")) {
    if (rec.value("sandbox", "") == victim)
      said |= rec.value("reason", "").find("binding the claim failed") != std::string::npos;
  }
  EXPECT_TRUE(said) << "no sandbox.destroy record of " << victim << " with the reason";
  EXPECT_EQ(info.value("residue", json::array()), json::array()) << info.dump();
  EXPECT_TRUE(d.audit_records("sandbox.claim").empty()) << "a failed binding is no claim";
  json pool = d.request("GET", "/v1/pools/p").json();
  EXPECT_EQ(pool.value("hits", 0), 0) << pool.dump();
  EXPECT_EQ(pool.value("misses", 0), 1) << pool.dump();
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_misses_total{pool=\"p\",reason=\"bind\"} 1"),
            std::string::npos)
      << metrics;
  // The pool refills, and a bindable claim is a hit again.
  ASSERT_EQ(wait_ready(d, "p", 1).value("ready", 0u), 1u);
  const std::string ok = d.create_sandbox(
      R"({"pool": "p", "mounts": [{"source": ")" + root + R"(", "target": "/workspace/in"}]})", &r);
  ASSERT_FALSE(ok.empty()) << describe(r);
  EXPECT_EQ(pooled(d).count(ok), 1u);
  d.stop();
  std::system(("rm -rf '" + root + "'").c_str());
}

// A writable mount outside what the sandbox may write (its Landlock rules
// were fixed when it started) is not bound at claim: a miss, cold, and
// the cold sandbox can write there.
TEST(DaemonPoolsBinding, AWritableMountOutsideTheWritableDirsGoesCold) {
  const std::string root = make_temp_dir("pool-landlock");
  const std::string dir = root + "/data";
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  TestDaemon d({}, pool_config("p", 1, 1, "  mount_roots: [\"" + root + "\"]\n"));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "p", 1).value("ready", 0u), 1u) << d.output();
  HttpReply r;
  const std::string id = d.create_sandbox(
      R"({"pool": "p", "mounts": [{"source": ")" + dir + R"(", "target": "/data", "writable": true}]})",
      &r);
  ASSERT_FALSE(id.empty()) << describe(r);
  EXPECT_EQ(pooled(d).count(id), 0u) << "went cold";
  EXPECT_EQ(stdout_of(d.exec(id, "echo x > /data/f && echo ok")), "ok\n");
  const std::string metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find("corral_pool_misses_total{pool=\"p\",reason=\"mounts\"} 1"),
            std::string::npos)
      << metrics;
  d.stop();
  std::system(("rm -rf '" + root + "'").c_str());
}

}  // namespace
}  // namespace corral::testing
