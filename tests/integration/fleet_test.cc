// Daemons sharing one PostgreSQL state store as the nodes of a fleet
// (issue 18, docs/fleet.md): each registers and heartbeats; any node
// reads every sandbox and task; a node killed with -9 is marked lost by
// another within lost_after, its sandboxes reported lost and its queued
// tasks run elsewhere, once, while the task whose command had started
// fails node_lost; the node restarted destroys what it no longer owns
// (checked from outside: its sandbox's init is gone) and runs nothing of
// what was handed on.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "daemon/cluster_key.h"
#include "http/http_message.h"
#include "store/sql_postgres.h"
#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/loopback_registry.h"
#include "support/pg_cluster.h"
#include "support/skip.h"
#include "support/task_client.h"
#include "support/team_b.h"
#include "support/temp_dir.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// A node's config: the shared store, fast heartbeats, and a network plan
// of its own (subnet, interfaces, nftables table and ports: a table's
// input chain drops what reaches its ports from other interfaces, so two
// daemons on one host must not share ports).
std::string node_config(const std::string& url, const std::string& id, int slot,
                        const std::string& extra = "", const std::string& labels = "{}") {
  const std::string n = std::to_string(slot);
  return "serve:\n  state: \"" + url + "\"\n  node:\n    id: " + id + "\n    labels: " + labels +
         "\n    heartbeat_interval: 200ms\n    lost_after: 1500ms\n"
         "  network:\n    subnet: 10.23" +
         n + ".0.0/16\n    interface_prefix: fl" + n + "\n    firewall_table: corral_fleet" + n +
         "\n    proxy_port: " + std::to_string(16200 + 2 * slot) +
         "\n    dns_port: " + std::to_string(16201 + 2 * slot) + "\n" + extra;
}

// Whether this build (and so the corral it tests) runs under ASan.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Polls `probe` every 50 ms for up to `limit`; whether it came true.
template <typename Probe>
bool eventually(Probe probe, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (probe()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return probe();
}

json node_of(TestDaemon& d, const std::string& id) {
  json nodes = d.request("GET", "/v1/nodes").json();
  for (const auto& n : nodes.value("nodes", json::array()))
    if (n.value("id", "") == id) return n;
  return {};
}

// A cluster key file (0600) of 32 random bytes in hex.
std::string write_cluster_key(const TempDir& dir, const std::string& hex) {
  const std::string path = dir.file("cluster.key");
  std::ofstream(path) << hex << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

// The config lines of a node with the cluster key and room for `sandboxes`.
std::string placed_node(const std::string& key, int sandboxes) {
  return "  cluster_key_file: " + key +
         "\n  capacity:\n    max_sandboxes: " + std::to_string(sandboxes) + "\n";
}

// A small sandbox: the nodes' memory and disk bounds never stand in the way.
constexpr const char* kSmall = R"({"limits":{"memory":"64Mi","disk":"16Mi"}})";

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override { CORRAL_FRESH_PG_DATABASE(url_); }
  // The daemons' nftables tables stay after them (a restarted daemon
  // re-attaches its sandboxes' network): removed with the test.
  void TearDown() override {
    for (int slot = 1; slot <= 4; ++slot)
      (void)std::system(
          ("nft delete table inet corral_fleet" + std::to_string(slot) + " 2>/dev/null").c_str());
  }
  // Nodes node-1 .. node-n in slots 1 .. n, each with `extra` config;
  // fewer when one did not start (the failure is recorded).
  std::vector<std::unique_ptr<TestDaemon>> start_nodes(int n, const std::string& extra) {
    std::vector<std::unique_ptr<TestDaemon>> nodes;
    for (int i = 1; i <= n; ++i) {
      auto d = std::make_unique<TestDaemon>(
          std::vector<std::string>{}, node_config(url_, "node-" + std::to_string(i), i, extra));
      if (!d->ready()) {
        ADD_FAILURE() << "node-" << i << " did not start: " << d->output();
        break;
      }
      nodes.push_back(std::move(d));
    }
    return nodes;
  }
  std::string url_;
};

TEST_F(Fleet, NodesRegisterAndEveryNodeReadsEverySandbox) {
  TestDaemon a({}, node_config(url_, "node-a", 1));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2));
  ASSERT_TRUE(b.ready()) << b.output();
  auto nodes = a.request("GET", "/v1/nodes");
  ASSERT_EQ(nodes.status, 200) << nodes.body;
  EXPECT_EQ(nodes.json()["self"], "node-a");
  ASSERT_EQ(nodes.json()["nodes"].size(), 2u) << nodes.body;
  const json listed = nodes.json();  // kept: a range over a temporary's member dangles
  for (const auto& n : listed["nodes"]) {
    EXPECT_EQ(n["state"], "live") << n;
    EXPECT_FALSE(n["address"].get<std::string>().empty()) << n;
  }
  const std::string id = b.create_sandbox(R"({"limits":{"memory":"64Mi"}})");
  ASSERT_FALSE(id.empty()) << b.output();
  auto seen = a.request("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(seen.status, 200) << seen.body;
  EXPECT_EQ(seen.json()["node"], "node-b");
  EXPECT_EQ(seen.json()["state"], "ready");
  // Heartbeats move on.
  const std::int64_t first = node_of(a, "node-b").value("heartbeat_at_ms", 0);
  EXPECT_TRUE(eventually([&] { return node_of(a, "node-b").value("heartbeat_at_ms", 0) > first; }));
  // A restart of B does not make it lost: it comes back as its next
  // incarnation and re-attaches its sandbox.
  ASSERT_TRUE(b.kill9());
  ASSERT_TRUE(b.restart()) << b.output();
  EXPECT_EQ(node_of(a, "node-b").value("incarnation", 0), 2);
  EXPECT_EQ(b.request("GET", "/v1/sandboxes/" + id).json()["state"], "ready");
  EXPECT_EQ(b.exec(id, "echo hi")["stdout"], "hi\n");
}

