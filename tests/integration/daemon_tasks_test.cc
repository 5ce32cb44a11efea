// Tasks against a real daemon (issue 15 points 1, 2, 4; REQUIREMENTS.md
// D6, C2, N7, F6; docs/tasks.md): the happy path with inline inputs and a
// downloaded output, idempotent repeats that never run the command twice,
// 409 naming the field, 20 concurrent POSTs making one sandbox, every
// failure reason with its stage, hostile output paths, cancel, long-poll
// and paged listing. Restarts are in daemon_tasks_restart_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"
#include "support/task_client.h"

namespace corral::testing {
namespace {

using nlohmann::json;

TEST(DaemonTasks, InlineInputsRunAndTheOutputDownloadsWithItsHash) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string bin("\x00\x01\xfe\xff", 4);
  json body = task_body("happy-1",
                        "cat /workspace/in.txt /workspace/a.bin > /workspace/out.bin; "
                        "echo finished; echo warn >&2");
  body["inputs"] = json::array(
      {{{"path", "/workspace/in.txt"}, {"content", "hello\n"}, {"sha256", sha256_hex("hello\n")}},
       {{"path", "/workspace/a.bin"}, {"content_b64", "AAH+/w=="}}});
  body["outputs"] = json::array({{{"path", "/workspace/out.bin"}}});
  auto posted = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(posted.status, 202) << posted.body;
  EXPECT_EQ(posted.json().value("id", ""), "happy-1");
  json t = wait_task(d, "happy-1");
  ASSERT_EQ(t.value("status", ""), "succeeded") << t.dump();
  EXPECT_EQ(t.value("stage", ""), "done");
  EXPECT_EQ(t["exit_code"], 0);
  const std::string expected = "hello\n" + bin;
  ASSERT_EQ(t["outputs"].size(), 1u);
  EXPECT_EQ(t["outputs"][0].value("sha256", ""), sha256_hex(expected));
  EXPECT_EQ(t["outputs"][0].value("size", 0), expected.size());
  EXPECT_EQ(t["outputs"][0].value("stored_at", ""), "tasks/happy-1/1/outputs/0");
  auto out = d.request("GET", "/v1/tasks/happy-1/outputs/0");
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_EQ(out.body, expected);
  EXPECT_EQ(sha256_hex(out.body), header(out, "x-corral-sha256"));
  EXPECT_EQ(d.request("GET", "/v1/tasks/happy-1/outputs/1").status, 404);
  // The command's output is kept after the end, as exec events.
  auto log = d.request("GET", "/v1/tasks/happy-1/log");
  ASSERT_EQ(log.status, 200);
  EXPECT_NE(log.body.find(R"({"type":"stdout","data":"finished\n"})"), std::string::npos)
      << log.body;
  EXPECT_NE(log.body.find(R"({"type":"stderr","data":"warn\n"})"), std::string::npos) << log.body;
  EXPECT_NE(log.body.find(R"("type":"exit")"), std::string::npos) << log.body;
  // Its sandbox is gone (destroy, cleanup verified).
  auto sb = d.request("GET", "/v1/sandboxes/" + t.value("sandbox_id", ""));
  EXPECT_EQ(sb.json().value("state", ""), "cleaned") << sb.body;
  // Every transition is audited, and the finish is counted.
  EXPECT_GE(d.wait_audit("task.transition", 2).size(), 2u);
  auto metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find(R"(corral_tasks_total{status="succeeded",reason=""} 1)"),
            std::string::npos);
}

