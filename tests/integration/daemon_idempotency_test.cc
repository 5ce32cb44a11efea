// Idempotency-Key across a daemon's death (issue 14 item 7, D6, docs/api.md
// "Idempotency"). A create the daemon never acknowledged (it died before
// the sandbox was ready, and the next start's reconcile destroyed it) does
// not keep its key: the client's retry gets a new, working sandbox (201),
// and later retries that one (200). A create that was acknowledged keeps
// its key after the sandbox ends (DELETE), as before. A different request
// with the key is refused either way. On both listeners, and with
// concurrent retries.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

const char* const kBody = R"({"limits": {"memory": "64Mi", "disk": "8Mi"}})";
const char* const kOtherBody = R"({"limits": {"memory": "96Mi", "disk": "8Mi"}})";

HttpReply create_with_key(TestDaemon& d, const std::string& key, const std::string& body,
                          bool via_tcp) {
  return d.request("POST", "/v1/sandboxes", body, via_tcp, true, {{"idempotency-key", key}});
}

// What a kill in the middle of a create leaves in the store: the row with
// its key, in `creating` or `initializing`, nothing of the sandbox on the
// host yet or no runtime record of it. Written while the daemon is down.
void leave_unanswered_create(const std::string& data_dir, const std::string& id,
                             const std::string& spec_json, const std::string& key, bool initializing) {
  auto store = StateStore::open(data_dir + "/state.db");
  ASSERT_TRUE(store) << store.error().to_string();
  auto made = store->create_sandbox(id, spec_json, key, std::nullopt);
  ASSERT_TRUE(made) << made.error().to_string();
  ASSERT_TRUE(made->created);
  if (initializing) {
    ASSERT_TRUE(store->transition(id, SandboxState::kInitializing, "killed while it was made"));
  }
}

// The spec the daemon stores for kBody (defaults filled in), from a real create.
std::string stored_spec(TestDaemon& d, const char* body) {
  auto r = create_with_key(d, "spec-probe", body, false);
  EXPECT_EQ(r.status, 201) << r.body;
  const std::string id = r.json().value("id", "");
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).status, 200);
  auto store = StateStore::open(d.data_dir() + "/state.db");
  EXPECT_TRUE(store);
  if (!store) return "";
  auto rec = store->get(id);
  EXPECT_TRUE(rec);
  return rec ? rec->spec_json : "";
}

TEST(DaemonIdempotency, AnUnansweredCreateDestroyedByReconcileIsMadeAnewOnRetry) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string spec = stored_spec(d, kBody);
  ASSERT_FALSE(spec.empty());
  d.stop();
  // One unanswered create per listener, killed in each of the states a
  // create passes before it is ready.
  const std::map<bool, std::string> dead = {{false, "sb-0000dead0001"}, {true, "sb-0000dead0002"}};
  leave_unanswered_create(d.data_dir(), dead.at(false), spec, "key-unix", false);
  leave_unanswered_create(d.data_dir(), dead.at(true), spec, "key-tcp", true);
  ASSERT_TRUE(d.restart()) << d.output();

  for (bool via_tcp : {false, true}) {
    SCOPED_TRACE(via_tcp ? "tcp" : "unix");
    const std::string key = via_tcp ? "key-tcp" : "key-unix";
    const std::string& old_id = dead.at(via_tcp);
    // Reconcile destroyed what was left of it.
    const std::string old_state =
        d.request("GET", "/v1/sandboxes/" + old_id, "", via_tcp).json().value("state", "");
    EXPECT_TRUE(old_state == "cleaned" || old_state == "failed") << old_state;

    // The retry makes a new sandbox, which works.
    auto retry = create_with_key(d, key, kBody, via_tcp);
    ASSERT_EQ(retry.status, 201) << "the retry got the dead sandbox back: " << retry.body;
    const std::string id = retry.json().value("id", "");
    EXPECT_NE(id, old_id);
    EXPECT_EQ(retry.json().value("state", ""), "ready") << retry.body;
    EXPECT_EQ(d.exec(id, "echo fresh").value("stdout", ""), "fresh\n");
    // The next retry is answered with that one; a different request with
    // the key is refused.
    auto again = create_with_key(d, key, kBody, via_tcp);
    EXPECT_EQ(again.status, 200) << again.body;
    EXPECT_EQ(again.json().value("id", ""), id);
    auto other = create_with_key(d, key, kOtherBody, via_tcp);
    EXPECT_EQ(other.status, 409) << other.body;
    EXPECT_EQ(other.json()["error"].value("code", ""), "idempotency_mismatch") << other.body;
    // The old one is still there to look at, as it was.
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + old_id, "", via_tcp).json().value("state", ""),
              old_state);
    // The audit log says which create the key came from.
    bool found = false;
    for (const auto& r : d.wait_audit("sandbox.create", 1)) {
      if (r.value("sandbox", "") != id) continue;
      found = true;
      EXPECT_EQ(r.value("idempotency_key", ""), key);
      EXPECT_EQ(r.value("retry_of", ""), old_id) << r.dump();
    }
    EXPECT_TRUE(found);
  }
}