TEST_F(Fleet, AKilledNodeIsLostItsQueuedTasksRunElsewhereOnceAndItCleansUpOnReturn) {
  TempDir side("corral-fleet-side");
  ASSERT_EQ(chmod(side.path().c_str(), 0777), 0);  // the sandboxes' users append there
  TestDaemon a({}, node_config(url_, "node-a", 3, "  mount_roots: [\"" + side.path() + "\"]\n"));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 4,
                               "  mount_roots: [\"" + side.path() +
                                   "\"]\n"
                                   "  tasks:\n    workers: 1\n"));
  ASSERT_TRUE(b.ready()) << b.output();

  const std::string sandbox = b.create_sandbox(R"({"limits":{"memory":"64Mi"}})");
  ASSERT_FALSE(sandbox.empty()) << b.output();
  // B's one worker runs a long command; three more wait in B's queue.
  auto r = b.request("POST", "/v1/tasks", counted_task("long", side.path(), "sleep 60").dump());
  ASSERT_EQ(r.status, 202) << r.body;
  ASSERT_FALSE(wait_command_running(b, "long", side.path()).empty())
      << b.request("GET", "/v1/tasks/long").body << b.output();
  for (const char* id : {"q1", "q2", "q3"}) {
    r = b.request("POST", "/v1/tasks",
                  counted_task(id, side.path(), "echo " + std::string(id)).dump());
    ASSERT_EQ(r.status, 202) << r.body;
  }
  EXPECT_EQ(a.request("GET", "/v1/tasks/q1").json()["status"], "queued");
  // B's init, to check from outside that it goes once B is back.
  auto store = StateStore::open(url_);
  ASSERT_TRUE(store) << store.error().to_string();
  auto rec = store->get(sandbox);
  ASSERT_TRUE(rec && rec->runtime_json);
  const pid_t init = json::parse(*rec->runtime_json).value("init_pid", -1);
  ASSERT_GT(init, 0);

  ASSERT_TRUE(b.kill9());
  EXPECT_TRUE(eventually([&] { return node_of(a, "node-b").value("state", "") == "lost"; }))
      << node_of(a, "node-b") << a.output();
  EXPECT_TRUE(eventually([&] {
    return a.request("GET", "/v1/sandboxes/" + sandbox).json().value("state", "") == "lost";
  }));
  // The queued tasks ran on A, once each; the started one failed node_lost.
  for (const char* id : {"q1", "q2", "q3"}) {
    json t = wait_task(a, id);
    EXPECT_EQ(t.value("status", ""), "succeeded") << t;
    EXPECT_EQ(runs_of(side.path(), id), 1) << id;
  }
  json lost = wait_task(a, "long");
  EXPECT_EQ(lost.value("status", ""), "failed") << lost;
  EXPECT_EQ(text(lost, "reason"), "node_lost") << lost;
  // Its sandbox still runs on the host while B is away (nobody else may
  // touch B's cgroups); B back destroys it.
  EXPECT_EQ(kill(init, 0), 0) << "the lost node's sandbox was killed by another node";
  ASSERT_TRUE(b.restart()) << b.output();
  EXPECT_EQ(node_of(a, "node-b").value("state", ""), "live");
  EXPECT_TRUE(eventually([&] {
    return a.request("GET", "/v1/sandboxes/" + sandbox).json().value("state", "") == "cleaned";
  })) << a.request("GET", "/v1/sandboxes/" + sandbox).body;
  EXPECT_TRUE(eventually([&] { return kill(init, 0) != 0 && errno == ESRCH; }))
      << "init " << init << " of the lost sandbox still runs";
  // Nothing handed on ran again on B.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (const char* id : {"q1", "q2", "q3"}) EXPECT_EQ(runs_of(side.path(), id), 1) << id;
  EXPECT_EQ(runs_of(side.path(), "long"), 1);
}