// D6: a repeat returns the stored task, while it runs and after; the
// command ran once (a line per run in a host directory it mounts).
TEST(DaemonTasks, RepeatsReturnTheStoredTaskAndTheCommandRunsOnce) {
  const std::string root = make_temp_dir("task-side");
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);
  TestDaemon d({}, "serve:\n  mount_roots: [\"" + root + "\"]\n");
  ASSERT_TRUE(d.ready()) << d.output();
  json body = counted_task("once-1", root, "sleep 2");
  auto first = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(first.status, 202) << first.body;
  auto again = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(header(again, "corral-task-replayed"), "true");
  EXPECT_EQ(again.json().value("attempt", 0), 1);
  json t = wait_task(d, "once-1");
  EXPECT_EQ(t.value("status", ""), "succeeded") << t.dump();
  auto after = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.json().value("status", ""), "succeeded");
  EXPECT_EQ(runs_of(root, "once-1"), 1);
  // The same id with another body: 409 naming the first differing field.
  json other = body;
  other["timeout"] = "99s";
  auto conflict = d.request("POST", "/v1/tasks", other.dump());
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_EQ(conflict.json()["error"].value("field", ""), "timeout_ms") << conflict.body;
  EXPECT_NE(conflict.json()["error"].value("message", "").find("timeout_ms"), std::string::npos);
  // Inline bytes are compared by their hash, and named as the client sent them.
  json inputs = body;
  inputs["inputs"] = json::array({{{"path", "/workspace/in"}, {"content", "one"}}});
  inputs["id"] = "once-2";
  ASSERT_EQ(d.request("POST", "/v1/tasks", inputs.dump()).status, 202);
  EXPECT_EQ(d.request("POST", "/v1/tasks", inputs.dump()).status, 200);
  inputs["inputs"][0]["content"] = "two";
  auto bytes = d.request("POST", "/v1/tasks", inputs.dump());
  EXPECT_EQ(bytes.status, 409) << bytes.body;
  EXPECT_EQ(bytes.json()["error"].value("field", ""), "inputs[0].content") << bytes.body;
  EXPECT_EQ(wait_task(d, "once-2").value("status", ""), "succeeded");
  d.stop();
  host_sh("rm -rf '" + root + "'");
}

TEST(DaemonTasks, TwentyConcurrentPostsOfOneIdMakeOneSandbox) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string body = task_body("twenty-1", "sleep 1").dump();
  std::vector<HttpReply> replies(20);
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i)
    clients.emplace_back([&, i] { replies[i] = d.request("POST", "/v1/tasks", body, i % 2 == 1); });
  for (auto& c : clients) c.join();
  int accepted = 0;
  for (const auto& r : replies) {
    ASSERT_TRUE(r.status == 202 || r.status == 200) << r.status << " " << r.body;
    accepted += r.status == 202;
  }
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(wait_task(d, "twenty-1").value("status", ""), "succeeded");
  auto all = d.request("GET", "/v1/sandboxes?all=true").json();
  EXPECT_EQ(all["sandboxes"].size(), 1u) << all.dump();
}

// Every failure reason this daemon detects, each with what it says.
TEST(DaemonTasks, EachFailureEndsWithItsReason) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  struct Case {
    std::string id, status, reason;
    json body;
  };
  std::vector<Case> cases;
  cases.push_back({"f-exit", "failed", "exit_code", task_body("f-exit", "exit 3")});
  json timeout = task_body("f-timeout", "sleep 60");
  timeout["timeout"] = "1s";
  cases.push_back({"f-timeout", "timed_out", "timeout", timeout});
  json missing = task_body("f-missing", "true");
  missing["outputs"] = json::array({{{"path", "/workspace/nothing"}}});
  cases.push_back({"f-missing", "failed", "output_missing", missing});
  json optional = task_body("f-optional", "true");
  optional["outputs"] = json::array({{{"path", "/workspace/nothing"}, {"required", false}}});
  cases.push_back({"f-optional", "succeeded", "", optional});
  json large = task_body("f-large", "head -c 100 /dev/zero > /workspace/big");
  large["outputs"] = json::array({{{"path", "/workspace/big"}, {"max_size", 10}}});
  cases.push_back({"f-large", "failed", "output_too_large", large});
  json mismatch = task_body("f-mismatch", "true");
  mismatch["inputs"] = json::array(
      {{{"path", "/workspace/in"}, {"content", "x"}, {"sha256", std::string(64, '0')}}});
  cases.push_back({"f-mismatch", "failed", "input_mismatch", mismatch});
  json setup = task_body("f-setup", "true");
  setup["sandbox"] = {{"limits", {{"memory", "1Ti"}}}};  // over any host's capacity
  cases.push_back({"f-setup", "failed", "setup", setup});
  json signal = task_body("f-signal", "kill -9 $$");
  cases.push_back({"f-signal", "failed", "signal", signal});
  for (const auto& c : cases) {
    auto r = d.request("POST", "/v1/tasks", c.body.dump());
    ASSERT_EQ(r.status, 202) << c.id << ": " << r.body;
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(c.id);
    json t = wait_task(d, c.id);
    EXPECT_EQ(t.value("status", ""), c.status) << t.dump();
    if (c.reason.empty()) {
      EXPECT_TRUE(t["reason"].is_null()) << t.dump();
    } else {
      EXPECT_EQ(t.value("reason", ""), c.reason) << t.dump();
      EXPECT_FALSE(t.value("detail", "").empty()) << t.dump();
    }
    // A failed task's sandbox is destroyed like a successful one's.
    if (t["sandbox_id"].is_string()) {
      auto sb = d.request("GET", "/v1/sandboxes/" + t.value("sandbox_id", ""));
      EXPECT_EQ(sb.json().value("state", ""), "cleaned") << sb.body;
    }
  }
  EXPECT_EQ(wait_task(d, "f-exit")["exit_code"], 3);
  auto metrics = d.request("GET", "/metrics").body;
  EXPECT_NE(metrics.find(R"(corral_tasks_total{status="failed",reason="output_missing"} 1)"),
            std::string::npos);
}

