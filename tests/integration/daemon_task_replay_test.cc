// Replay against a real daemon (issue 15 point 8; REQUIREMENTS.md T2;
// docs/tasks.md "Replay"): a failed task keeps its inputs as stored copies
// with hashes, its resolved spec, env, command and image; a replay runs it
// again in a fresh sandbox from those copies (byte-identical inputs even
// after the original object changed; a tampered copy is input_mismatch),
// with network none unless asked, optionally from the failure snapshot's
// files, refused on an image rebuilt since. Refusals (running, unknown,
// unknown field, nothing kept, another namespace), idempotency of an
// explicit id, the CLI, and no secret value in anything the daemon keeps
// (state db, audit log, object store, API answers).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "api/base64.h"
#include "base/sha256.h"
#include "objstore/local_object_store.h"
#include "support/daemon_harness.h"
#include "support/net_client.h"
#include "support/net_world.h"
#include "support/sandbox_harness.h"
#include "support/skip.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

std::string random_bytes(std::size_t n) {
  std::random_device rd;
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rd() & 0xff);
  return s;
}

std::string random_token(std::size_t n) {
  static const char kAlphabet[] = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
  std::random_device rd;
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kAlphabet[rd() % (sizeof kAlphabet - 1)];
  return s;
}

std::unique_ptr<objstore::LocalObjectStore> objects_of(TestDaemon& d) {
  auto store = objstore::LocalObjectStore::open(d.data_dir() + "/objects");
  EXPECT_TRUE(store.has_value()) << (store ? "" : store.error().message);
  return store ? std::move(*store) : nullptr;
}

json post_replay(TestDaemon& d, const std::string& id, const json& body, int expect,
                 HttpReply* reply = nullptr) {
  HttpReply r = d.request("POST", "/v1/tasks/" + id + "/replay", body.dump());
  EXPECT_EQ(r.status, expect) << r.body;
  if (reply != nullptr) *reply = r;
  return r.json();
}

std::string error_field(const json& j) {
  return j.contains("error") ? j["error"].value("field", "") : "";
}

// Every regular file under `dir` (not crossing into other file systems:
// the daemon's secrets tmpfs is where values belong) whose bytes hold
// `needle`.
void files_holding(const std::string& dir, const std::string& needle,
                   std::vector<std::string>& hits, dev_t dev = 0) {
  struct stat top {};
  if (lstat(dir.c_str(), &top) != 0) return;
  if (dev == 0) dev = top.st_dev;
  if (top.st_dev != dev) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      files_holding(path, needle, hits, dev);
    } else if (S_ISREG(st.st_mode) && st.st_size < (64 << 20)) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream s;
      s << in.rdbuf();
      if (s.str().find(needle) != std::string::npos) hits.push_back(path);
    }
  }
  closedir(d);
}