TEST_F(Fleet, CallsOnAnotherNodesSandboxAreForwardedSignedAndStreamed) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'a'));
  const std::string with_key = "  cluster_key_file: " + key + "\n";
  TestDaemon a({}, node_config(url_, "node-a", 1, with_key));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, with_key));
  ASSERT_TRUE(b.ready()) << b.output();
  TestDaemon c({}, node_config(url_, "node-c", 3));  // no key: cannot forward
  ASSERT_TRUE(c.ready()) << c.output();
  const std::string id = b.create_sandbox(R"({"limits":{"memory":"64Mi"}})");
  ASSERT_FALSE(id.empty()) << b.output();
  const std::string base = "/v1/sandboxes/" + id;

  // Inspect: the owner's live view (usage), relayed.
  auto info = a.request("GET", base, "", true);
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(info.json()["node"], "node-b");
  EXPECT_TRUE(info.json()["usage"].is_object()) << info.body;
  EXPECT_EQ(http::find_header(info.headers, "x-corral-node"),
            std::optional<std::string_view>("node-b"));
  // Exec, waiting and streamed.
  auto ex = a.request("POST", base + "/exec", R"({"cmd":"echo via-a; hostname"})", true);
  ASSERT_EQ(ex.status, 200) << ex.body;
  EXPECT_EQ(ex.json()["stdout"], "via-a\nsandbox\n") << ex.body;
  auto st = a.request(
      "POST", base + "/exec",
      R"({"cmd":"for i in 1 2 3; do echo line$i; sleep 0.1; done","stream":"ndjson"})", true);
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_NE(st.body.find("line1"), std::string::npos) << st.body;
  EXPECT_NE(st.body.find("line3"), std::string::npos) << st.body;
  EXPECT_NE(st.body.find("\"exit_code\":0"), std::string::npos) << st.body;
  // Files: an upload through A lands in B's sandbox, and reads back through A.
  std::string payload(300 * 1024, 'x');
  payload += "end";
  auto up = a.request("PUT", base + "/files?path=/workspace/f.txt", payload, true, true,
                      {{"content-type", "application/octet-stream"}});
  ASSERT_EQ(up.status, 201) << up.body;
  EXPECT_EQ(b.exec(id, "wc -c < /workspace/f.txt")["stdout"],
            std::to_string(payload.size()) + "\n");
  auto down = a.request("GET", base + "/files?path=/workspace/f.txt", "", true);
  ASSERT_EQ(down.status, 200);
  EXPECT_EQ(down.body, payload);
  // A node without the key says where the sandbox is.
  auto refused = c.request("POST", base + "/exec", R"({"cmd":"true"})", true);
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("node-b"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("cluster_key_file"), std::string::npos) << refused.body;

  // B refuses forged or altered forwarded calls (no key of its: 401).
  auto forged = [&](const std::string& sig, const std::string& ns, const std::string& target) {
    return b.request("POST", target, R"({"cmd":"echo owned"})", true, false,
                     {{"x-corral-forwarded-by", "node-a"},
                      {"x-corral-namespace", ns},
                      {"x-corral-signature", sig}});
  };
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  auto wrong_key = daemon::ClusterKey::of_bytes(std::string(32, 'b'));
  auto right_key = daemon::ClusterKey::of_bytes(std::string(32, static_cast<char>(0xaa)));
  const std::string target = base + "/exec";
  EXPECT_EQ(
      forged(wrong_key.sign("POST", target, "default", "node-a", now), "default", target).status,
      401);
  EXPECT_EQ(forged("garbage", "default", target).status, 401);
  // Signed for another namespace, another path, or too long ago.
  EXPECT_EQ(
      forged(right_key.sign("POST", target, "team-x", "node-a", now), "default", target).status,
      401);
  EXPECT_EQ(
      forged(right_key.sign("POST", base + "/files", "default", "node-a", now), "default", target)
          .status,
      401);
  EXPECT_EQ(
      forged(right_key.sign("POST", target, "default", "node-a", now - 3600), "default", target)
          .status,
      401);
  // A rightly signed call that reaches a node that does not run the
  // sandbox (an address that leads elsewhere) is refused there, not run.
  auto astray =
      a.request("POST", target, R"({"cmd":"echo owned"})", true, false,
                {{"x-corral-forwarded-by", "node-c"},
                 {"x-corral-namespace", "default"},
                 {"x-corral-signature", right_key.sign("POST", target, "default", "node-c", now)}});
  EXPECT_EQ(astray.status, 409) << astray.body;
  EXPECT_NE(astray.body.find("runs on node node-b"), std::string::npos) << astray.body;
  // The right signature works (what node A sends).
  auto good = forged(right_key.sign("POST", target, "default", "node-a", now), "default", target);
  EXPECT_EQ(good.status, 200) << good.body;
  EXPECT_EQ(b.exec(id, "true")["exit_code"], 0);
}

// A node's gauge from its /metrics (-1 when it is not there).
double gauge(TestDaemon& d, const std::string& name) {
  auto m = d.request("GET", "/metrics", "", true);
  std::istringstream lines(m.body);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  return -1;
}

// A call relayed to the sandbox's node ends as soon as its caller goes
// away, however long the node's answer would take: a client that opens
// long calls through one node and leaves holds nothing there (nor on the
// owner, whose end of the relay closes too).
TEST_F(Fleet, ARelayedCallEndsWhenItsCallerGoesAway) {
  TempDir keys("corral-fleet-keys");
  const std::string with_key =
      "  cluster_key_file: " + write_cluster_key(keys, std::string(64, 'c')) + "\n";
  TestDaemon a({}, node_config(url_, "node-a", 1, with_key));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, with_key));
  ASSERT_TRUE(b.ready()) << b.output();
  const std::string id = b.create_sandbox(kSmall);
  ASSERT_FALSE(id.empty()) << b.output();
  // Waiting for the answer's head (an exec answers when its command ends),
  // and in the middle of a streamed answer.
  for (const std::string body :
       {R"({"cmd":"sleep 60"})", R"({"cmd":"echo started; sleep 60","stream":"ndjson"})"}) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(a.port());
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
    const std::string request = "POST /v1/sandboxes/" + id +
                                "/exec HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer " +
                                a.api_key() +
                                "\r\nContent-Type: application/json\r\n"
                                "Content-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    ASSERT_TRUE(eventually([&] { return gauge(a, "corral_forwarded_in_flight") == 1; }))
        << "the call is not being relayed: " << body;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well into the wait
    fd.reset();                                                   // the caller goes away
    EXPECT_TRUE(eventually([&] { return gauge(a, "corral_forwarded_in_flight") == 0; },
                           std::chrono::seconds(5)))
        << "the relay still waits for node-b after its caller left: " << body;
  }
  // Node A still relays.
  auto ex = a.request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":"echo still"})", true);
  EXPECT_EQ(ex.json()["stdout"], "still\n") << ex.body;
}

