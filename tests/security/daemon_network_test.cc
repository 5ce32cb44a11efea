// The network engine behind `corral serve` (issue 4, ADR 0005): sandboxes
// created through the API with a network policy, attacked from inside
// against the test internet of tests/support/net_world.h and checked from
// outside (what the world's servers saw, the audit log, /metrics, the
// host's links). Traffic goes only to the world's own servers.
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "support/daemon_harness.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

std::string daemon_config(const NetWorld& world) {
  return "serve:\n  network:\n    dns_servers: [\"" + world.dns_endpoint() + "\"]\n";
}

// Runs the client with `script` in sandbox `id`; returns its stdout.
std::string run_client(TestDaemon& d, const std::string& id, const std::string& script) {
  json body{{"argv", {"/usr/bin/python3", "-c", std::string(kNetClientPy) + script}},
            {"timeout", 60}};
  HttpReply r = d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump());
  json j = r.json();
  EXPECT_EQ(r.status, 200) << r.body;
  return j.value("stdout", "") + j.value("stderr", "");
}

bool link_exists(const std::string& name) { return if_nametoindex(name.c_str()) != 0; }

#define REQUIRE_WORLD(world)                                            \
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root"); \
  auto world##_or = NetWorld::create();                                 \
  ASSERT_TRUE(world##_or.has_value()) << world##_or.error().message;    \
  NetWorld& world = **world##_or

TEST(DaemonNetwork, AllowlistIsEnforcedAuditedCountedAndCleanedUp) {
  REQUIRE_WORLD(world);
  TestDaemon d({}, daemon_config(world));
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply created;
  const std::string id = d.create_sandbox(
      R"({"network": {"mode": "allowlist", "allow": ["allowed.test"]}})", &created);
  ASSERT_FALSE(id.empty()) << created.body;
  json info = created.json();
  ASSERT_TRUE(info["network"].is_object()) << created.body;
  EXPECT_EQ(info["network"]["mode"], "allowlist");
  EXPECT_EQ(info["network"]["allow"], json::array({"allowed.test:80,443"}))
      << info["network"].dump();
  const std::string address = info["network"].value("address", "");
  ASSERT_FALSE(address.empty());

  std::string out = run_client(d, id, R"PY(
out("allowed", transparent_http("allowed.test"))
out("denied", transparent_http("denied.test"))
)PY");
  EXPECT_EQ(value_of(out, "allowed"), "OK hello from allowed.test") << out;
  EXPECT_EQ(value_of(out, "denied").find("hello from"), std::string::npos) << out;
  EXPECT_EQ(world.http_requests("allowed.test"), 1);
  EXPECT_EQ(world.http_requests("denied.test"), 0) << "a denied name reached its server";

  // Audited: the allowed connection with its bytes, the refused name in DNS.
  auto conns = d.wait_audit("network.connection", 1);
  bool allowed_seen = false;
  for (const json& c : conns) {
    if (c.value("sandbox", "") != id) continue;
    if (c.value("decision", "") == "allow" && c.value("name", "") == "allowed.test") {
      allowed_seen = true;
      EXPECT_GT(c.value("bytes_down", 0), 0) << c.dump();
      EXPECT_EQ(c.value("port", 0), 80) << c.dump();
    }
  }
  EXPECT_TRUE(allowed_seen) << "no audit record of the allowed connection";
  auto dns = d.wait_audit("network.dns", 2);
  bool denied_dns = false;
  for (const json& q : dns)
    denied_dns |= q.value("name", "") == "denied.test" && q.value("decision", "") == "deny";
  EXPECT_TRUE(denied_dns) << "the refused DNS query is not in the audit log";

  HttpReply metrics = d.request("GET", "/metrics");
  EXPECT_NE(metrics.body.find("corral_network_blocked_total{layer=\"dns\",reason=\"denied\"}"),
            std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("corral_network_connections_total"), std::string::npos);
  EXPECT_NE(metrics.body.find("corral_network_firewall_dropped_packets_total"), std::string::npos);

  // The link is on the host while the sandbox lives, gone after destroy.
  json status = d.request("GET", "/v1/sandboxes/" + id).json();
  const std::string host_address = status["network"].value("host_address", "");
  ASSERT_FALSE(host_address.empty());
  const std::string link = interface_with(host_address);
  EXPECT_EQ(link.rfind("crl", 0), 0u) << "no crl link holds " << host_address;
  HttpReply del = d.request("DELETE", "/v1/sandboxes/" + id);
  ASSERT_EQ(del.status, 200) << del.body;
  if (!link.empty()) {
    EXPECT_FALSE(link_exists(link)) << link << " is left after destroy";
  }
  EXPECT_EQ(del.json()["residue"], json::array()) << del.body;
  EXPECT_EQ(del.json().value("state", ""), "cleaned") << del.body;
}

