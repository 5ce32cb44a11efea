// Object-store inputs across namespaces (issue 15 points 1 and 5;
// REQUIREMENTS.md D2, D5, F4; docs/tasks.md "The request"): what the daemon
// keeps in its own object store (a task's outputs, logs and input copies
// under tasks/<id>/, failure snapshots under snapshots/) is not an input
// another namespace can name. The class: another namespace's task output,
// its log, a snapshot, a task that does not exist; the owner may.
#include <gtest/gtest.h>

#include <string>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/task_client.h"
#include "support/team_b.h"

namespace corral::testing {
namespace {

using nlohmann::json;

json reading_task(const std::string& id, const std::string& key) {
  json body = task_body(id, "cat /workspace/in > /workspace/out");
  body["inputs"] = json::array({{{"path", "/workspace/in"}, {"object", key}}});
  body["outputs"] = json::array({{{"path", "/workspace/out"}}});
  return body;
}

TEST(DaemonTaskObjectInputs, TheDaemonsOwnObjectsAreNotAnotherNamespacesInputs) {
  TestDaemon d({}, team_b_config());
  ASSERT_TRUE(d.ready()) << d.output();
  json secret = task_body("ns-a-1", "echo private > /workspace/out; echo said; exit 3");
  secret["outputs"] = json::array({{{"path", "/workspace/out"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", secret.dump()).status, 202);
  json done = wait_task(d, "ns-a-1");
  ASSERT_EQ(done.value("status", ""), "failed") << done.dump();
  const std::string snapshot = done.value("snapshot_id", "");

  const http::Headers team_b = {{"authorization", std::string("Bearer ") + kTeamBKey}};
  int n = 0;
  for (const std::string& key :
       {std::string("tasks/ns-a-1/1/outputs/0"), std::string("tasks/ns-a-1/1/log/stdout"),
        std::string("tasks/ns-a-1"), std::string("tasks/nobody/1/outputs/0"),
        "snapshots/" + (snapshot.empty() ? std::string("snap-0") : snapshot) + ".tar.zst",
        std::string("snapshots/x")}) {
    SCOPED_TRACE(key);
    const std::string id = "ns-b-" + std::to_string(n++);
    auto r = d.request("POST", "/v1/tasks", reading_task(id, key).dump(), true, false, team_b);
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(r.json()["error"].value("code", ""), "forbidden") << r.body;
    EXPECT_EQ(r.json()["error"].value("field", ""), "inputs[0].object") << r.body;
    EXPECT_EQ(r.body.find("private"), std::string::npos) << r.body;
    EXPECT_EQ(d.request("GET", "/v1/tasks/" + id).status, 404) << "nothing was stored";
  }
  // The owner's namespace may read what its own task kept.
  ASSERT_EQ(
      d.request("POST", "/v1/tasks", reading_task("ns-a-2", "tasks/ns-a-1/1/outputs/0").dump())
          .status,
      202);
  json own = wait_task(d, "ns-a-2");
  ASSERT_EQ(own.value("status", ""), "succeeded") << own.dump();
  EXPECT_EQ(d.request("GET", "/v1/tasks/ns-a-2/outputs/0").body, "private\n");
  // And a key of no task's is anyone's (the client's own objects).
  auto other = d.request("POST", "/v1/tasks", reading_task("ns-b-x", "datasets/none").dump(), true,
                         false, team_b);
  EXPECT_EQ(other.status, 202) << other.body;
  json missing = d.request("GET", "/v1/tasks/ns-b-x?wait=30s", {}, true, false, team_b).json();
  EXPECT_EQ(missing.value("reason", ""), "input_missing") << missing.dump();
}

}  // namespace
}  // namespace corral::testing