// Creates sent to one node are placed across the fleet by free room for
// each node's size, by labels and by node, and never past a node's room.
// docs/fleet.md "E2B": the E2B facade of any node places creates like the
// /v1 API and reaches a sandbox that another node runs. Node A has room
// for one sandbox, node B for four: an E2B create sent to A runs on B.
// envd (a raw upload and a download, a Connect call) and the control plane
// (get, set timeout, connect, kill) through A are sent on to B, signed;
// the access token is the fleet's, so A checks it too, and a wrong one is
// refused there, before anything is sent.
TEST_F(Fleet, E2bCreatesArePlacedAndCallsGoToTheSandboxsNode) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'e'));
  TestDaemon a({}, node_config(url_, "node-a", 1, placed_node(key, 1)));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, placed_node(key, 4)));
  ASSERT_TRUE(b.ready()) << b.output();
  // Node A full: its one sandbox, placed there by name.
  auto first =
      a.request("POST", "/v1/sandboxes",
                R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"node":"node-a"}})");
  ASSERT_EQ(first.status, 201) << first.body;
  const http::Headers json_type = {{"content-type", "application/json"}};
  auto created = a.request("POST", "/e2b/v2/sandboxes",
                           R"({"templateID":"base","timeout":300,"metadata":{"team":"fleet"}})",
                           false, true, json_type);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(header(created, "x-corral-node"), "node-b") << "placed where there is room";
  const std::string id = created.json().value("sandboxID", "");
  const std::string token = created.json().value("envdAccessToken", "");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(b.request("GET", "/v1/sandboxes/" + id).json().value("node", ""), "node-b");
  // Listed by every node (the caller's, running, by metadata).
  auto listed_ids = [&](TestDaemon& via) {
    std::vector<std::string> ids;
    auto l = via.request("GET", "/e2b/v2/sandboxes?metadata=team%3Dfleet");
    EXPECT_EQ(l.status, 200) << l.body;
    for (const auto& e : l.json()) ids.push_back(e.value("sandboxID", ""));
    return ids;
  };
  EXPECT_EQ(listed_ids(a), std::vector<std::string>{id});
  EXPECT_EQ(listed_ids(b), std::vector<std::string>{id});
  // A bad create is refused by the node asked, in E2B's shape.
  auto bad = a.request("POST", "/e2b/v2/sandboxes", R"({"templateID":"no-such-template"})", false,
                       true, json_type);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json().value("code", 0), 400) << bad.body;
  auto envd = [&](const std::string& type, const std::string& access) {
    return http::Headers{
        {"content-type", type}, {"e2b-sandbox-id", id}, {"x-access-token", access}};
  };

  // envd through node A: the upload lands in node B's sandbox.
  auto up = a.request("POST", "/e2b/envd/files?path=/workspace/via-a.txt", "written through a",
                      false, true, envd("application/octet-stream", token));
  ASSERT_EQ(up.status, 200) << up.body;
  EXPECT_EQ(http::find_header(up.headers, "x-corral-node"),
            std::optional<std::string_view>("node-b"));
  auto down = a.request("GET", "/e2b/envd/files?path=/workspace/via-a.txt", "", false, true,
                        envd("application/octet-stream", token));
  ASSERT_EQ(down.status, 200) << down.body;
  EXPECT_EQ(down.body, "written through a");
  auto stat =
      a.request("POST", "/e2b/envd/filesystem.Filesystem/Stat",
                R"({"path":"/workspace/via-a.txt"})", false, true, envd("application/json", token));
  ASSERT_EQ(stat.status, 200) << stat.body;
  EXPECT_EQ(stat.json()["entry"].value("size", std::string()), "17") << stat.body;
  // A wrong token is refused at node A; node B never sees the call.
  auto wrong = a.request("POST", "/e2b/envd/filesystem.Filesystem/Stat",
                         R"({"path":"/workspace/via-a.txt"})", false, true,
                         envd("application/json", std::string(64, '0')));
  EXPECT_EQ(wrong.status, 401) << wrong.body;
  EXPECT_FALSE(http::find_header(wrong.headers, "x-corral-node").has_value());

  // The control plane through node A.
  auto info = a.request("GET", "/e2b/sandboxes/" + id);
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(info.json().value("sandboxID", ""), id);
  EXPECT_EQ(http::find_header(info.headers, "x-corral-node"),
            std::optional<std::string_view>("node-b"));
  auto timeout = a.request("POST", "/e2b/sandboxes/" + id + "/timeout", R"({"timeout":600})", false,
                           true, json_type);
  EXPECT_EQ(timeout.status, 204) << timeout.body;
  auto connected = a.request("POST", "/e2b/sandboxes/" + id + "/connect", R"({"timeout":600})",
                             false, true, json_type);
  ASSERT_EQ(connected.status, 200) << connected.body;
  EXPECT_EQ(connected.json().value("envdAccessToken", ""), token);
  auto killed = a.request("DELETE", "/e2b/sandboxes/" + id);
  EXPECT_EQ(killed.status, 204) << killed.body;
  EXPECT_TRUE(eventually([&] {
    return b.request("GET", "/v1/sandboxes/" + id).json().value("state", "") == "cleaned";
  })) << "node B did not destroy it";
  auto gone = a.request("GET", "/e2b/sandboxes/" + id);
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_TRUE(listed_ids(a).empty());
}