// F6: an output is a regular file of the sandbox, reached through its
// confined root: a symlink (to the host's /etc/shadow, or through
// /proc/self/root), a FIFO, a device or a hard link is never collected,
// and never hangs the task.
TEST(DaemonTasks, HostileOutputsAreRefusedAndNothingOfTheHostIsStored) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"shadow-link", "ln -s /etc/shadow /workspace/out"},
      {"proc-root", "ln -s /proc/self/root/etc/shadow /workspace/out"},
      {"dir-link", "mkdir -p /workspace/d && ln -s /etc /workspace/out"},
      {"fifo", "mkfifo /workspace/out"},
      {"devzero", "ln -s /dev/zero /workspace/out"},
      {"hardlink", "echo x > /workspace/a && ln /workspace/a /workspace/out"},
      {"directory", "mkdir /workspace/out"},
  };
  for (const auto& [name, sh] : hostile) {
    json body = task_body("h-" + name, sh);
    body["outputs"] = json::array({{{"path", "/workspace/out"}}});
    ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202) << name;
  }
  // The device itself, named directly.
  json dev = task_body("h-dev", "true");
  dev["outputs"] = json::array({{{"path", "/dev/zero"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", dev.dump()).status, 202);
  std::vector<std::string> ids;
  for (const auto& h : hostile) ids.push_back("h-" + h.first);
  ids.push_back("h-dev");
  for (const auto& id : ids) {
    SCOPED_TRACE(id);
    json t = wait_task(d, id);
    EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
    EXPECT_EQ(t.value("reason", ""), "output_missing") << t.dump();
    ASSERT_EQ(t["outputs"].size(), 1u) << t.dump();
    EXPECT_FALSE(t["outputs"][0].value("present", true));
    EXPECT_EQ(d.request("GET", "/v1/tasks/" + id + "/outputs/0").status, 404);
    // The put begun for it while the command ran left nothing: no temp
    // file, no directory under the task's key.
    struct stat st;
    EXPECT_NE(stat((d.data_dir() + "/objects/tasks/" + id + "/1/outputs").c_str(), &st), 0)
        << "the output's directory was left";
  }
  std::size_t temps = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(d.data_dir() + "/objects/~tmp"))
    ++temps;
  EXPECT_EQ(temps, 0u) << "a begun put's temp files were left";
  // Hostile input and output paths are refused before anything runs.
  for (const char* path : {"/workspace/../etc/passwd", "workspace/x", "/workspace//x"}) {
    json in = task_body("h-in", "true");
    in["inputs"] = json::array({{{"path", path}, {"content", "x"}}});
    auto r = d.request("POST", "/v1/tasks", in.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.json()["error"].value("field", ""), "inputs[0].path");
  }
}

// An input is written through the sandbox's confined root (F6): into the
// sandbox's own /tmp, never onto the host's path of the same name.
TEST(DaemonTasks, AnInputIsWrittenInsideTheSandboxNeverOnTheHost) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string marker = "/tmp/corral-task-input-escape-" + std::to_string(getpid());
  json body = task_body("in-link", "cat " + marker);
  body["inputs"] = json::array({{{"path", marker}, {"content", "inside"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "in-link");
  EXPECT_EQ(t.value("status", ""), "succeeded") << t.dump();
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the input was written on the host";
}

TEST(DaemonTasks, CancelKillsTheCommand) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("c-1", "sleep 600").dump()).status, 202);
  // Once it runs (its stage is execute), cancel it.
  for (int i = 0; i < 600; ++i) {
    if (d.request("GET", "/v1/tasks/c-1").json().value("stage", "") == "execute") break;
    usleep(50 * 1000);
  }
  auto c = d.request("POST", "/v1/tasks/c-1/cancel");
  EXPECT_EQ(c.status, 202) << c.body;
  json t = wait_task(d, "c-1");
  EXPECT_EQ(t.value("status", ""), "cancelled") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "cancelled");
  auto again = d.request("POST", "/v1/tasks/c-1/cancel");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(d.request("POST", "/v1/tasks/nope/cancel").status, 404);
}