// T2: a failed task with inline (text and binary) and object-store inputs
// is replayed; the replay's command sees byte-identical inputs although
// the original object was replaced since; a kept copy that was tampered
// with fails the replay with input_mismatch.
TEST(DaemonTaskReplay, AFailedTaskReplaysWithByteIdenticalInputs) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  auto objects = objects_of(d);
  ASSERT_TRUE(objects);
  const std::string text = "to be or not to be\n";
  const std::string bin = random_bytes(70000);
  const std::string obj = random_bytes(100000);
  ASSERT_TRUE(objects->put_bytes("datasets/d.bin", obj, {}).has_value());
  json body = task_body("rp-in", "cd /workspace && sha256sum a.txt b.bin c.bin > /workspace/sums; "
                                 "exit 7");
  body["inputs"] = json::array(
      {{{"path", "/workspace/a.txt"}, {"content", text}},
       {{"path", "/workspace/b.bin"}, {"content_b64", ""}},
       {{"path", "/workspace/c.bin"}, {"object", "datasets/d.bin"}, {"sha256", sha256_hex(obj)}}});
  body["inputs"][1]["content_b64"] = api::base64_encode(bin);
  body["outputs"] = json::array({{{"path", "/workspace/sums"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "rp-in");
  ASSERT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t["exit_code"], 7);
  const std::string expected = sha256_hex(text) + "  a.txt\n" + sha256_hex(bin) + "  b.bin\n" +
                               sha256_hex(obj) + "  c.bin\n";
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-in/outputs/0").body, expected);

  // What it kept: the copies with their hashes, the resolved spec, the
  // command, the image (the host base here).
  ASSERT_TRUE(t.contains("resolved")) << t.dump();
  const json& kept = t["resolved"];
  ASSERT_EQ(kept["inputs"].size(), 3u) << kept.dump();
  const std::string want[] = {sha256_hex(text), sha256_hex(bin), sha256_hex(obj)};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(kept["inputs"][i].value("sha256", ""), want[i]);
  // Inline bytes are kept by the state store from the submit on; an
  // object input is copied as the command saw it.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(kept["inputs"][i].value("kept_in", ""), "state") << kept.dump();
    EXPECT_FALSE(objects->head("tasks/rp-in/1/inputs/" + std::to_string(i)).has_value());
  }
  const std::string key = "tasks/rp-in/1/inputs/2";
  EXPECT_EQ(kept["inputs"][2].value("stored_at", ""), key);
  auto head = objects->head(key);
  ASSERT_TRUE(head.has_value()) << key;
  EXPECT_EQ(head->sha256, want[2]);
  EXPECT_EQ(kept["inputs"][2].value("object", ""), "datasets/d.bin");
  EXPECT_EQ(kept["sandbox"]["limits"].value("memory_bytes", 0u), 64u << 20) << kept.dump();
  EXPECT_EQ(kept["image"].value("base", ""), "host");
  EXPECT_EQ(kept["argv"][0], "/bin/sh");
  EXPECT_TRUE(kept.contains("create_key"));

  // The original object changes; the replay still sees the kept bytes.
  ASSERT_TRUE(objects->put_bytes("datasets/d.bin", "something else", {}).has_value());
  HttpReply r;
  json replay = post_replay(d, "rp-in", json::object(), 202, &r);
  EXPECT_EQ(replay.value("id", ""), "rp-in-replay-1");
  EXPECT_EQ(replay.value("replay_of", ""), "rp-in");
  EXPECT_EQ(header(r, "location"), "/v1/tasks/rp-in-replay-1");
  EXPECT_EQ(replay["request"]["inputs"][2].value("object", ""), "tasks/rp-in/1/inputs/2");
  json done = wait_task(d, "rp-in-replay-1");
  ASSERT_EQ(done.value("status", ""), "failed") << done.dump();
  EXPECT_EQ(done["exit_code"], 7) << done.dump();
  EXPECT_EQ(done.value("replay_of", ""), "rp-in");
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-in-replay-1/outputs/0").body, expected);
  EXPECT_NE(done.value("sandbox_id", ""), t.value("sandbox_id", "")) << "not a fresh sandbox";
  bool audited = false;
  for (const json& a : d.wait_audit("task.replay", 1))
    audited |= a.value("original", "") == "rp-in" && a.value("task", "") == "rp-in-replay-1";
  EXPECT_TRUE(audited) << "no task.replay record naming both ids";

  // Without an id each replay is a new task, the next free N.
  EXPECT_EQ(post_replay(d, "rp-in", json::object(), 202).value("id", ""), "rp-in-replay-2");
  EXPECT_EQ(wait_task(d, "rp-in-replay-2")["exit_code"], 7);

  // The CLI: `corral task replay ID --id NEW --wait` exits as `task run`
  // does (the command's status), and finds the same replay when repeated.
  RunOutcome cli = run_corral({"task", "replay", "--url", d.unix_url(), "rp-in", "--id",
                               "rp-in-cli", "--wait", "--json"});
  EXPECT_EQ(cli.exit_code, 7) << cli.out << cli.err;
  json shown = json::parse(cli.out, nullptr, false);
  EXPECT_EQ(shown.value("replay_of", ""), "rp-in") << cli.out;
  EXPECT_EQ(shown.value("status", ""), "failed") << cli.out;
  cli = run_corral({"task", "replay", "--url", d.unix_url(), "rp-in", "--id", "rp-in-cli"});
  EXPECT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.err.find("rp-in-cli replays rp-in"), std::string::npos) << cli.err;
  EXPECT_EQ(run_corral({"task", "replay", "--url", d.unix_url(), "rp-in", "--network", "open"})
                .exit_code,
            2);

  // A kept copy changed at rest: the replay refuses to run on it.
  ASSERT_TRUE(objects->put_bytes("tasks/rp-in/1/inputs/2", "tampered", {}).has_value());
  post_replay(d, "rp-in", json{{"id", "rp-in-tampered"}}, 202);
  json tampered = wait_task(d, "rp-in-tampered");
  EXPECT_EQ(tampered.value("status", ""), "failed") << tampered.dump();
  EXPECT_EQ(tampered.value("reason", ""), "input_mismatch") << tampered.dump();
}