TEST_F(Fleet, CreatesArePlacedByFreeRoomLabelsAndNodeNeverPastCapacity) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'c'));
  TestDaemon a({}, node_config(url_, "node-a", 1, placed_node(key, 2), "{zone: a}"));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, placed_node(key, 4), "{zone: b}"));
  ASSERT_TRUE(b.ready()) << b.output();
  TestDaemon c({}, node_config(url_, "node-c", 3, placed_node(key, 6), "{zone: c}"));
  ASSERT_TRUE(c.ready()) << c.output();
  std::map<std::string, int> on;
  std::vector<std::string> made;
  auto create = [&](TestDaemon& via, const std::string& body) {
    auto r = via.request("POST", "/v1/sandboxes", body);
    if (r.status == 201) {
      ++on[r.json().value("node", "")];
      made.push_back(r.json().value("id", ""));
    }
    return r;
  };
  for (int i = 0; i < 6; ++i) {
    auto r = create(a, kSmall);
    ASSERT_EQ(r.status, 201) << r.body;
    // A sandbox placed elsewhere is answered by the node that made it.
    const std::string node = r.json().value("node", "");
    if (node != "node-a") {
      EXPECT_EQ(header(r, "x-corral-node"), node);
    }
  }
  EXPECT_EQ(on, (std::map<std::string, int>{{"node-a", 1}, {"node-b", 2}, {"node-c", 3}}))
      << "each node half full";
  // Every placed sandbox runs where it says, and answers from any node.
  for (const std::string& id : made) {
    auto info = b.request("GET", "/v1/sandboxes/" + id);
    ASSERT_EQ(info.status, 200) << info.body;
    EXPECT_EQ(info.json()["state"], "ready") << info.body;
  }
  EXPECT_EQ(b.exec(made.back(), "echo placed")["stdout"], "placed\n");
  // Labels and a named node.
  auto z = create(
      a, R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"labels":{"zone":"b"}}})");
  ASSERT_EQ(z.status, 201) << z.body;
  EXPECT_EQ(z.json()["node"], "node-b");
  auto named =
      create(b, R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"node":"node-a"}})");
  ASSERT_EQ(named.status, 201) << named.body;
  EXPECT_EQ(named.json()["node"], "node-a");
  auto nowhere = a.request("POST", "/v1/sandboxes", R"({"placement":{"labels":{"zone":"mars"}}})");
  EXPECT_EQ(nowhere.status, 400) << nowhere.body;
  EXPECT_NE(nowhere.body.find("labels do not match (zone=mars wanted)"), std::string::npos)
      << nowhere.body;
  auto bad = a.request("POST", "/v1/sandboxes", R"({"placement":{"rack":"1"}})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("placement.rack"), std::string::npos) << bad.body;
  // node-a is full (2 of 2) now: a create named to it is refused for room.
  auto a_full = c.request("POST", "/v1/sandboxes", R"({"placement":{"node":"node-a"}})");
  EXPECT_EQ(a_full.status, 429) << a_full.body;
  EXPECT_NE(a_full.body.find("node-a: full (2 of 2 sandboxes)"), std::string::npos) << a_full.body;
  // The rest fills b and c exactly; then the fleet is full.
  for (int i = 0; i < 4; ++i) ASSERT_EQ(create(c, kSmall).status, 201);
  EXPECT_EQ(on, (std::map<std::string, int>{{"node-a", 2}, {"node-b", 4}, {"node-c", 6}}));
  auto full = create(b, kSmall);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_NE(full.body.find("no node of the fleet has room"), std::string::npos) << full.body;
  // A destroyed sandbox gives its room back to the fleet.
  auto gone = c.request("DELETE", "/v1/sandboxes/" + made.front());
  ASSERT_EQ(gone.status, 200) << gone.body;
  auto again = create(c, kSmall);
  EXPECT_EQ(again.status, 201) << again.body;
}

