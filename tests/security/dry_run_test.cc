// Dry-run (X2, issue 16 point 3; docs/dry-run.md, ADR 0016), the issue's
// scenario attacked from inside real sandboxes and checked from outside: a
// script writes files, deletes a file of a mounted host dir (and, through
// the daemon, of a mounted volume), fetches from the test internet
// (tests/support/net_world.h: upstream servers in a network namespace of
// the test's own, which count what reaches them) over HTTP, TLS, raw TCP
// and the gateway, and reads a secret. After it: the host dir and the
// volume are byte-identical, the upstreams and the upstream DNS counted
// zero requests, no secret value is in the report, and the report lists
// each action. Both through `corral run --dry-run` and through the daemon
// ("dry_run": true on a create, GET /v1/sandboxes/{id}/dry-run, and on a
// task). Each has a control: the same without dry-run does reach the host
// or the upstream, so the zeros are not a broken world.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "support/daemon_harness.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"
#include "support/secret_file.h"

namespace corral::testing {
namespace {

using nlohmann::json;

#define REQUIRE_WORLD(world)                                                \
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("dry-run network tests run as root"); \
  auto world##_or = NetWorld::create();                                     \
  ASSERT_TRUE(world##_or.has_value()) << world##_or.error().message;        \
  NetWorld& world = **world##_or

// Names, types, modes, owners, sizes and contents of everything under
// `dir`: what "byte-identical" means here.
std::string tree_hash(const std::string& dir) {
  return host_sh("cd '" + dir +
                 "' && find . -printf '%p %y %m %U:%G %s %l\\n' | sort && "
                 "find . -type f -print0 | sort -z | xargs -0 -r sha256sum");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A host dir for a writable mount: a file to keep and one to delete.
std::string make_data_dir(const std::string& root) {
  const std::string data = root + "/data";
  std::filesystem::create_directories(data);
  std::ofstream(data + "/keep") << "line 1\n";
  std::ofstream(data + "/victim") << "0123456789";
  host_sh("chmod -R a+rwX '" + data + "'");
  return data;
}

// What the script does over the network: transparent HTTP, HTTP through
// the proxy variables, TLS, raw TCP, a gateway call, and a denied name.
const char* const kNetworkScript = R"PY(
out("http", transparent_http("allowed.test", path="/v1/items?q=1"))
out("proxied", proxied_http("http://allowed.test/through-proxy"))
out("tls", tls_get("allowed.test"))
out("tcp", tcp_echo("allowed.test"))
out("denied", transparent_http("denied.test"))
try:
    out("resolved", socket.gethostbyname("allowed.test"))
except Exception as e:
    out("resolved", err(e))
)PY";

// The world saw nothing of any of it.
void expect_upstreams_untouched(NetWorld& world) {
  EXPECT_EQ(world.http_requests("allowed.test"), 0) << "an HTTP request reached the upstream";
  EXPECT_EQ(world.tls_handshakes("allowed.test"), 0) << "a TLS handshake reached the upstream";
  EXPECT_EQ(world.tcp_connections(NetWorld::kAllowedAddress), 0) << "raw TCP reached the upstream";
  EXPECT_EQ(world.http_requests("denied.test"), 0);
  EXPECT_EQ(world.dns().queries_for("allowed.test"), 0) << "a query reached the upstream DNS";
  EXPECT_EQ(world.dns().queries_for("denied.test"), 0);
  EXPECT_TRUE(world.internal_requests().empty()) << "a gateway call reached the service";
}

const json* connection(const json& network, const std::string& host, int port) {
  for (const auto& c : network["connections"])
    if (c.value("host", "") == host && c.value("port", 0) == port) return &c;
  return nullptr;
}

const json* change(const json& writes, const std::string& path) {
  for (const auto& c : writes["changes"])
    if (c.value("path", "") == path) return &c;
  return nullptr;
}

// The network part of a report: each action of kNetworkScript is listed.
void expect_network_reported(const json& network) {
  const json* http = connection(network, "allowed.test", 80);
  ASSERT_NE(http, nullptr) << network.dump();
  EXPECT_GE((*http)["count"].get<int>(), 2) << "transparent and proxied: " << network.dump();
  EXPECT_EQ((*http)["real_run"], "allow") << http->dump();
  bool get_items = false, get_proxy = false;
  for (const auto& r : (*http)["requests"]) {
    get_items |= r.value("method", "") == "GET" && r.value("path", "") == "/v1/items";
    get_proxy |= r.value("method", "") == "GET" && r.value("path", "") == "/through-proxy";
  }
  EXPECT_TRUE(get_items) << "method and path of the transparent request: " << http->dump();
  EXPECT_TRUE(get_proxy) << "method and path of the proxied request: " << http->dump();
  const json* tls = connection(network, "allowed.test", 443);
  ASSERT_NE(tls, nullptr) << network.dump();
  EXPECT_EQ(tls->value("sni", ""), "allowed.test") << tls->dump();
  const json* tcp = connection(network, "allowed.test", 5432);
  ASSERT_NE(tcp, nullptr) << "raw TCP is mapped back to its name: " << network.dump();
  const json* denied = connection(network, "denied.test", 80);
  if (denied != nullptr) {
    EXPECT_EQ((*denied)["real_run"], "deny") << denied->dump();
  }
  bool dns_allowed = false, dns_denied = false;
  for (const auto& q : network["dns"]) {
    if (q.value("name", "") == "allowed.test" && q.value("type", "") == "A") {
      dns_allowed = true;
      EXPECT_EQ(q.value("answer", "").rfind("198.18.", 0), 0u)
          << "a synthetic address, not the upstream's: " << q.dump();
    }
    dns_denied |= q.value("name", "") == "denied.test" && q.value("outcome", "") == "denied";
  }
  EXPECT_TRUE(dns_allowed) << network.dump();
  EXPECT_TRUE(dns_denied) << network.dump();
}

class DryRun : public ::testing::Test {
 protected:
  void SetUp() override { root_ = make_temp_dir("dry-run-e2e"); }
  void TearDown() override {
    std::error_code ec;
    if (root_.rfind("/tmp/corral-test-", 0) == 0) std::filesystem::remove_all(root_, ec);
  }
  std::string root_;
};

std::vector<std::string> cli_network_flags(NetWorld& world) {
  return {"--dns", world.dns_endpoint(), "--allow", "allowed.test",
          "--allow", "tcp://allowed.test:5432",
          "--gateway-service",
          std::string("internal=http://") + NetWorld::kInternalAddress + ":" +
              std::to_string(NetWorld::kInternalPort),
          "--gateway", "internal"};
}

TEST_F(DryRun, CorralRunKeepsTheHostAndTheUpstreamsUntouchedAndReportsEachAction) {
  REQUIRE_WORLD(world);
  const std::string data = make_data_dir(root_);
  const std::string before = tree_hash(data);
  std::vector<std::string> opts = {"--dry-run", "--mount-root", root_, "--mount",
                                   data + ":/data:rw"};
  for (const auto& f : cli_network_flags(world)) opts.push_back(f);
  opts.push_back("--env");
  opts.push_back("WORLD_CA=" + read_file(world.ca_pem_path()));
  RunOutcome r = run_sandbox(
      opts, {"/usr/bin/python3", "-c",
             std::string(kNetClientPy) +
                 "open('/workspace/out.txt','w').write('result\\n')\n"
                 "open('/data/new.txt','w').write('fresh')\n"
                 "os.remove('/data/victim')\n"
                 "out('sees_own_write', open('/data/new.txt').read())\n" +
                 kNetworkScript + "out('gw', gw('GET', '/internal/hello'))\n"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "sees_own_write"), "fresh") << r.out;
  EXPECT_EQ(value_of(r.out, "http").find("hello from"), std::string::npos)
      << "the sandbox got the upstream's answer: " << r.out;
  EXPECT_NE(value_of(r.out, "gw").find("503"), std::string::npos) << r.out;

  EXPECT_EQ(tree_hash(data), before) << "the host dir changed in a dry run";
  expect_upstreams_untouched(world);

  const json& dry = r.report["dry_run"];
  ASSERT_TRUE(dry.is_object()) << r.report.dump();
  const json* out = change(dry["writes"], "/workspace/out.txt");
  ASSERT_NE(out, nullptr) << dry["writes"].dump();
  EXPECT_EQ((*out)["change"], "created");
  const json* victim = change(dry["writes"], "/data/victim");
  ASSERT_NE(victim, nullptr) << dry["writes"].dump();
  EXPECT_EQ((*victim)["change"], "deleted");
  ASSERT_NE(change(dry["writes"], "/data/new.txt"), nullptr) << dry["writes"].dump();
  expect_network_reported(dry["network"]);
  bool gateway = false;
  for (const auto& g : dry["network"]["gateway"])
    gateway |= g.value("service", "") == "internal" && g.value("path", "") == "/internal/hello";
  EXPECT_TRUE(gateway) << "the gateway call is recorded: " << dry["network"].dump();

  const std::string summary = dry.value("summary", "");
  EXPECT_NE(summary.find("would delete /data/victim"), std::string::npos) << summary;
  EXPECT_NE(summary.find("would connect to allowed.test:443 once"), std::string::npos) << summary;
  EXPECT_NE(summary.find("would connect to allowed.test:80 twice"), std::string::npos) << summary;
}

TEST_F(DryRun, CorralRunControlWithoutDryRunReachesTheHostAndTheUpstream) {
  REQUIRE_WORLD(world);
  const std::string data = make_data_dir(root_);
  std::vector<std::string> opts = {"--mount-root", root_, "--mount", data + ":/data:rw", "--dns",
                                   world.dns_endpoint(), "--allow", "allowed.test"};
  RunOutcome r = run_sandbox(opts, {"/usr/bin/python3", "-c",
                                    std::string(kNetClientPy) +
                                        "os.remove('/data/victim')\n"
                                        "out('http', transparent_http('allowed.test'))\n"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(value_of(r.out, "http"), "OK hello from allowed.test") << r.out << r.err;
  EXPECT_EQ(world.http_requests("allowed.test"), 1);
  EXPECT_FALSE(std::filesystem::exists(data + "/victim"));
}

TEST_F(DryRun, CorralRunSummaryLine) {
  REQUIRE_WORLD(world);
  RunOutcome r = run_sandbox(
      {"--dry-run", "--dns", world.dns_endpoint(), "--allow", "allowed.test"},
      {"/usr/bin/python3", "-c",
       std::string(kNetClientPy) + "transparent_http('allowed.test')\n"
                                   "transparent_http('allowed.test')\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("corral: dry-run: would write nothing, would connect to "
                       "allowed.test:80 twice"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(world.http_requests("allowed.test"), 0);
}

// ---- the daemon ---------------------------------------------------------------

std::string daemon_config(const NetWorld& world, const SecretFile& secrets,
                          const std::string& mount_root) {
  return secrets.config() + "  network:\n    dns_servers: [\"" + world.dns_endpoint() +
         "\"]\n  mount_roots: [\"" + mount_root + "\"]\n  volumes:\n    max_quota: 64Mi\n" +
         "    max_total: 1Gi\n";
}

json exec_py(TestDaemon& d, const std::string& id, const std::string& script) {
  json body{{"argv", {"/usr/bin/python3", "-c", std::string(kNetClientPy) + script}},
            {"timeout", 60}};
  return d.request("POST", "/v1/sandboxes/" + id + "/exec", body.dump()).json();
}

// The volume's files, read through a normal sandbox (sha256 of each).
std::string volume_hash(TestDaemon& d, const std::string& volume) {
  const std::string id = d.create_sandbox(
      json{{"volumes", {{{"volume", volume}, {"target", "/vol"}}}}}.dump());
  if (id.empty()) return "<no sandbox>";
  json r = d.exec(id, "cd /vol && find . -type f | sort | xargs -r sha256sum");
  d.request("DELETE", "/v1/sandboxes/" + id);
  return r.value("stdout", "<no output>");
}

// The daemon's dry run: a sandbox, its report while it lives, and a task.
TEST_F(DryRun, DaemonSandboxAndTaskKeepEverythingAndReportEachAction) {
  REQUIRE_WORLD(world);
  struct stat st {};
  if (::stat("/dev/loop-control", &st) != 0) CORRAL_SKIP_OR_FAIL("volumes need loop devices");
  SecretFile secrets({"openai"});
  const std::string data = make_data_dir(root_);
  TestDaemon d({}, daemon_config(world, secrets, root_));
  ASSERT_TRUE(d.ready()) << d.output();

  // A volume with a file in it, written by a normal sandbox.
  ASSERT_EQ(d.request("POST", "/v1/volumes", R"({"name":"dryvol","quota":"16Mi"})").status, 201);
  {
    const std::string id = d.create_sandbox(
        R"({"volumes": [{"volume": "dryvol", "target": "/vol", "writable": true}]})");
    ASSERT_FALSE(id.empty());
    json w = d.exec(id, "echo precious > /vol/precious && echo other > /vol/other");
    ASSERT_EQ(w.value("exit_code", -1), 0) << w.dump();
    d.request("DELETE", "/v1/sandboxes/" + id);
  }
  const std::string volume_before = volume_hash(d, "dryvol");
  ASSERT_NE(volume_before.find("precious"), std::string::npos) << volume_before;
  const std::string host_before = tree_hash(data);

  const json body = {
      {"dry_run", true},
      {"env", {{"WORLD_CA", read_file(world.ca_pem_path())}}},
      {"network", {{"allow", {"allowed.test", "tcp://allowed.test:5432"}}}},
      {"mounts", {{{"source", data}, {"target", "/data"}, {"writable", true}}}},
      {"volumes", {{{"volume", "dryvol"}, {"target", "/vol"}, {"writable", true}}}},
      {"secrets", {{{"name", "openai"}, {"mode", "file"}}}}};
  HttpReply created;
  const std::string id = d.create_sandbox(body.dump(), &created);
  ASSERT_FALSE(id.empty()) << created.body;
  json r = exec_py(d, id,
                   "open('/workspace/out.txt','w').write('result\\n')\n"
                   "os.remove('/data/victim')\n"
                   "os.remove('/vol/precious')\n"
                   "open('/vol/added','w').write('x')\n"
                   "out('secret_len', len(open('/run/secrets/openai').read()))\n" +
                       std::string(kNetworkScript));
  ASSERT_EQ(r.value("exit_code", -1), 0) << r.dump();
  EXPECT_NE(value_of(r.value("stdout", ""), "secret_len"), "0") << r.dump();

  // The report while it lives (the secret read arrives through the journal).
  json report;
  for (int i = 0; i < 50; ++i) {
    HttpReply got = d.request("GET", "/v1/sandboxes/" + id + "/dry-run");
    ASSERT_EQ(got.status, 200) << got.body;
    report = got.json();
    if (!report["secrets"]["reads"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(report.dump().find(secrets.values.at("openai")), std::string::npos)
      << "a secret value is in the report";
  EXPECT_EQ(report.value("sandbox", ""), id);
  const json& writes = report["writes"];
  for (const char* path : {"/data/victim", "/vol/precious"}) {
    const json* c = change(writes, path);
    ASSERT_NE(c, nullptr) << path << " " << writes.dump();
    EXPECT_EQ((*c)["change"], "deleted") << c->dump();
  }
  ASSERT_NE(change(writes, "/workspace/out.txt"), nullptr) << writes.dump();
  ASSERT_NE(change(writes, "/vol/added"), nullptr) << writes.dump();
  expect_network_reported(report["network"]);
  bool read_openai = false;
  for (const auto& s : report["secrets"]["reads"]) read_openai |= s.value("secret", "") == "openai";
  EXPECT_TRUE(read_openai) << report["secrets"].dump();
  const std::string summary = report.value("summary", "");
  EXPECT_NE(summary.find("would read secret openai"), std::string::npos) << summary;
  EXPECT_NE(summary.find("would delete /vol/precious"), std::string::npos) << summary;
  EXPECT_NE(summary.find("would connect to allowed.test:443 once"), std::string::npos) << summary;

  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  EXPECT_EQ(tree_hash(data), host_before) << "the host dir changed in a dry run";
  EXPECT_EQ(volume_hash(d, "dryvol"), volume_before) << "the volume changed in a dry run";
  expect_upstreams_untouched(world);
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id + "/dry-run").status, 409)
      << "the report goes with the sandbox (destroyed: 409, as every route of a live one)";
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/sb-000000000000/dry-run").status, 404);

  // A sandbox that is not a dry run has no report.
  const std::string normal = d.create_sandbox("{}");
  ASSERT_FALSE(normal.empty());
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + normal + "/dry-run").status, 409);
  d.request("DELETE", "/v1/sandboxes/" + normal);

  // A task: "dry_run": true, its result carries the report.
  const json task = {
      {"id", "dry-task"},
      {"dry_run", true},
      {"sandbox",
       {{"mounts", {{{"source", data}, {"target", "/data"}, {"writable", true}}}},
        {"network", {{"allow", {"allowed.test"}}}}}},
      {"volumes", {{{"volume", "dryvol"}, {"target", "/vol"}, {"writable", true}}}},
      {"sh", std::string("rm /data/victim /vol/precious && echo made > /workspace/made && ") +
             "python3 -c \"import socket; s=socket.create_connection(('allowed.test',80),5); "
             "s.sendall(b'GET /task HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n'); s.recv(99)\""},
      {"outputs", {{{"path", "/workspace/made"}}}}};
  HttpReply submitted = d.request("POST", "/v1/tasks", task.dump());
  ASSERT_TRUE(submitted.status == 201 || submitted.status == 202) << submitted.body;
  json done;
  for (int i = 0; i < 600; ++i) {
    done = d.request("GET", "/v1/tasks/dry-task").json();
    if (done.value("status", "") != "queued" && done.value("status", "") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(done.value("status", ""), "succeeded") << done.dump();
  ASSERT_TRUE(done["dry_run"].is_object()) << done.dump();
  const json& tw = done["dry_run"]["writes"];
  for (const char* path : {"/data/victim", "/vol/precious", "/workspace/made"})
    EXPECT_NE(change(tw, path), nullptr) << path << " " << tw.dump();
  const json* task_http = connection(done["dry_run"]["network"], "allowed.test", 80);
  ASSERT_NE(task_http, nullptr) << done["dry_run"].dump();
  EXPECT_EQ(tree_hash(data), host_before) << "a dry-run task changed the host dir";
  EXPECT_EQ(volume_hash(d, "dryvol"), volume_before) << "a dry-run task changed the volume";
  EXPECT_EQ(world.http_requests("allowed.test"), 0);
}

// The control of the daemon's test: the same delete without dry-run does
// reach the volume, and a normal sandbox reaches the upstream.
TEST_F(DryRun, DaemonControlWithoutDryRunChangesTheVolume) {
  REQUIRE_WORLD(world);
  struct stat st {};
  if (::stat("/dev/loop-control", &st) != 0) CORRAL_SKIP_OR_FAIL("volumes need loop devices");
  SecretFile secrets({"openai"});
  TestDaemon d({}, daemon_config(world, secrets, root_));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(d.request("POST", "/v1/volumes", R"({"name":"ctlvol","quota":"16Mi"})").status, 201);
  const std::string id = d.create_sandbox(
      R"({"network": {"allow": ["allowed.test"]},
          "volumes": [{"volume": "ctlvol", "target": "/vol", "writable": true}]})");
  ASSERT_FALSE(id.empty());
  json w = exec_py(d, id,
                   "open('/vol/precious','w').write('p')\n"
                   "out('http', transparent_http('allowed.test'))\n");
  EXPECT_EQ(value_of(w.value("stdout", ""), "http"), "OK hello from allowed.test") << w.dump();
  d.request("DELETE", "/v1/sandboxes/" + id);
  EXPECT_NE(volume_hash(d, "ctlvol").find("precious"), std::string::npos);
  EXPECT_EQ(world.http_requests("allowed.test"), 1);
}

}  // namespace
}  // namespace corral::testing