TEST(DaemonTasks, LongPollAnswersWhenTheTaskEnds) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(d.request("POST", "/v1/tasks", task_body("lp-1", "sleep 1").dump()).status, 202);
  auto r = d.request("GET", "/v1/tasks/lp-1?wait=60s");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().value("status", ""), "succeeded") << r.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/lp-1?wait=soon").status, 400);
}

// POST /v1/tasks?wait= holds the submit's answer until the task has
// finished (200 with its Location) or the wait has passed (202 as without
// it); a bad wait is refused before anything is stored.
TEST(DaemonTasks, ASubmitWithWaitAnswersWithTheFinishedTask) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  auto done = d.request("POST", "/v1/tasks?wait=60s", task_body("sw-1", "echo hi").dump());
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.json().value("status", ""), "succeeded") << done.body;
  EXPECT_EQ(done.json().value("exit_code", -1), 0) << done.body;
  bool located = false;
  for (const auto& [name, value] : done.headers)
    if (name == "location" && value == "/v1/tasks/sw-1") located = true;
  EXPECT_TRUE(located) << "no Location: /v1/tasks/sw-1 on the finished submit";

  auto slow = d.request("POST", "/v1/tasks?wait=300ms", task_body("sw-2", "sleep 3").dump());
  ASSERT_EQ(slow.status, 202) << slow.body;
  EXPECT_FALSE(slow.json().value("status", "") == "succeeded") << slow.body;
  // The repeat waits too, and is marked a repeat.
  auto repeat = d.request("POST", "/v1/tasks?wait=60s", task_body("sw-2", "sleep 3").dump());
  ASSERT_EQ(repeat.status, 200) << repeat.body;
  EXPECT_EQ(repeat.json().value("status", ""), "succeeded") << repeat.body;

  auto bad = d.request("POST", "/v1/tasks?wait=soon", task_body("sw-3", "true").dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json()["error"].value("field", ""), "wait") << bad.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/sw-3").status, 404);
}

// GET .../log?follow=1 streams the command's output as it comes and ends
// with the finished task.
TEST(DaemonTasks, TheLogFollowsTheCommandToItsEnd) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  ASSERT_EQ(
      d.request("POST", "/v1/tasks",
                task_body("log-1", "echo one; sleep 1; echo two >&2; sleep 1; echo three").dump())
          .status,
      202);
  auto log = d.request("GET", "/v1/tasks/log-1/log?follow=1");
  ASSERT_EQ(log.status, 200) << log.body;
  std::vector<json> events;
  std::istringstream lines(log.body);
  for (std::string line; std::getline(lines, line);) events.push_back(json::parse(line));
  std::string out, err;
  for (const auto& e : events) {
    if (e.value("type", "") == "stdout") out += e.value("data", "");
    if (e.value("type", "") == "stderr") err += e.value("data", "");
  }
  EXPECT_EQ(out, "one\nthree\n") << log.body;
  EXPECT_EQ(err, "two\n") << log.body;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().value("type", ""), "exit") << log.body;
  EXPECT_EQ(events.back()["task"].value("status", ""), "succeeded") << log.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/nope/log").status, 404);
}

TEST(DaemonTasks, ListingIsPagedNewestFirstAndFiltered) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(d.request("POST", "/v1/tasks",
                        task_body("page-" + std::to_string(i), i == 2 ? "exit 1" : "true").dump())
                  .status,
              202);
  for (int i = 0; i < 5; ++i) wait_task(d, "page-" + std::to_string(i));
  std::vector<std::string> seen;
  std::string cursor;
  for (int pages = 0; pages < 10; ++pages) {
    auto r = d.request("GET", "/v1/tasks?limit=2" + (cursor.empty() ? "" : "&cursor=" + cursor));
    ASSERT_EQ(r.status, 200) << r.body;
    json page = r.json();
    EXPECT_LE(page["tasks"].size(), 2u);
    for (const auto& t : page["tasks"]) {
      seen.push_back(t.value("id", ""));
      EXPECT_FALSE(t.contains("request")) << "a listing carries no request bodies";
    }
    if (page["next_cursor"].is_null()) break;
    cursor = page.value("next_cursor", "");
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 5u);
  EXPECT_EQ(seen.front(), "page-4") << "newest first";
  auto failed = d.request("GET", "/v1/tasks?status=failed").json();
  ASSERT_EQ(failed["tasks"].size(), 1u) << failed.dump();
  EXPECT_EQ(failed["tasks"][0].value("id", ""), "page-2");
  EXPECT_EQ(d.request("GET", "/v1/tasks?status=lost").status, 400);
  EXPECT_EQ(d.request("GET", "/v1/tasks?limit=0").status, 400);
  EXPECT_EQ(d.request("GET", "/v1/tasks?colour=red").status, 400);
}