// A cordon (docs/fleet.md "Taking a node out of service"): node-b,
// cordoned through node-a, is placed no creates, named or not, and says it
// is not ready (a load balancer sends clients elsewhere), while its
// sandbox keeps running and answers through any node; the cordon outlives
// node-b's restart, is audited, and lifting it brings node-b back. Only
// the default namespace may cordon; a lone daemon refuses, as does an
// unknown node.
TEST_F(Fleet, ACordonedNodeTakesNoNewSandboxesUntilUncordoned) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'e'));
  TestDaemon a({}, node_config(url_, "node-a", 1,
                               placed_node(key, 8) +
                                   "  api_keys:\n    namespaces:\n      - name: team-b\n"
                                   "        sha256: [" +
                                   sha256_hex(kTeamBKey) + "]\n"));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, placed_node(key, 8)));
  ASSERT_TRUE(b.ready()) << b.output();
  auto kept =
      b.request("POST", "/v1/sandboxes",
                R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"node":"node-b"}})");
  ASSERT_EQ(kept.status, 201) << kept.body;
  const std::string kept_id = kept.json().value("id", "");

  // Only the operator (the default namespace) cordons.
  auto team =
      a.request("POST", "/v1/nodes/node-b/cordon", "", /*via_tcp=*/true,
                /*with_key=*/false, {{"authorization", std::string("Bearer ") + kTeamBKey}});
  EXPECT_EQ(team.status, 403) << team.body;
  EXPECT_EQ(node_of(a, "node-b").value("cordoned", true), false);
  auto cordon = a.request("POST", "/v1/nodes/node-b/cordon");
  ASSERT_EQ(cordon.status, 200) << cordon.body;
  EXPECT_EQ(cordon.json()["cordoned"], true) << cordon.body;
  EXPECT_EQ(node_of(b, "node-b").value("cordoned", false), true);
  ASSERT_FALSE(a.wait_audit("node.cordoned", 1).empty());
  EXPECT_EQ(a.audit_records("node.cordoned").back().value("node", ""), "node-b");
  // Creates through either node go to node-a, though node-b is emptier.
  for (TestDaemon* via : {&a, &b, &b}) {
    auto r = via->request("POST", "/v1/sandboxes", kSmall);
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.json()["node"], "node-a") << r.body;
  }
  auto named =
      a.request("POST", "/v1/sandboxes",
                R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"node":"node-b"}})");
  EXPECT_EQ(named.status, 429) << named.body;
  EXPECT_NE(named.body.find("node-b: cordoned"), std::string::npos) << named.body;
  // A create no node matches is still 400, not "no room" for the cordon.
  auto nowhere = a.request("POST", "/v1/sandboxes", R"({"placement":{"labels":{"zone":"mars"}}})");
  EXPECT_EQ(nowhere.status, 400) << nowhere.body;
  // node-b learns of it at its next heartbeat and says it is not ready.
  HttpReply unready;
  EXPECT_TRUE(eventually([&] {
    unready = b.request("GET", "/readyz", "", /*via_tcp=*/true, /*with_key=*/false);
    return unready.status == 503;
  })) << unready.status
      << " " << unready.body;
  EXPECT_NE(unready.body.find("cordoned"), std::string::npos) << unready.body;
  EXPECT_EQ(b.request("GET", "/healthz", "", true, false).status, 200);
  // What node-b runs keeps running and answers through node-a.
  EXPECT_EQ(a.exec(kept_id, "echo kept")["stdout"], "kept\n");
  // Still cordoned after a restart, from its first answer.
  ASSERT_EQ(b.stop(), 0) << b.output();
  ASSERT_TRUE(b.restart()) << b.output();
  EXPECT_EQ(b.request("GET", "/readyz", "", true, false).status, 503);
  EXPECT_EQ(node_of(a, "node-b").value("cordoned", false), true);

  auto lifted = b.request("POST", "/v1/nodes/node-b/uncordon");
  ASSERT_EQ(lifted.status, 200) << lifted.body;
  EXPECT_EQ(lifted.json()["cordoned"], false) << lifted.body;
  EXPECT_TRUE(
      eventually([&] { return b.request("GET", "/readyz", "", true, false).status == 200; }));
  auto back =
      a.request("POST", "/v1/sandboxes",
                R"({"limits":{"memory":"64Mi","disk":"16Mi"},"placement":{"node":"node-b"}})");
  EXPECT_EQ(back.status, 201) << back.body;
  EXPECT_EQ(back.json()["node"], "node-b") << back.body;

  auto unknown = a.request("POST", "/v1/nodes/node-z/cordon");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  auto bad = a.request("POST", "/v1/nodes/Node_B/cordon");
  EXPECT_EQ(bad.status, 400) << bad.body;
  // A lone daemon (its own SQLite file) has nobody to hand work to.
  TestDaemon lone;
  ASSERT_TRUE(lone.ready()) << lone.output();
  auto alone = lone.request("POST", "/v1/nodes/local/cordon");
  EXPECT_EQ(alone.status, 409) << alone.body;
  EXPECT_NE(alone.body.find("not in a fleet"), std::string::npos) << alone.body;
}