// A different request with the key of an unanswered create is refused too:
// the key still belongs to that request, and nothing is made.
TEST(DaemonIdempotency, ADifferentRequestWithTheKeyOfAnUnansweredCreateIsRefused) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string spec = stored_spec(d, kBody);
  d.stop();
  leave_unanswered_create(d.data_dir(), "sb-0000dead0003", spec, "key-x", true);
  ASSERT_TRUE(d.restart()) << d.output();
  for (bool via_tcp : {false, true}) {
    auto other = create_with_key(d, "key-x", kOtherBody, via_tcp);
    EXPECT_EQ(other.status, 409) << other.body;
    EXPECT_EQ(other.json()["error"].value("code", ""), "idempotency_mismatch") << other.body;
  }
  auto list = d.request("GET", "/v1/sandboxes").json();
  for (const auto& s : list["sandboxes"])
    EXPECT_NE(s.value("state", ""), "ready") << "a refused retry made a sandbox: " << s.dump();
}

// A create that failed (answered with an error, its sandbox `failed`)
// leaves its key to the retry too: once the cause is fixed, the retry with
// the same key makes the sandbox, where it used to get the failed one
// back with 200.
TEST(DaemonIdempotency, AFailedCreateLeavesItsKeyToTheRetry) {
  const std::string root = make_temp_dir("idem-mounts");
  TestDaemon d({}, "serve:\n  mount_roots: [\"" + root + "\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  for (bool via_tcp : {false, true}) {
    SCOPED_TRACE(via_tcp ? "tcp" : "unix");
    const std::string source = root + (via_tcp ? "/tcp" : "/unix");
    const std::string body = R"({"limits": {"memory": "64Mi", "disk": "8Mi"}, "mounts": [{"source": ")" +
                             source + R"(", "target": "/data"}]})";
    const std::string key = via_tcp ? "failed-tcp" : "failed-unix";
    auto first = create_with_key(d, key, body, via_tcp);
    ASSERT_EQ(first.status, 400) << "the mount source does not exist yet: " << first.body;
    auto again = create_with_key(d, key, body, via_tcp);
    EXPECT_EQ(again.status, 400) << "the retry did not try again: " << again.body;
    ASSERT_EQ(mkdir(source.c_str(), 0755), 0);
    auto fixed = create_with_key(d, key, body, via_tcp);
    ASSERT_EQ(fixed.status, 201) << fixed.body;
    EXPECT_EQ(fixed.json().value("state", ""), "ready");
    auto replay = create_with_key(d, key, body, via_tcp);
    EXPECT_EQ(replay.status, 200) << replay.body;
    EXPECT_EQ(replay.json().value("id", ""), fixed.json().value("id", ""));
    EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + fixed.json().value("id", ""), "", via_tcp)
                  .status,
              200);
  }
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

// Retries that arrive together after the restart make one sandbox.
TEST(DaemonIdempotency, ConcurrentRetriesOfAnUnansweredCreateMakeOneSandbox) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string spec = stored_spec(d, kBody);
  d.stop();
  leave_unanswered_create(d.data_dir(), "sb-0000dead0004", spec, "key-c", true);
  ASSERT_TRUE(d.restart()) << d.output();
  constexpr int kClients = 8;
  std::vector<HttpReply> replies(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back(
        [&, i] { replies[i] = create_with_key(d, "key-c", kBody, /*via_tcp=*/i % 2 == 1); });
  for (auto& t : clients) t.join();
  int created = 0;
  std::string id;
  for (const auto& r : replies) {
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.status << " " << r.body;
    created += r.status == 201;
    if (id.empty()) id = r.json().value("id", "");
    EXPECT_EQ(r.json().value("id", ""), id) << "two sandboxes for one key";
  }
  EXPECT_EQ(created, 1);
  EXPECT_NE(id, "sb-0000dead0004");
}