// 404, 409 and 400 as for POST /v1/tasks; an explicit id replayed twice is
// one task; a succeeded task may be replayed; another namespace's task is
// not found, as GET answers.
TEST(DaemonTaskReplay, RefusalsIdempotencyAndNamespaces) {
  const char kKeyB[] = "crl_teamb_replay0123456789abcdef01234567";
  TestDaemon d({}, "serve:\n  api_keys:\n    namespaces:\n      - name: team-b\n        sha256: [" +
                       sha256_hex(kKeyB) + "]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  post_replay(d, "no-such-task", json::object(), 404);

  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("rp-run", "sleep 60").dump()).status, 202);
  json running = post_replay(d, "rp-run", json::object(), 409);
  EXPECT_EQ(error_field(running), "status") << running.dump();
  EXPECT_EQ(d.request("POST", "/v1/tasks/rp-run/cancel").status, 202);

  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("rp-ok", "echo fine").dump()).status, 202);
  ASSERT_EQ(wait_task(d, "rp-ok").value("status", ""), "succeeded");
  json unknown = post_replay(d, "rp-ok", json{{"colour", "red"}}, 400);
  EXPECT_EQ(error_field(unknown), "colour") << unknown.dump();
  EXPECT_EQ(error_field(post_replay(d, "rp-ok", json{{"network", "open"}}, 400)), "network");
  EXPECT_EQ(error_field(post_replay(d, "rp-ok", json{{"timeout", "30d"}}, 400)), "timeout");
  EXPECT_EQ(error_field(post_replay(d, "rp-ok", json{{"id", "a/b"}}, 400)), "id");
  // No snapshot of a success: from_snapshot names why.
  json nosnap = post_replay(d, "rp-ok", json{{"from_snapshot", true}}, 409);
  EXPECT_EQ(error_field(nosnap), "from_snapshot") << nosnap.dump();

  // The same explicit id twice: one replay task, 202 then 200.
  const json once = {{"id", "rp-ok-again"}, {"timeout", "30s"}};
  EXPECT_EQ(post_replay(d, "rp-ok", once, 202).value("replay_of", ""), "rp-ok");
  HttpReply again;
  EXPECT_EQ(post_replay(d, "rp-ok", once, 200, &again).value("id", ""), "rp-ok-again");
  EXPECT_EQ(header(again, "corral-task-replayed"), "true");
  json other = post_replay(d, "rp-ok", json{{"id", "rp-ok-again"}, {"network", "as_original"}}, 409);
  EXPECT_EQ(error_field(other), "network") << other.dump();
  // An id that another task holds.
  EXPECT_EQ(error_field(post_replay(d, "rp-ok", json{{"id", "rp-run"}}, 409)), "id");
  json replayed = wait_task(d, "rp-ok-again");
  EXPECT_EQ(replayed.value("status", ""), "succeeded") << replayed.dump();
  EXPECT_EQ(replayed["request"].value("timeout_ms", 0), 30000);
  int replays = 0;
  const json listed = d.request("GET", "/v1/tasks?limit=1000").json();
  for (const json& t : listed["tasks"]) replays += t.value("replay_of", json()).is_string();
  EXPECT_EQ(replays, 1);

  // A task whose sandbox could not be made kept no copy of its inputs:
  // 409 naming the input.
  json unmade = task_body("rp-unmade", "true");
  unmade["sandbox"]["image"] = "no-such-image-for-replay";
  unmade["inputs"] = json::array({{{"path", "/workspace/a"}, {"content", "a"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", unmade.dump()).status, 202);
  ASSERT_EQ(wait_task(d, "rp-unmade").value("reason", ""), "setup");
  EXPECT_EQ(error_field(post_replay(d, "rp-unmade", json::object(), 409)), "inputs[0]");

  // Another namespace: not found, as GET of the task; its own id space.
  http::Headers as_b = {{"authorization", std::string("Bearer ") + kKeyB}};
  HttpReply b = d.request("POST", "/v1/tasks/rp-ok/replay", "{}", true, false, as_b);
  EXPECT_EQ(b.status, 404) << b.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-ok", {}, true, false, as_b).status, 404);
  EXPECT_EQ(wait_task(d, "rp-run").value("status", ""), "cancelled");
}

// The image is part of what a task ran on: a replay on an image that was
// rebuilt since (here its image.json says another creation time) is 409
// naming the image. corral images carry no content digest; the task keeps
// their identity (docs/tasks.md "What a task keeps").
TEST(DaemonTaskReplay, AnImageRebuiltSinceIsRefused) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  // An image the store lists (its root file system empty: the task's
  // sandbox cannot start, which does not matter here).
  const std::string image = d.data_dir() + "/images/replayimg";
  ASSERT_EQ(host_sh("mkdir -p '" + image + "/rootfs' && echo ok"), "ok\n");
  auto write_meta = [&](const std::string& created) {
    std::ofstream(image + "/image.json")
        << json{{"name", "replayimg"}, {"source", "test"}, {"created", created},
                {"size_bytes", 4096}}.dump();
  };
  write_meta("2026-12-01T10:00:00Z");
  json body = task_body("rp-img", "true");
  body["sandbox"]["image"] = "replayimg";
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "rp-img");
  ASSERT_TRUE(text(t, "status") == "failed" || text(t, "status") == "succeeded") << t.dump();
  ASSERT_TRUE(t["resolved"]["image"].is_object()) << t.dump();
  EXPECT_EQ(t["resolved"]["image"].value("created", ""), "2026-12-01T10:00:00Z");
  const std::string digest = t["resolved"]["image"].value("digest", "");
  EXPECT_EQ(digest.rfind("sha256:", 0), 0u) << t.dump();

  write_meta("2026-12-02T08:00:00Z");  // rebuilt
  json refused = post_replay(d, "rp-img", json::object(), 409);
  EXPECT_EQ(error_field(refused), "image") << refused.dump();
  write_meta("2026-12-01T10:00:00Z");  // the same again
  post_replay(d, "rp-img", json{{"id", "rp-img-same"}}, 202);
  wait_task(d, "rp-img-same");
}

// From the failure snapshot: what the failed command wrote is there before
// the replay's command runs; without it, the replay starts clean.
TEST(DaemonTaskReplay, FromSnapshotStartsFromTheFailedTasksFiles) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  json body = task_body(
      "rp-snap",
      "if [ -f /workspace/state/progress.txt ]; then cat /workspace/state/progress.txt > "
      "/workspace/seen; else echo absent > /workspace/seen; fi; mkdir -p /workspace/state; "
      "echo step-41-of-42 > /workspace/state/progress.txt; exit 3");
  body["outputs"] = json::array({{{"path", "/workspace/seen"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "rp-snap");
  ASSERT_EQ(t.value("reason", ""), "exit_code") << t.dump();
  ASSERT_TRUE(t["snapshot_id"].is_string()) << t.dump();
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-snap/outputs/0").body, "absent\n");

  post_replay(d, "rp-snap", json{{"id", "rp-snap-from"}, {"from_snapshot", true}}, 202);
  json from = wait_task(d, "rp-snap-from");
  EXPECT_EQ(from.value("reason", ""), "exit_code") << from.dump();
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-snap-from/outputs/0").body, "step-41-of-42\n");
  EXPECT_GE(from["resolved"]["replay"]["restored"].value("files", 0), 1) << from.dump();
  EXPECT_EQ(from["resolved"]["replay"].value("from_snapshot", ""), t.value("snapshot_id", ""));

  post_replay(d, "rp-snap", json{{"id", "rp-snap-clean"}}, 202);
  json clean = wait_task(d, "rp-snap-clean");
  EXPECT_EQ(d.request("GET", "/v1/tasks/rp-snap-clean/outputs/0").body, "absent\n")
      << clean.dump();

  // A snapshot that is gone: 409 naming from_snapshot.
  const std::string snap = t.value("snapshot_id", "");
  ASSERT_EQ(d.request("DELETE", "/v1/snapshots/" + snap).status, 200);
  EXPECT_EQ(error_field(post_replay(d, "rp-snap", json{{"from_snapshot", true}}, 409)),
            "from_snapshot");
}

// The replay's network is none unless the request asks: a task that
// reached allowed.test through its allowlist is replayed without any
// egress, then with "as_original", then with an explicit network object.
TEST(DaemonTaskReplay, NetworkIsNoneUnlessTheReplayAsks) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("network tests run as root");
  auto world_or = NetWorld::create();
  ASSERT_TRUE(world_or.has_value()) << world_or.error().message;
  NetWorld& world = **world_or;
  TestDaemon d({}, "serve:\n  network:\n    dns_servers: [\"" + world.dns_endpoint() + "\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string script =
      std::string(kNetClientPy) + "out('allowed', transparent_http('allowed.test'))\n";
  json body = {{"id", "rp-net"},
               {"sandbox", {{"network", {{"mode", "allowlist"}, {"allow", {"allowed.test"}}}}}},
               {"command", {"/bin/sh", "-c", "/usr/bin/python3 -c \"$1\" > /workspace/net 2>&1; exit 1",
                            "sh", script}},
               {"outputs", {{{"path", "/workspace/net"}}}}};
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "rp-net");
  ASSERT_EQ(t.value("reason", ""), "exit_code") << t.dump();
  const std::string reached = "OK hello from allowed.test";
  ASSERT_EQ(value_of(d.request("GET", "/v1/tasks/rp-net/outputs/0").body, "allowed"), reached);
  EXPECT_EQ(t["resolved"]["sandbox"]["network"].value("mode", ""), "allowlist");
  EXPECT_EQ(world.http_requests("allowed.test"), 1);

  post_replay(d, "rp-net", json{{"id", "rp-net-none"}}, 202);
  json none = wait_task(d, "rp-net-none");
  EXPECT_EQ(none["request"]["sandbox"]["network"].value("mode", ""), "none") << none.dump();
  const std::string none_out = d.request("GET", "/v1/tasks/rp-net-none/outputs/0").body;
  EXPECT_EQ(value_of(none_out, "allowed").find("hello from"), std::string::npos) << none_out;
  EXPECT_EQ(world.http_requests("allowed.test"), 1) << "the default replay reached the network";

  post_replay(d, "rp-net", json{{"id", "rp-net-orig"}, {"network", "as_original"}}, 202);
  wait_task(d, "rp-net-orig");
  EXPECT_EQ(value_of(d.request("GET", "/v1/tasks/rp-net-orig/outputs/0").body, "allowed"),
            reached);
  EXPECT_EQ(world.http_requests("allowed.test"), 2);

  // An explicit network object replaces the original's: here one that
  // does not allow the name.
  post_replay(d, "rp-net",
              json{{"id", "rp-net-other"},
                   {"network", {{"mode", "allowlist"}, {"allow", {"denied.test"}}}}},
              202);
  wait_task(d, "rp-net-other");
  const std::string other_out = d.request("GET", "/v1/tasks/rp-net-other/outputs/0").body;
  EXPECT_EQ(value_of(other_out, "allowed").find("hello from"), std::string::npos) << other_out;
  EXPECT_EQ(world.http_requests("allowed.test"), 2);
}

// No secret value in what replay keeps: env, file and broker secrets are
// recorded by name; the values appear in no API answer, no audit record,
// no row or page of the state db and no object, also after a replay that
// got them again from the secret store.
TEST(DaemonTaskReplay, SecretsAreKeptByNameNeverByValue) {
  char tmpl[] = "/tmp/corral-replay-secrets-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::map<std::string, std::string> values = {{"api", "canary-" + random_token(24)},
                                               {"db", "canary-" + random_token(24)},
                                               {"search", "canary-" + random_token(24)}};
  {
    std::ofstream out(dir + "/secrets");
    for (const auto& [k, v] : values) out << k << "=" << v << "\n";
  }
  ASSERT_EQ(chmod((dir + "/secrets").c_str(), 0600), 0);
  {
    TestDaemon d({}, "serve:\n  secrets:\n    file: " + dir + "/secrets\n");
    ASSERT_TRUE(d.ready()) << d.output();
    json body = task_body("rp-sec",
                          "[ -n \"$API\" ] && [ -s /run/secrets/db ] && [ -n \"$SEARCH\" ] && "
                          "echo all-there > /workspace/seen; echo \"$API\" > /workspace/leak; "
                          "exit 4");
    body["sandbox"]["secrets"] = json::array(
        {{{"name", "api"}, {"tier", "low"}},
         {{"name", "db"}, {"mode", "file"}},
         {{"name", "search"}, {"mode", "broker"}, {"hosts", {"www.allowed.test"}}}});
    body["outputs"] = json::array({{{"path", "/workspace/seen"}}});
    auto posted = d.request("POST", "/v1/tasks", body.dump());
    ASSERT_EQ(posted.status, 202) << posted.body;
    json t = wait_task(d, "rp-sec");
    ASSERT_EQ(t.value("reason", ""), "exit_code") << t.dump();
    EXPECT_EQ(d.request("GET", "/v1/tasks/rp-sec/outputs/0").body, "all-there\n");
    EXPECT_EQ(t["resolved"]["secret_names"], json::array({"api", "db", "search"})) << t.dump();

    post_replay(d, "rp-sec", json{{"id", "rp-sec-again"}}, 202);
    json again = wait_task(d, "rp-sec-again");
    EXPECT_EQ(again.value("reason", ""), "exit_code") << again.dump();
    EXPECT_EQ(d.request("GET", "/v1/tasks/rp-sec-again/outputs/0").body, "all-there\n")
        << "the replay did not get its secrets again by name";

    std::string answers = d.request("GET", "/v1/tasks/rp-sec").body +
                          d.request("GET", "/v1/tasks/rp-sec-again").body +
                          d.request("GET", "/v1/tasks?limit=1000").body;
    d.stop();
    for (const auto& [name, value] : values) {
      std::vector<std::string> control;  // the scan finds a value where it is
      files_holding(dir, value, control);
      EXPECT_EQ(control.size(), 1u) << name;
      EXPECT_EQ(answers.find(value), std::string::npos) << name << " in an API answer";
      EXPECT_EQ(d.output().find(value), std::string::npos) << name << " in the daemon's output";
      // The state db (and its WAL), the audit log, the object store (input
      // copies, outputs, logs, snapshots): the whole data dir.
      std::vector<std::string> hits;
      files_holding(d.data_dir(), value, hits);
      EXPECT_TRUE(hits.empty()) << name << "'s value is in " << hits.front();
    }
  }
  host_sh("rm -rf '" + dir + "'");
}

}  // namespace
}  // namespace corral::testing