// 100 creates at once, spread over three nodes of 10 sandboxes each:
// exactly 30 are made, 10 on each node; the rest are refused 429.
TEST_F(Fleet, HundredConcurrentCreatesAgainstThreeNodesNeverOverbook) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'd'));
  auto nodes = start_nodes(3, placed_node(key, 10));
  ASSERT_EQ(nodes.size(), 3u);
  std::mutex mu;
  std::map<int, int> statuses;
  std::map<std::string, int> on;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 100; ++i) {
    threads.emplace_back([&, i] {
      TestDaemon& via = *nodes[static_cast<std::size_t>(i % 3)];
      ++ready;
      while (ready < 100) std::this_thread::yield();
      auto r = via.request("POST", "/v1/sandboxes", kSmall);
      std::lock_guard lock(mu);
      ++statuses[r.status];
      if (r.status == 201) {
        ++on[r.json().value("node", "")];
      } else if (r.status != 429) {
        ADD_FAILURE() << r.status << " " << r.body;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(statuses, (std::map<int, int>{{201, 30}, {429, 70}}));
  EXPECT_EQ(on, (std::map<std::string, int>{{"node-1", 10}, {"node-2", 10}, {"node-3", 10}}));
  // The store agrees: 10 live sandboxes on each node.
  std::map<std::string, int> stored;
  const json listed = nodes[0]->request("GET", "/v1/sandboxes?all=true").json();
  std::string ended;
  for (const auto& sb : listed["sandboxes"]) {
    if (sb.value("state", "") == "ready") {
      ++stored[sb.value("node", "")];
    } else {
      ended += sb.value("id", "") + " on " + sb.value("node", "") + " is " + sb.value("state", "") +
               " (" + sb["error"].dump() + ")\n";
    }
  }
  EXPECT_EQ(stored, on) << ended;
  // No node was marked lost on the way: a burst that keeps the store busy
  // must not hold up a heartbeat (each has a connection of its own).
  for (const char* id : {"node-1", "node-2", "node-3"})
    EXPECT_EQ(node_of(*nodes[0], id).value("incarnation", 0), 1) << id << " registered again";
}

// A second daemon given a live node's id (its own data dir, a copied
// config) does not start, and touches nothing of the first one's: it is
// refused before it reconciles, which would take node-a's sandboxes for
// its own. node-a's sandbox still runs, checked from outside.
TEST_F(Fleet, ASecondDaemonWithALiveNodesIdDoesNotStartAndTouchesNothing) {
  TestDaemon a({}, node_config(url_, "node-a", 1));
  ASSERT_TRUE(a.ready()) << a.output();
  const std::string id = a.create_sandbox(kSmall);
  ASSERT_FALSE(id.empty());
  TestDaemon twin({}, node_config(url_, "node-a", 2));
  EXPECT_FALSE(twin.ready()) << twin.output();
  EXPECT_TRUE(twin.wait_output("another daemon is node node-a")) << twin.output();
  EXPECT_TRUE(twin.wait_output("serve.node.id")) << twin.output();
  auto info = a.request("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(info.json()["state"], "ready") << info.body;
  EXPECT_EQ(a.exec(id, "echo still")["stdout"], "still\n");
  EXPECT_EQ(node_of(a, "node-a").value("incarnation", 0), 1);
}

// /readyz (the Kubernetes readiness probe) follows the heartbeat: while
// the node's row in the store is locked by someone else, the heartbeat
// cannot be written, and past lost_after the node says it is not ready
// (503, with why) while /healthz still answers 200; once the lock goes,
// it is ready again.
TEST_F(Fleet, ANodeIsUnreadyWhileItsHeartbeatCannotBeWritten) {
  TestDaemon a({}, node_config(url_, "node-a", 1));
  ASSERT_TRUE(a.ready()) << a.output();
  auto ready = a.request("GET", "/readyz", "", /*via_tcp=*/true, /*with_key=*/false);
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(ready.json()["status"], "ready") << ready.body;
  auto conn = sql::PgConnection::open(url_);
  ASSERT_TRUE(conn) << conn.error().to_string();
  ASSERT_TRUE((*conn)->exec("BEGIN; SELECT id FROM nodes WHERE id = 'node-a' FOR UPDATE",
                            "locking node-a's row"));
  HttpReply unready;
  EXPECT_TRUE(eventually([&] {
    unready = a.request("GET", "/readyz", "", true, false);
    return unready.status == 503;
  })) << unready.status
      << " " << unready.body;
  EXPECT_EQ(unready.json()["ready"], false) << unready.body;
  EXPECT_NE(unready.body.find("no heartbeat written for"), std::string::npos) << unready.body;
  auto alive = a.request("GET", "/healthz", "", true, false);
  EXPECT_EQ(alive.status, 200) << alive.body;
  EXPECT_EQ(alive.json()["ready"], false) << alive.body;
  ASSERT_TRUE((*conn)->exec("ROLLBACK", "unlocking node-a's row"));
  EXPECT_TRUE(
      eventually([&] { return a.request("GET", "/readyz", "", true, false).status == 200; }));
  EXPECT_EQ(node_of(a, "node-a").value("incarnation", 0), 1) << "a lone node is never marked lost";
}

// Nodes whose clocks disagree (issue 18 point 2): node-b runs under
// libfaketime 40 s ahead of the host, as on a host whose NTP is broken.
// Heartbeats and sweeps are timed on the database's clock, so node-b
// marks node-a lost neither at once (node-a's heartbeats would look 40 s
// old by node-b's clock) nor does node-a take 40 s longer than lost_after
// to find node-b gone (node-b's would look 40 s young by node-a's).
TEST_F(Fleet, NodesWhoseClocksDisagreeStillAgreeWhoIsLost) {
  if (kAddressSanitizer)
    GTEST_SKIP() << "libfaketime cannot be preloaded into the ASan build (its clock_gettime "
                    "recurses into ASan's start-up and the daemon hangs); the plain build runs "
                    "this test";
  const std::string faketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  if (access(faketime.c_str(), R_OK) != 0)
    CORRAL_SKIP_OR_FAIL("no " + faketime + " (Debian's libfaketime, scripts/install-deps)");
  TestDaemon a({}, node_config(url_, "node-a", 1));
  ASSERT_TRUE(a.ready()) << a.output();
  const std::string id = a.create_sandbox(kSmall);
  ASSERT_FALSE(id.empty()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2),
               {"LD_PRELOAD=" + faketime, "FAKETIME=+40s",
                // Wall time only, as a host with a wrong clock has.
                "FAKETIME_DONT_FAKE_MONOTONIC=1"});
  ASSERT_TRUE(b.ready()) << b.output();
  // node-b's clock is ahead: its audit record of its start says so.
  auto registered = b.audit_records("node.registered");
  ASSERT_FALSE(registered.empty()) << b.output();
  const auto real = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  struct tm tm {};
  ASSERT_NE(strptime(registered.back().value("time", "").c_str(), "%Y-%m-%dT%H:%M:%S", &tm),
            nullptr)
      << registered.back();
  EXPECT_GE(timegm(&tm) - real, 30) << "node-b's clock is not ahead: " << registered.back();

  // Several times lost_after (1.5 s) with both sweeping: nobody is lost.
  std::this_thread::sleep_for(std::chrono::seconds(5));
  EXPECT_EQ(node_of(b, "node-a").value("state", ""), "live") << node_of(b, "node-a");
  EXPECT_EQ(node_of(a, "node-b").value("state", ""), "live") << node_of(a, "node-b");
  EXPECT_EQ(b.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "ready");
  EXPECT_EQ(a.exec(id, "echo still")["stdout"], "still\n");

  // node-b gone: node-a finds it lost within lost_after and a few sweeps,
  // not 40 s later.
  ASSERT_TRUE(b.kill9());
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_TRUE(eventually([&] { return node_of(a, "node-b").value("state", "") == "lost"; },
                         std::chrono::seconds(15)))
      << node_of(a, "node-b") << a.output();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(15));
}

// An image pushed to a registry once (issue 18 point 4) reaches the node a
// create is placed on: node-a places a create naming it by digest on
// node-b, node-b pulls it (verified) and runs the sandbox on it; node-a,
// which made no sandbox, pulled nothing.
TEST_F(Fleet, TheNodeACreateIsPlacedOnPullsItsImageByDigest) {
  std::string why;
  if (!registry_tools_present(why)) CORRAL_SKIP_OR_FAIL(why);
  TempDir work("corral-fleet-registry");
  std::filesystem::create_directories(work.path() + "/registry");
  LoopbackRegistry registry(work.path() + "/registry");
  ASSERT_TRUE(registry.up()) << "the registry did not start";
  const std::string digest = registry.push_busybox(work.path(), "tiny", "placed-image");
  ASSERT_EQ(digest.size(), 71u) << digest;
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'f'));
  const std::string images = "  images:\n    registries: [\"" + registry.host() +
                             "\"]\n    insecure_registries: [\"" + registry.host() + "\"]\n";
  TestDaemon a({}, node_config(url_, "node-a", 1, placed_node(key, 4) + images));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, placed_node(key, 4) + images));
  ASSERT_TRUE(b.ready()) << b.output();
  const json body = {{"image", registry.ref("tiny", digest)},
                     {"limits", {{"memory", "64Mi"}, {"disk", "16Mi"}}},
                     {"placement", {{"node", "node-b"}}}};
  auto r = a.request("POST", "/v1/sandboxes", body.dump());
  ASSERT_EQ(r.status, 201) << r.body << b.output();
  EXPECT_EQ(r.json()["node"], "node-b");
  const std::string id = r.json().value("id", "");
  EXPECT_EQ(a.exec(id, "cat /etc/marker")["stdout"], "placed-image");
  const std::string kept = "/images/sha256-" + digest.substr(7, 56);
  EXPECT_TRUE(std::filesystem::exists(b.data_dir() + kept)) << "node-b keeps what it pulled";
  EXPECT_FALSE(std::filesystem::exists(a.data_dir() + kept)) << "node-a pulled for nothing";
  EXPECT_EQ(b.wait_audit("image.pulled", 1).size(), 1u);
}