// An answered create keeps its key after its owner destroyed the sandbox:
// a retry returns the cleaned sandbox, not a new one (docs/api.md).
TEST(DaemonIdempotency, AnAnsweredCreateKeepsItsKeyAfterDeleteAndRestart) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  for (bool via_tcp : {false, true}) {
    SCOPED_TRACE(via_tcp ? "tcp" : "unix");
    const std::string key = via_tcp ? "answered-tcp" : "answered-unix";
    auto first = create_with_key(d, key, kBody, via_tcp);
    ASSERT_EQ(first.status, 201) << first.body;
    const std::string id = first.json().value("id", "");
    ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id, "", via_tcp).status, 200);
    auto retry = create_with_key(d, key, kBody, via_tcp);
    EXPECT_EQ(retry.status, 200) << retry.body;
    EXPECT_EQ(retry.json().value("id", ""), id);
    EXPECT_EQ(retry.json().value("state", ""), "cleaned");
  }
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  for (bool via_tcp : {false, true}) {
    auto retry = create_with_key(d, via_tcp ? "answered-tcp" : "answered-unix", kBody, via_tcp);
    EXPECT_EQ(retry.status, 200) << retry.body;
    EXPECT_EQ(retry.json().value("state", ""), "cleaned") << retry.body;
  }
}

// Real kills at random moments of creates with keys: whatever a retry
// after the restart returns was either acknowledged (it reached ready) or
// is new. It is never a sandbox whose create was never answered.
TEST(DaemonIdempotency, RetriesAfterKillsDuringCreatesNeverReturnAnUnansweredSandbox) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  std::mt19937 rng(7);
  int replaced = 0;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::atomic<bool> stop{false};
    std::atomic<int> next{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 2; ++w) {
      workers.emplace_back([&, w] {
        while (!stop) {
          const std::string key = "kill-" + std::to_string(round) + "-" + std::to_string(next++);
          (void)create_with_key(d, key, kBody, w == 1);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 300));
    ASSERT_TRUE(d.kill9());
    stop = true;
    for (auto& t : workers) t.join();
    ASSERT_TRUE(d.restart()) << d.output();
    // What the store holds for each key after reconcile, and whether it
    // ever reached ready (its create may have been answered).
    struct Stored {
      std::string id;
      bool was_ready = false;
    };
    std::map<std::string, Stored> stored;
    {
      auto store = StateStore::open(d.data_dir() + "/state.db");
      ASSERT_TRUE(store) << store.error().to_string();
      for (int i = 0; i < next; ++i) {
        const std::string key = "kill-" + std::to_string(round) + "-" + std::to_string(i);
        auto found = store->find_by_idempotency_key(key);
        ASSERT_TRUE(found);
        if (!*found) continue;  // the kill came before its row: nothing to retry against
        Stored s{(*found)->id, false};
        auto transitions = store->transitions(s.id);
        ASSERT_TRUE(transitions);
        for (const auto& t : *transitions) s.was_ready |= t.to == SandboxState::kReady;
        stored[key] = s;
      }
    }
    int n = 0;
    for (const auto& [key, before] : stored) {
      auto retry = create_with_key(d, key, kBody, ++n % 2 == 1);
      ASSERT_TRUE(retry.status == 200 || retry.status == 201) << retry.status << retry.body;
      const std::string id = retry.json().value("id", "");
      const std::string state = retry.json().value("state", "");
      if (before.was_ready) {
        // Acknowledged (perhaps): the retry returns it, live or not.
        EXPECT_EQ(retry.status, 200) << retry.body;
        EXPECT_EQ(id, before.id);
      } else {
        // Never acknowledged, and reconcile destroyed it: a new one.
        EXPECT_EQ(retry.status, 201) << key << ": the retry got " << before.id
                                     << " back: " << retry.body;
        EXPECT_NE(id, before.id);
        EXPECT_EQ(state, "ready") << retry.body;
        ++replaced;
      }
      if (!id.empty() && state != "cleaned") d.request("DELETE", "/v1/sandboxes/" + id);
    }
  }
  // Not part of the property, only a note on how much this run exercised:
  // a kill lands inside a create (after its row, before ready) now and then.
  std::printf("unanswered creates replaced on retry: %d\n", replaced);
}

}  // namespace
}  // namespace corral::testing
