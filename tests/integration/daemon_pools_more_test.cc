// Warm pools beyond the create (REQUIREMENTS.md C4, T1, issue 16; docs/adr/
// 0015-warm-pools.md) against a real daemon: a task whose sandbox names a
// pool claims from it, once however often it is submitted; pools made
// through POST /v1/pools survive a restart and a DELETE ends them for
// good; the daemon-wide pool hit rate in a sandbox's diagnostics and in
// `corral diagnose`.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "support/daemon_harness.h"
#include "support/pool_fixture.h"
#include "support/sandbox_harness.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A task naming pool "py" runs in one of its sandboxes; submitting it again
// (while it runs and after) answers the stored task and claims nothing
// more. A task with a spec the pool cannot serve runs cold (a miss); an
// unknown pool is refused at submit.
TEST(DaemonPoolsMore, TaskNamingAPoolClaimsOnceHoweverOftenItIsSubmitted) {
  TestDaemon d({}, pool_config("py", 1, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "py", 1).value("ready", 0u), 1u);
  json body = {{"id", "pooled-1"},
               {"sandbox", {{"pool", "py"}, {"env", {{"MARK", "m1"}}}}},
               {"sh", "echo mark=$MARK"}};
  HttpReply r = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(r.status, 202) << describe(r);
  r = d.request("POST", "/v1/tasks", body.dump());
  EXPECT_EQ(r.status, 200) << describe(r);
  json t = wait_task(d, "pooled-1");
  ASSERT_EQ(t.value("status", ""), "succeeded") << t.dump();
  EXPECT_NE(d.request("GET", "/v1/tasks/pooled-1/log").body.find("mark=m1"), std::string::npos);
  const std::string sandbox = t.value("sandbox_id", "");
  EXPECT_EQ(claimed_ids(d), std::set<std::string>{sandbox});
  r = d.request("POST", "/v1/tasks", body.dump());
  EXPECT_EQ(r.status, 200) << describe(r);
  json pool = d.request("GET", "/v1/pools/py").json();
  EXPECT_EQ(pool.value("hits", 0), 1) << pool.dump();
  EXPECT_EQ(pool.value("misses", 0), 0) << pool.dump();
  EXPECT_EQ(claimed_ids(d).size(), 1u);

  // Over the pool's spec, but with more memory: not the pool's, so cold.
  ASSERT_EQ(wait_ready(d, "py", 1).value("ready", 0u), 1u);
  json bigger = {{"id", "cold-1"},
                 {"sandbox", {{"pool", "py"}, {"limits", {{"memory", "96Mi"}}}}},
                 {"sh", "true"}};
  ASSERT_EQ(d.request("POST", "/v1/tasks", bigger.dump()).status, 202);
  EXPECT_EQ(wait_task(d, "cold-1").value("status", ""), "succeeded");
  pool = d.request("GET", "/v1/pools/py").json();
  EXPECT_EQ(pool.value("hits", 0), 1) << pool.dump();
  EXPECT_EQ(pool.value("misses", 0), 1) << pool.dump();
  EXPECT_EQ(claimed_ids(d).size(), 1u);

  json unknown = {{"id", "nopool-1"}, {"sandbox", {{"pool", "nope"}}}, {"sh", "true"}};
  r = d.request("POST", "/v1/tasks", unknown.dump());
  EXPECT_EQ(r.status, 404) << describe(r);
  EXPECT_EQ(r.json()["error"].value("field", ""), "sandbox.pool") << describe(r);
  json wrong = {{"id", "nopool-2"}, {"sandbox", {{"pool", 7}}}, {"sh", "true"}};
  EXPECT_EQ(d.request("POST", "/v1/tasks", wrong.dump()).status, 400);
  EXPECT_EQ(d.request("GET", "/v1/tasks/nopool-1").status, 404);
}

// POST /v1/pools is stored: after a restart the pool is there again (made
// anew) and serves claims; DELETE ends it for good, across the next
// restart too, while another API pool stays.
TEST(DaemonPoolsMore, ApiPoolsSurviveARestartAndDeleteEndsThemForGood) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  for (const char* name : {"api", "keep"}) {
    HttpReply r = d.request("POST", "/v1/pools",
                            std::string(R"({"name": ")") + name +
                                R"(", "min": 1, "max": 2, "idle_limit": "5m",
                                "sandbox": {"limits": {"memory": "64Mi", "disk": "16Mi"}}})");
    ASSERT_EQ(r.status, 201) << describe(r);
  }
  ASSERT_EQ(wait_ready(d, "api", 1).value("ready", 0u), 1u);
  ASSERT_TRUE(d.restart()) << d.output();
  json api = wait_ready(d, "api", 1);
  ASSERT_EQ(api.value("ready", 0u), 1u) << api.dump() << d.output();
  EXPECT_EQ(api.value("source", ""), "api");
  EXPECT_EQ(api.value("max", 0), 2);
  EXPECT_EQ(api.value("idle_limit_ms", 0), 300000);
  HttpReply r;
  const std::string claimed = d.create_sandbox(R"({"pool": "api"})", &r);
  ASSERT_FALSE(claimed.empty()) << describe(r);
  EXPECT_EQ(claimed_ids(d).count(claimed), 1u);
  // Made once more through the API: 409, the stored one is there.
  EXPECT_EQ(d.request("POST", "/v1/pools", R"({"name": "api"})").status, 409);

  ASSERT_EQ(d.request("DELETE", "/v1/pools/api").status, 200);
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_EQ(d.request("GET", "/v1/pools/api").status, 404);
  EXPECT_EQ(wait_ready(d, "keep", 1).value("ready", 0u), 1u);
  json pools = d.request("GET", "/v1/pools").json();
  ASSERT_EQ(pools["pools"].size(), 1u) << pools.dump();
  EXPECT_EQ(pools["pools"][0].value("name", ""), "keep");
  // The claimed sandbox is the caller's and lived through the restart.
  EXPECT_EQ(d.exec(claimed, "echo still").value("stdout", ""), "still\n");
}