// The object store failing: the task ends storage_unavailable, and the
// same request again runs attempt 2 once the store is back (D5, D6).
TEST(DaemonTasks, AnUnusableObjectStoreFailsTheTaskAndTheSameIdRetries) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  // A file where the store keeps its tasks/ directory: every put under it fails.
  const std::string blocker = d.data_dir() + "/objects/tasks";
  ASSERT_TRUE(std::ofstream(blocker).good()) << blocker;
  json body = task_body("s-1", "echo out > /workspace/o");
  body["outputs"] = json::array({{{"path", "/workspace/o"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  json t = wait_task(d, "s-1");
  EXPECT_EQ(t.value("status", ""), "failed") << t.dump();
  EXPECT_EQ(t.value("reason", ""), "storage_unavailable") << t.dump();
  // The store's failure is counted (docs/api.md, /metrics).
  auto metrics = d.request("GET", "/metrics").body;
  EXPECT_EQ(metrics.find(R"(corral_object_store_errors_total{op="put"} 0)"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(corral_object_store_errors_total{op="put"} )"), std::string::npos);
  ASSERT_EQ(unlink(blocker.c_str()), 0);
  auto retry = d.request("POST", "/v1/tasks", body.dump());
  ASSERT_EQ(retry.status, 202) << retry.body;
  EXPECT_EQ(retry.json().value("attempt", 0), 2);
  t = wait_task(d, "s-1");
  EXPECT_EQ(t.value("status", ""), "succeeded") << t.dump();
  EXPECT_EQ(t["outputs"][0].value("stored_at", ""), "tasks/s-1/2/outputs/0");
  EXPECT_EQ(d.request("GET", "/v1/tasks/s-1/outputs/0").body, "out\n");
  // A finished success is not retried.
  EXPECT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 200);
}

// serve.tasks.retention: finished tasks go, with their stored objects.
TEST(DaemonTasks, FinishedTasksArePrunedWithTheirOutputsAfterTheRetention) {
  TestDaemon d({}, "serve:\n  tasks:\n    retention: 1s\n    prune_interval: 200ms\n");
  ASSERT_TRUE(d.ready()) << d.output();
  json body = task_body("p-1", "echo out > /workspace/o");
  body["outputs"] = json::array({{{"path", "/workspace/o"}}});
  ASSERT_EQ(d.request("POST", "/v1/tasks", body.dump()).status, 202);
  EXPECT_EQ(wait_task(d, "p-1").value("status", ""), "succeeded");
  int status = 200;
  for (int i = 0; i < 300 && status == 200; ++i) {
    usleep(50 * 1000);
    status = d.request("GET", "/v1/tasks/p-1").status;
  }
  EXPECT_EQ(status, 404) << "the task was not pruned";
  struct stat st;
  EXPECT_NE(stat((d.data_dir() + "/objects/tasks/p-1").c_str(), &st), 0)
      << "its stored objects were left";
  EXPECT_FALSE(d.wait_audit("task.pruned", 1).empty());
}

TEST(DaemonTasks, BadBodiesAreRefusedNamingTheField) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  auto unknown = d.request("POST", "/v1/tasks", R"({"id": "b", "command": ["true"], "x": 1})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(unknown.json()["error"].value("field", ""), "x");
  auto toolong =
      d.request("POST", "/v1/tasks", R"({"id": "b", "command": ["true"], "timeout": "30d"})");
  EXPECT_EQ(toolong.status, 400) << toolong.body;
  EXPECT_EQ(toolong.json()["error"].value("field", ""), "timeout");
  auto sandbox =
      d.request("POST", "/v1/tasks",
                R"({"id": "b", "command": ["true"], "sandbox": {"limits": {"pids": 0}}})");
  EXPECT_EQ(sandbox.status, 400);
  EXPECT_EQ(sandbox.json()["error"].value("field", ""), "sandbox.limits.pids") << sandbox.body;
  EXPECT_EQ(d.request("GET", "/v1/tasks/b").status, 404) << "a refused task is not stored";
}

}  // namespace
}  // namespace corral::testing