// A task another node runs is acted on through any node (issue 18 point
// 3): node-a forwards the cancel to node-b, whose worker stops the command,
// and a ?wait on node-a (forwarded too) wakes when it ends, not at its
// deadline.
TEST_F(Fleet, ATaskRunningOnAnotherNodeIsCancelledAndWaitedOnThroughAnyNode) {
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'a'));
  TestDaemon a({}, node_config(url_, "node-a", 1, "  cluster_key_file: " + key + "\n"));
  ASSERT_TRUE(a.ready()) << a.output();
  TestDaemon b({}, node_config(url_, "node-b", 2, "  cluster_key_file: " + key + "\n"));
  ASSERT_TRUE(b.ready()) << b.output();
  auto sub = b.request("POST", "/v1/tasks", task_body("long", "sleep 120").dump());
  ASSERT_EQ(sub.status, 202) << sub.body;
  json seen;
  ASSERT_TRUE(eventually([&] {
    seen = a.request("GET", "/v1/tasks/long").json();
    return seen.value("status", "") == "running";
  })) << seen;
  // Submitted to node-b, which claims it at once (node-a could too: the
  // calls go to whichever node does not hold it).
  const std::string holder = seen.value("node", "");
  ASSERT_TRUE(holder == "node-a" || holder == "node-b") << seen;
  TestDaemon& via = holder == "node-b" ? a : b;
  auto cancel = via.request("POST", "/v1/tasks/long/cancel");
  EXPECT_EQ(cancel.status, 202) << cancel.body;
  EXPECT_EQ(header(cancel, "x-corral-node"), holder) << "the holder answered";
  const auto t0 = std::chrono::steady_clock::now();
  auto waited = via.request("GET", "/v1/tasks/long?wait=50s");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(waited.json()["status"], "cancelled") << waited.body;
  EXPECT_LT(took, std::chrono::seconds(40)) << "the wait woke at its deadline, not at the end";
  // Finished: answered by the node asked, from the store.
  auto done = via.request("GET", "/v1/tasks/long");
  EXPECT_EQ(done.json()["status"], "cancelled") << done.body;
  EXPECT_EQ(header(done, "x-corral-node"), "") << "a finished task is not forwarded";
}

// 50 tasks submitted across three nodes (each also submitted again to the
// next node) run exactly once each, counted from the host.
TEST_F(Fleet, FiftyTasksSubmittedToThreeNodesRunExactlyOnceEach) {
  TempDir side("corral-fleet-side");
  ASSERT_EQ(chmod(side.path().c_str(), 0777), 0);
  TempDir keys("corral-fleet-keys");
  const std::string key = write_cluster_key(keys, std::string(64, 'e'));
  auto nodes = start_nodes(3, "  cluster_key_file: " + key + "\n  mount_roots: [\"" + side.path() +
                                  "\"]\n  tasks:\n    workers: 2\n");
  ASSERT_EQ(nodes.size(), 3u);
  constexpr int kTasks = 50;
  auto body = [&](int i) {
    return counted_task("t" + std::to_string(i), side.path(), "true").dump();
  };
  for (int i = 0; i < kTasks; ++i) {
    auto r = nodes[static_cast<std::size_t>(i % 3)]->request("POST", "/v1/tasks", body(i));
    ASSERT_EQ(r.status, 202) << r.body;
    // The same task sent again, to another node: the stored one answers.
    auto again =
        nodes[static_cast<std::size_t>((i + 1) % 3)]->request("POST", "/v1/tasks", body(i));
    EXPECT_TRUE(again.status == 200 || again.status == 202) << again.status << again.body;
  }
  std::map<std::string, int> ran_on;
  for (int i = 0; i < kTasks; ++i) {
    const std::string id = "t" + std::to_string(i);
    json t = wait_task(*nodes[static_cast<std::size_t>(i % 3)], id);
    EXPECT_EQ(t.value("status", ""), "succeeded") << t;
    EXPECT_EQ(t.value("attempt", 0), 1) << t;
    EXPECT_EQ(runs_of(side.path(), id), 1) << id;
    ++ran_on[text(t, "node")];
  }
  EXPECT_EQ(ran_on.size(), 3u) << "every node ran some";
}

}  // namespace
}  // namespace corral::testing