TEST(DaemonNetwork, LivePolicyChangeTakesEffectAtOnce) {
  REQUIRE_WORLD(world);
  TestDaemon d({}, daemon_config(world));
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox(R"({"network": {"allow": ["allowed.test"]}})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(value_of(run_client(d, id, "out('a', transparent_http('allowed.test'))"), "a"),
            "OK hello from allowed.test");

  // Swap the allowed name: the next connections follow the new policy.
  HttpReply put = d.request("PUT", "/v1/sandboxes/" + id + "/network",
                            R"({"mode": "allowlist", "allow": ["denied.test"]})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.json()["network"]["allow"], json::array({"denied.test:80,443"})) << put.body;
  std::string out = run_client(d, id, R"PY(
out("a", transparent_http("allowed.test"))
out("b", transparent_http("denied.test"))
)PY");
  EXPECT_EQ(value_of(out, "a").find("hello from"), std::string::npos) << out;
  EXPECT_EQ(value_of(out, "b"), "OK hello from denied.test") << out;
  EXPECT_EQ(world.http_requests("allowed.test"), 1) << "the old rule still let a connection out";

  // Narrowed to nothing, then a bad rule: refused with the field named.
  HttpReply none = d.request("PUT", "/v1/sandboxes/" + id + "/network", R"({"mode": "none"})");
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(
      value_of(run_client(d, id, "out('b', transparent_http('denied.test'))"), "b").find("hello"),
      std::string::npos);
  HttpReply bad =
      d.request("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow": ["ftp://x.test"]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json()["error"].value("field", ""), "allow[0]") << bad.body;
  auto changes = d.audit_records("sandbox.network");
  EXPECT_EQ(changes.size(), 2u);
}

// A default network the engine cannot take (a rule it refuses) stops the
// daemon at start with the rule named, instead of failing every create.
TEST(DaemonNetwork, ABadDefaultNetworkStopsTheDaemonAtStart) {
  TestDaemon d({}, "sandbox:\n  network:\n    default: deny\n    allow_domains: [intranet]\n");
  EXPECT_FALSE(d.ready()) << "the daemon started with a network rule it cannot apply";
  EXPECT_TRUE(d.wait_output("\"intranet\" is a single label")) << d.output();
}

TEST(DaemonNetwork, RefusesWhatCannotBeGivenWithClearErrors) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply r;
  EXPECT_EQ(d.create_sandbox(R"({"network": {"mode": "bridge"}})", &r), "");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"].value("field", ""), "network.mode") << r.body;
  EXPECT_EQ(d.create_sandbox(R"({"network": {"template": "no-such-template"}})", &r), "");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.json()["error"].value("message", "").find("no-such-template"), std::string::npos)
      << r.body;
  // An empty allowlist is no network, never everything.
  const std::string id = d.create_sandbox(R"({"network": {"mode": "allowlist", "allow": []}})", &r);
  if (id.empty()) {
    EXPECT_EQ(r.status, 400) << r.body;
  } else {
    json info = d.request("GET", "/v1/sandboxes/" + id).json();
    EXPECT_TRUE(info["network"].is_null()) << info.dump();
    // A sandbox without network cannot be given one later.
    HttpReply put =
        d.request("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow": ["allowed.test"]})");
    EXPECT_EQ(put.status, 409) << put.body;
  }
}

TEST(DaemonNetwork, ReattachedSandboxKeepsItsNetwork) {
  REQUIRE_WORLD(world);
  TestDaemon d({}, daemon_config(world));
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox(R"({"network": {"allow": ["allowed.test"]}})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_TRUE(d.wait_output("1 re-attached")) << d.output();
  std::string out = run_client(d, id, R"PY(
out("a", transparent_http("allowed.test"))
out("b", transparent_http("denied.test"))
)PY");
  EXPECT_EQ(value_of(out, "a"), "OK hello from allowed.test") << out;
  EXPECT_EQ(value_of(out, "b").find("hello from"), std::string::npos) << out;
  HttpReply del = d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json()["residue"], json::array()) << del.body;
}

// A live update narrows the policy; a restart keeps the narrowed one, not
// the create's wider one (the update gave no "mode", as a client may).
TEST(DaemonNetwork, ANarrowedPolicySurvivesARestart) {
  REQUIRE_WORLD(world);
  TestDaemon d({}, daemon_config(world));
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id =
      d.create_sandbox(R"({"network": {"allow": ["allowed.test", "denied.test"]}})");
  ASSERT_FALSE(id.empty());
  HttpReply put =
      d.request("PUT", "/v1/sandboxes/" + id + "/network", R"({"allow": ["allowed.test"]})");
  ASSERT_EQ(put.status, 200) << put.body;
  // What GET shows can be sent back as it is.
  json shown = d.request("GET", "/v1/sandboxes/" + id).json()["spec"]["network"];
  HttpReply again = d.request("PUT", "/v1/sandboxes/" + id + "/network", shown.dump());
  EXPECT_EQ(again.status, 200) << shown.dump() << " -> " << again.body;
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  std::string out = run_client(d, id, R"PY(
out("a", transparent_http("allowed.test"))
out("b", transparent_http("denied.test"))
)PY");
  EXPECT_EQ(value_of(out, "a"), "OK hello from allowed.test") << out;
  EXPECT_EQ(value_of(out, "b").find("hello from"), std::string::npos)
      << "the create's wider policy came back after the restart: " << out;
  json after = d.request("GET", "/v1/sandboxes/" + id).json()["spec"]["network"];
  EXPECT_EQ(after.value("allow", json::array()), json::array({"allowed.test"})) << after.dump();
  HttpReply del = d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.json()["residue"], json::array()) << del.body;
}