// Runs `sql` on the daemon's state database, as another process would.
std::string sql_on(const TestDaemon& d, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open((d.data_dir() + "/state.db").c_str(), &db) != SQLITE_OK) return "open failed";
  sqlite3_busy_timeout(db, 5000);
  std::string out;
  auto row = [](void* o, int n, char** v, char**) {
    if (n > 0 && v[0] != nullptr) *static_cast<std::string*>(o) = v[0];
    return 0;
  };
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), row, &out, &err) != SQLITE_OK) out = "error: " + std::string(err);
  sqlite3_free(err);
  sqlite3_close(db);
  return out;
}

// A stored pool whose name serve.pools now uses, or whose spec the daemon
// refuses, is not rebuilt: dropped from the store, its settings on the
// start-up line, and the config's pool is the one served.
TEST(DaemonPoolsMore, StoredPoolsTheDaemonCannotRebuildAreDroppedWithTheirSettingsPrinted) {
  TestDaemon d({}, pool_config("small", 1, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(sql_on(d,
                   "INSERT INTO pools (name, settings_json, created_at) VALUES "
                   "('small', '{\"name\":\"small\",\"min\":3,\"max\":3,"
                   "\"idle_limit_ms\":600000,\"sandbox\":{}}', 1), "
                   "('netpool', '{\"name\":\"netpool\",\"min\":1,\"max\":1,"
                   "\"idle_limit_ms\":600000,\"sandbox\":{\"network\":{\"mode\":\"open\"}}}', 1)"),
            "");
  ASSERT_TRUE(d.restart()) << d.output();
  json small = d.request("GET", "/v1/pools/small").json();
  EXPECT_EQ(small.value("source", ""), "config") << small.dump();
  EXPECT_EQ(small.value("min", 0), 1) << small.dump();
  EXPECT_EQ(d.request("GET", "/v1/pools/netpool").status, 404);
  EXPECT_EQ(sql_on(d, "SELECT count(*) FROM pools"), "0");
  const std::string out = d.output();
  EXPECT_NE(out.find("stored pool small dropped (serve.pools has a pool of that name)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("stored pool netpool dropped"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("mode":"open")"), std::string::npos) << "its settings are printed: " << out;
}

// T1: the daemon-wide hit rate over the creates that named or matched a
// pool, in every sandbox's diagnostics and in `corral diagnose`; null
// while there were none (a create no pool is about does not count).
TEST(DaemonPoolsMore, DiagnosticsShowTheDaemonWidePoolHitRate) {
  TestDaemon d({}, pool_config("small", 1, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(wait_ready(d, "small", 1).value("ready", 0u), 1u);
  const std::string cold = d.create_sandbox(R"({"limits": {"memory": "80Mi"}})");
  ASSERT_FALSE(cold.empty()) << d.output();
  auto daemon_part = [&](const std::string& id) {
    HttpReply r = d.request("GET", "/v1/sandboxes/" + id + "/diagnostics");
    EXPECT_EQ(r.status, 200) << describe(r);
    return r.json()["daemon"];
  };
  EXPECT_TRUE(daemon_part(cold)["pool_hit_rate"].is_null()) << daemon_part(cold).dump();

  HttpReply r;
  const std::string hit = d.create_sandbox(R"({"pool": "small"})", &r);
  ASSERT_FALSE(hit.empty()) << describe(r);
  ASSERT_EQ(claimed_ids(d).count(hit), 1u);
  EXPECT_EQ(daemon_part(cold).value("pool_hit_rate", -1.0), 1.0) << daemon_part(cold).dump();
  // A spec the pool cannot serve: a miss, made cold.
  const std::string miss = d.create_sandbox(R"({"pool": "small", "limits": {"memory": "96Mi"}})");
  ASSERT_FALSE(miss.empty()) << d.output();
  EXPECT_EQ(claimed_ids(d).count(miss), 0u);
  json part = daemon_part(hit);
  EXPECT_EQ(part.value("pool_hit_rate", -1.0), 0.5) << part.dump();
  EXPECT_EQ(part.value("pool_hits", 0), 1) << part.dump();
  EXPECT_EQ(part.value("pool_misses", 0), 1) << part.dump();
  // After a destroy too (the stored row gets today's daemon part).
  ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + miss).status, 200);
  EXPECT_EQ(daemon_part(miss).value("pool_hit_rate", -1.0), 0.5);

  RunOutcome c = run_corral({"diagnose", "--url", d.unix_url(), cold});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("pool hit rate"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("50% (1 of 2 pool creates served warm"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace corral::testing
