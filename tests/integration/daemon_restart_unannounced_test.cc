// A background process whose start no daemon recorded (issue 15 point 2;
// D6, docs/api.md "Background processes after a daemon restart"). spawn()
// stores a process as `starting` before it sends the request to the
// zygote, and its host pid once the zygote's kStarted is read. A kill -9
// between the two leaves a row that names no host process and for which no
// report may ever come: the daemon died before sending the request, or
// read kStarted (and its kExited) and died before storing them. The next
// daemon must end such a process as lost when it re-attaches, not keep it
// running until its timeout (it has no pidfd, so the reaper cannot end
// it): a task waiting for it waited its whole timeout, 10 minutes by
// default, and DaemonTasksRestart.Kill9AtRandomMoments timed out so.
//
// The kill cannot be timed into that window from outside, so the tests
// write the row the dying daemon left (with the store's own call) while
// the daemon is down.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <random>

#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/stored_state.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// A process id as the daemon makes them (p- and 16 hex digits).
std::string new_process_id() {
  std::mt19937_64 rng(std::random_device{}());
  char buf[32];
  snprintf(buf, sizeof buf, "p-%016llx", static_cast<unsigned long long>(rng() | 1));
  return buf;
}

// What the dying daemon left for process `pid`: a row without a host pid,
// `state` starting (stored, request never sent) or running (its kStarted
// was handled but the host pid could not be stored).
void store_unannounced(const std::string& data_dir, const std::string& sandbox,
                       const std::string& pid, ProcessState state) {
  auto store = StateStore::open(data_dir + "/state.db");
  ASSERT_TRUE(store) << store.error().message;
  ProcessRecord rec;
  rec.id = pid;
  rec.sandbox_id = sandbox;
  rec.argv = {"/bin/sh", "-c", "echo never"};
  rec.state = ProcessState::kStarting;
  rec.started_at_ms = StateStore::now_ms();
  rec.deadline_at_ms = rec.started_at_ms + 600'000;  // the default 10 minutes
  ASSERT_TRUE(store->add_process(rec));
  if (state != ProcessState::kStarting) {
    ASSERT_TRUE(store->update_process(pid, state, std::nullopt, std::nullopt));
  }
}

class Unannounced : public ::testing::TestWithParam<ProcessState> {};

TEST_P(Unannounced, IsLostOnReattachAndTheSandboxWorksOn) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  const std::string procs = "/v1/sandboxes/" + id + "/processes";
  ASSERT_TRUE(d.kill9());
  const std::string pid = new_process_id();
  store_unannounced(d.data_dir(), id, pid, GetParam());
  ASSERT_TRUE(d.restart()) << d.output();
  // Decided when the daemon re-attached: a wait answers at once (before
  // the fix it answered 408 here: the process stayed running).
  auto w = d.request("POST", procs + "/" + pid + "/wait?timeout=20");
  ASSERT_EQ(w.status, 200) << w.body << "\n" << d.output();
  const json info = w.json();
  EXPECT_EQ(info.value("state", ""), "exited") << info;
  EXPECT_TRUE(info["exit_code"].is_null()) << info;  // lost: no made-up exit
  EXPECT_TRUE(info["signal"].is_null()) << info;
  // The sandbox is not held `running` by it, and runs commands.
  EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "ready");
  auto run = d.request("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd": "echo on"})");
  EXPECT_EQ(run.status, 200) << run.body;
  EXPECT_EQ(run.json().value("exit_code", -1), 0) << run.body;
  d.stop();
  auto row = stored_process(d.data_dir(), id, pid);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, ProcessState::kLost);
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned");
}

INSTANTIATE_TEST_SUITE_P(DaemonRestartProcesses, Unannounced,
                         ::testing::Values(ProcessState::kStarting, ProcessState::kRunning),
                         [](const ::testing::TestParamInfo<ProcessState>& info) {
                           return info.param == ProcessState::kStarting ? std::string("Starting")
                                                                        : std::string("Running");
                         });

// The task whose command is such a process (the daemon died between
// storing the task's process id and the process's start) ends at once
// with daemon_restart, and its command is not run again.
TEST(DaemonTasksRestart, ACommandWhoseStartWasNeverRecordedEndsTheTaskAtOnce) {
  const std::string root = make_temp_dir("task-unannounced");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, "serve:\n  mount_roots: [\"" + root + "\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(d.request("POST", "/v1/tasks", counted_task("t-u", root, "sleep 300").dump()).status,
            202);
  json t = wait_command_running(d, "t-u", root);
  ASSERT_TRUE(t.is_object()) << d.output();
  const std::string sandbox = text(t, "sandbox_id");
  ASSERT_FALSE(sandbox.empty());
  ASSERT_TRUE(d.kill9());
  // The task's command is now a process the zygote never heard of.
  const std::string pid = new_process_id();
  store_unannounced(d.data_dir(), sandbox, pid, ProcessState::kStarting);
  {
    auto store = StateStore::open(d.data_dir() + "/state.db");
    ASSERT_TRUE(store) << store.error().message;
    TaskUpdate u;
    u.process_id = pid;
    ASSERT_TRUE(store->update_task("t-u", u));
  }
  ASSERT_TRUE(d.restart()) << d.output();
  // Bounded (the task's timeout is 10 minutes): it must end on re-attach.
  t = d.request("GET", "/v1/tasks/t-u?wait=30s").json();
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump() << "\n" << d.output();
  EXPECT_EQ(text(t, "reason"), "daemon_restart") << t.dump();
  EXPECT_EQ(runs_of(root, "t-u"), 1);
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

}  // namespace
}  // namespace corral::testing