// The gateway (N5) behind the daemon: a service of serve.network.gateway,
// granted by the create, reached with the per-process token; an ungranted
// one and a request without the token are refused, and audited.
TEST(DaemonNetwork, GatewayServesAGrantedServiceWithTheProcessToken) {
  REQUIRE_WORLD(world);
  const std::string config = daemon_config(world) +
                             "    gateway:\n"
                             "      - name: billing\n"
                             "        url: \"http://" +
                             std::string(NetWorld::kInternalAddress) + ":" +
                             std::to_string(NetWorld::kInternalPort) +
                             "/api\"\n"
                             "        methods: [GET]\n"
                             "      - name: secrets\n"
                             "        url: \"http://" +
                             std::string(NetWorld::kInternalAddress) + ":" +
                             std::to_string(NetWorld::kInternalPort) + "/secrets\"\n";
  TestDaemon d({}, config);
  ASSERT_TRUE(d.ready()) << d.output();
  HttpReply unknown;
  EXPECT_EQ(d.create_sandbox(R"({"network": {"gateway": ["payroll"]}})", &unknown), "");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  const std::string id = d.create_sandbox(R"({"network": {"gateway": ["billing"]}})");
  ASSERT_FALSE(id.empty());
  std::string out = run_client(d, id, R"PY(
out("token", "yes" if os.environ.get("CORRAL_GATEWAY_TOKEN", "").startswith("cgw1.") else "no")
out("granted", gw("GET", "/billing/invoices"))
out("ungranted", gw("GET", "/secrets/all"))
out("no_token", gw("GET", "/billing/invoices", token=""))
out("raw", transparent_http("198.51.100.20", port=8080))
)PY");
  EXPECT_EQ(value_of(out, "token"), "yes") << out;
  EXPECT_NE(value_of(out, "granted").find("200"), std::string::npos) << out;
  EXPECT_NE(value_of(out, "granted").find("internal GET /api/invoices"), std::string::npos) << out;
  EXPECT_NE(value_of(out, "ungranted").find("403"), std::string::npos) << out;
  EXPECT_NE(value_of(out, "no_token").find("401"), std::string::npos) << out;
  EXPECT_EQ(value_of(out, "raw").find("internal"), std::string::npos) << out;
  // The service saw exactly the granted request, without the token.
  auto seen = world.internal_requests();
  ASSERT_EQ(seen.size(), 1u) << ::testing::PrintToString(seen);
  EXPECT_NE(seen[0].find("GET /api/invoices"), std::string::npos) << seen[0];
  EXPECT_NE(seen[0].find("token=no"), std::string::npos) << seen[0];
  auto events = d.wait_audit("network.gateway", 3);
  int allowed = 0, denied = 0;
  for (const json& e : events) (e.value("decision", "") == "allow" ? allowed : denied)++;
  EXPECT_EQ(allowed, 1);
  EXPECT_EQ(denied, 2);
  HttpReply metrics = d.request("GET", "/metrics");
  EXPECT_NE(metrics.body.find("layer=\"gateway\",reason=\"not_granted\""), std::string::npos);
}

// A sandbox's own dns_servers are where its names are resolved, by corral's
// DNS and by the proxy alike; the daemon's servers serve the others.
TEST(DaemonNetwork, PerSandboxDnsServersAreUsed) {
  REQUIRE_WORLD(world);
  // The daemon's own upstream answers nothing (the discard port).
  TestDaemon d({}, "serve:\n  network:\n    dns_servers: [\"127.0.0.1:9\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string own = d.create_sandbox(R"({"network": {"allow": ["allowed.test"],
      "dns_servers": [")" + world.dns_endpoint() +
                                           R"("]}})");
  const std::string other = d.create_sandbox(R"({"network": {"allow": ["allowed.test"]}})");
  ASSERT_FALSE(own.empty());
  ASSERT_FALSE(other.empty());
  EXPECT_EQ(value_of(run_client(d, own, "out('a', transparent_http('allowed.test'))"), "a"),
            "OK hello from allowed.test");
  EXPECT_EQ(value_of(run_client(d, other, "out('a', transparent_http('allowed.test'))"), "a")
                .find("hello"),
            std::string::npos);
  EXPECT_EQ(world.http_requests("allowed.test"), 1);
}

}  // namespace
}  // namespace corral::testing
