// Tasks across kill -9 of the daemon (issue 15 point 2; D6, docs/tasks.md
// "After a restart"): a task whose command runs when the daemon dies is
// re-attached and finishes; queued tasks run after the restart; and at 20
// random moments across the stages no acknowledged task is lost and no
// command runs twice (a line per run on a host directory shows it).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

std::string side_config(const std::string& root, int workers) {
  return "serve:\n  mount_roots: [\"" + root + "\"]\n  tasks:\n    workers: " +
         std::to_string(workers) + "\n";
}

TEST(DaemonTasksRestart, ARunningCommandIsReattachedAndFinishesOnce) {
  const std::string root = make_temp_dir("task-restart");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, side_config(root, 4));
  ASSERT_TRUE(d.ready()) << d.output();
  json body = counted_task("r-attach", root, "sleep 3; echo ok > /workspace/out");
  body["outputs"] = json::array({{{"path", "/workspace/out"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  ASSERT_TRUE(wait_command_running(d, "r-attach", root).is_object()) << d.output();
  ASSERT_TRUE(d.kill9()) << d.output();
  ASSERT_TRUE(d.restart()) << d.output();
  json t = wait_task(d, "r-attach");
  EXPECT_EQ(t.value("status", ""), "succeeded") << t.dump() << "\n" << d.output();
  EXPECT_EQ(t["outputs"][0].value("size", 0), 3);
  EXPECT_EQ(runs_of(root, "r-attach"), 1);
  // The repeat after the restart is the same task.
  EXPECT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 200);
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

TEST(DaemonTasksRestart, QueuedTasksRunAfterAKill) {
  const std::string root = make_temp_dir("task-queued");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, side_config(root, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  for (int i = 0; i < 4; ++i) {
    auto r = d.request("POST", "/v1/tasks",
                       counted_task("q-" + std::to_string(i), root, "sleep 1").dump());
    ASSERT_EQ(r.status, 202) << r.body;
  }
  // One worker: q-1.. wait in the store.
  EXPECT_EQ(d.request("GET", "/v1/tasks/q-3").json().value("status", ""), "queued");
  ASSERT_TRUE(d.kill9()) << d.output();
  ASSERT_TRUE(d.restart()) << d.output();
  for (int i = 0; i < 4; ++i) {
    const std::string id = "q-" + std::to_string(i);
    json t = wait_task(d, id);
    const std::string status = t.value("status", "");
    EXPECT_TRUE(status == "succeeded" || text(t, "reason") == "daemon_restart") << t.dump();
    EXPECT_LE(runs_of(root, id), 1) << id;
    if (status == "succeeded") {
      EXPECT_EQ(runs_of(root, id), 1) << id;
    }
  }
  EXPECT_EQ(wait_task(d, "q-3").value("status", ""), "succeeded");
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

// A task that starts at once pushes the inline bytes its submit held; one
// that waited through a kill -9 reads them back from the state store and
// checks them against the sha256 they were submitted with: damaged bytes
// never run (task_stage_inputs.cc).
TEST(DaemonTasksRestart, QueuedInlineInputsComeFromTheStoreAfterAKillAndAreChecked) {
  const std::string root = make_temp_dir("task-stored-inputs");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, side_config(root, 1));
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(d.request("POST", "/v1/tasks", counted_task("si-hold", root, "sleep 2").dump()).status,
            202);
  const std::string good(70000, 'g');
  for (const char* id : {"si-ok", "si-bad"}) {
    json body = task_body(id, "cat /workspace/in > /workspace/out");
    body["inputs"] = json::array({{{"path", "/workspace/in"}, {"content", good}}});
    body["outputs"] = json::array({{{"path", "/workspace/out"}}});
    ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  }
  ASSERT_EQ(d.request("GET", "/v1/tasks/si-bad").json().value("status", ""), "queued");
  ASSERT_TRUE(d.kill9()) << d.output();
  {
    // The stored copy (a file beside the state database since schema 9)
    // changed behind the daemon's back: same size, other bytes.
    const std::string stored = d.data_dir() + "/state.db-inputs/si-bad.0";
    std::ifstream in(stored, std::ios::binary);
    ASSERT_TRUE(in.good()) << stored;
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(bytes, good);
    std::replace(bytes.begin(), bytes.end(), 'g', 'h');
    std::ofstream(stored, std::ios::binary | std::ios::trunc) << bytes;
  }
  ASSERT_TRUE(d.restart()) << d.output();
  json ok = wait_task(d, "si-ok");
  EXPECT_EQ(ok.value("status", ""), "succeeded") << ok.dump();
  EXPECT_TRUE(d.request("GET", "/v1/tasks/si-ok/outputs/0").body == good);
  json bad = wait_task(d, "si-bad");
  EXPECT_EQ(bad.value("status", ""), "failed") << bad.dump();
  EXPECT_EQ(text(bad, "reason"), "internal") << bad.dump();
  EXPECT_NE(text(bad, "detail").find("do not match the sha256"), std::string::npos) << bad.dump();
  EXPECT_TRUE(bad["exit_code"].is_null()) << "the command never ran: " << bad.dump();
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

// What a test needs to see of a task that did not finish: the task, its
// sandbox's processes as the daemon lists them, the sandbox's processes on
// the host, and the end of the daemon's output.
std::string dump_stuck(TestDaemon& d, const nlohmann::json& t) {
  std::string out = "task: " + t.dump() + "\n";
  const std::string sandbox = text(t, "sandbox_id");
  if (!sandbox.empty()) {
    out += "its sandbox: " + d.request("GET", "/v1/sandboxes/" + sandbox).body + "\n";
    out += "its processes: " + d.request("GET", "/v1/sandboxes/" + sandbox + "/processes").body +
           "\n";
  }
  out += "zygotes and their children on the host:\n" +
         host_sh("ps -e -o pid,ppid,stat,etimes,args --forest | grep -A4 '[c]orral-zygote'");
  const std::string log = d.output();
  out += "the daemon's output (its end):\n" + log.substr(log.size() > 6000 ? log.size() - 6000 : 0);
  return out;
}

// 20 kills at random moments while tasks go through their stages. About a
// minute: each cycle restarts the daemon (the issue asks for 20).
TEST(DaemonTasksRestart, Kill9AtRandomMomentsLosesNoTaskAndRunsNoneTwice) {
  const std::string root = make_temp_dir("task-kill9");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, side_config(root, 2));
  ASSERT_TRUE(d.ready()) << d.output();
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<std::string> acknowledged;
  for (int cycle = 0; cycle < 20; ++cycle) {
    for (int k = 0; k < 2; ++k) {
      const std::string id = "k-" + std::to_string(cycle) + "-" + std::to_string(k);
      json body = counted_task(id, root, "sleep 0." + std::to_string(rng() % 5) +
                                             "; echo x > /workspace/o");
      body["outputs"] = json::array({{{"path", "/workspace/o"}}});
      auto r = d.request("POST", "/v1/tasks", body.dump());
      if (r.status == 202 || r.status == 200) acknowledged.push_back(id);
    }
    usleep(static_cast<useconds_t>(rng() % 1200) * 1000);
    ASSERT_TRUE(d.kill9()) << "cycle " << cycle << "\n" << d.output();
    ASSERT_TRUE(d.restart()) << "cycle " << cycle << "\n" << d.output();
  }
  ASSERT_FALSE(acknowledged.empty());
  std::map<std::string, int> endings;
  for (const auto& id : acknowledged) {
    SCOPED_TRACE(id);
    // Each command sleeps under half a second: a task that has not ended
    // two minutes after the last restart (the others queued before it
    // included) is stuck, and says where, well before ctest's timeout.
    json t;
    for (int i = 0; i < 4; ++i) {
      t = d.request("GET", "/v1/tasks/" + id + "?wait=30s").json();
      const std::string s = t.value("status", "");
      if (s != "queued" && s != "running") break;
    }
    ASSERT_FALSE(t.value("status", "").empty()) << "an acknowledged task was lost: " << t.dump();
    const std::string status = t.value("status", "");
    ASSERT_TRUE(status != "queued" && status != "running")
        << "task " << id << " did not end in 2 minutes\n" << dump_stuck(d, t);
    const std::string reason = text(t, "reason");
    ++endings[status + "/" + reason];
    const int runs = runs_of(root, id);
    EXPECT_LE(runs, 1) << "the command ran " << runs << " times";
    if (status == "succeeded") {
      EXPECT_EQ(runs, 1);
    } else {
      EXPECT_EQ(reason, "daemon_restart") << t.dump();
    }
  }
  std::string summary;
  for (const auto& [k, n] : endings) summary += k + "=" + std::to_string(n) + " ";
  RecordProperty("endings", summary);
  // How many commands a restart found never started or never recorded as
  // started (sandbox_reconcile.cc, settle_unannounced): each would have
  // kept its task waiting for its whole timeout before that was fixed.
  const std::string log = d.output();
  std::string unannounced;
  int found = 0;
  for (auto at = log.find("whose start was never recorded are lost"); at != std::string::npos;
       at = log.find("whose start was never recorded are lost", at + 1)) {
    const auto from = log.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
    unannounced += "  " + log.substr(from, log.find('\n', at) - from) + "\n";
    ++found;
  }
  printf("endings: %s; restarts that found a command never started: %d\n%s", summary.c_str(),
         found, unannounced.c_str());
  EXPECT_GT(endings["succeeded/"], 0) << summary;
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

}  // namespace
}  // namespace corral::testing
