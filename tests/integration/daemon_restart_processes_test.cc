// Background processes across a daemon restart (issue 14 item 5, docs/api.md
// "Background processes after a daemon restart"): a process that had ended
// before a kill -9 or a clean stop stays listed with the same result (exit
// code, signal, timed_out, times, output sizes) and its output, wait,
// signal and stdin answer as they did before; a process that ends while no
// daemon runs is reported with its real exit; the processes of a destroyed
// sandbox answer as before the restart. Every read is made on both
// listeners (the unix socket, and TCP with the key).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/stored_state.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr bool kListeners[] = {false, true};  // via_tcp

// An integer field of a ProcessInfo, -1 when it is null or absent.
int number(const json& info, const char* key) {
  auto it = info.find(key);
  return it != info.end() && it->is_number_integer() ? it->get<int>() : -1;
}

std::string start_background(TestDaemon& d, const std::string& id, const std::string& body) {
  auto bg = d.request("POST", "/v1/sandboxes/" + id + "/processes", body);
  EXPECT_EQ(bg.status, 201) << bg.body;
  return bg.json().value("id", "");
}

// The process's final ProcessInfo (its wait), or {} with a test failure.
json wait_for(TestDaemon& d, const std::string& id, const std::string& pid) {
  auto w = d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=30");
  EXPECT_EQ(w.status, 200) << pid << ": " << w.body;
  EXPECT_EQ(w.json().value("state", ""), "exited") << w.body;
  return w.json();
}

// The ids in GET .../processes, in the order given.
std::vector<std::string> listed(TestDaemon& d, const std::string& id, bool via_tcp) {
  auto list = d.request("GET", "/v1/sandboxes/" + id + "/processes", {}, via_tcp);
  EXPECT_EQ(list.status, 200) << list.body;
  std::vector<std::string> ids;
  for (const auto& p : list.json().value("processes", json::array())) ids.push_back(p.value("id", ""));
  return ids;
}

json by_id(TestDaemon& d, const std::string& id, const std::string& pid, bool via_tcp) {
  auto list = d.request("GET", "/v1/sandboxes/" + id + "/processes", {}, via_tcp);
  for (const auto& p : list.json().value("processes", json::array()))
    if (p.value("id", "") == pid) return p;
  return json();
}

// Waits (bounded) until the host process `pid` that started at `start` is gone.
bool gone_from_host(std::int64_t pid, std::uint64_t start) {
  for (int i = 0; i < 200; ++i) {
    if (host_start_time(pid) != start) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

enum class Down { kKill9, kCleanStop };

std::string down_name(const ::testing::TestParamInfo<Down>& info) {
  return info.param == Down::kKill9 ? "Kill9" : "CleanStop";
}

bool take_down(TestDaemon& d, Down how) {
  if (how == Down::kKill9) return d.kill9();
  d.stop();  // SIGTERM (killed only if it hangs for 5 s): down either way
  return true;
}

class EndedProcesses : public ::testing::TestWithParam<Down> {};

// Every kind of end a background process can have, then a restart: each
// stays listed, in the same order, with the very same ProcessInfo.
TEST_P(EndedProcesses, StayListedWithTheirResultAndOutput) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  const std::string procs = "/v1/sandboxes/" + id + "/processes/";

  const std::string exited =
      start_background(d, id, R"({"cmd": "echo out; echo err >&2; exit 3"})");
  const std::string signalled = start_background(d, id, R"({"argv": ["sleep", "300"]})");
  const std::string timed = start_background(d, id, R"({"argv": ["sleep", "300"], "timeout": 1})");
  const std::string unstartable = start_background(d, id, R"({"argv": ["/no/such/program"]})");
  const std::string running = start_background(d, id, R"({"argv": ["sleep", "300"]})");
  for (const auto& p : {exited, signalled, timed, unstartable, running}) ASSERT_FALSE(p.empty());
  ASSERT_EQ(d.request("POST", procs + signalled + "/signal", R"({"signal": "TERM"})").status, 200);

  std::map<std::string, json> before;
  for (const auto& p : {exited, signalled, timed, unstartable}) before[p] = wait_for(d, id, p);
  // What each end looks like (the restart must keep exactly this).
  EXPECT_EQ(number(before[exited], "exit_code"), 3) << before[exited];
  EXPECT_EQ(number(before[signalled], "signal"), SIGTERM) << before[signalled];
  EXPECT_TRUE(before[timed].value("timed_out", false)) << before[timed];
  EXPECT_EQ(number(before[timed], "exit_code"), 124) << before[timed];
  EXPECT_EQ(number(before[unstartable], "exit_code"), 127) << before[unstartable];
  const std::vector<std::string> order = listed(d, id, false);
  ASSERT_EQ(order.size(), 5u);
  const std::string err_before = d.request("GET", procs + unstartable + "/output?stream=stderr").body;
  ASSERT_NE(err_before.find("corral: "), std::string::npos) << err_before;

  ASSERT_TRUE(take_down(d, GetParam()));
  ASSERT_TRUE(d.restart()) << d.output();
  ASSERT_TRUE(d.wait_output("1 re-attached")) << d.output();

  for (bool tcp : kListeners) {
    SCOPED_TRACE(tcp ? "tcp" : "unix");
    EXPECT_EQ(listed(d, id, tcp), order);
    for (const auto& [pid, info] : before) {
      auto got = d.request("GET", procs + pid, {}, tcp);
      ASSERT_EQ(got.status, 200) << pid << ": " << got.body;
      EXPECT_EQ(got.json(), info) << pid;
      EXPECT_EQ(by_id(d, id, pid, tcp), info) << pid;
      // A wait answers at once, with the stored result.
      auto w = d.request("POST", procs + pid + "/wait?timeout=0", {}, tcp);
      EXPECT_EQ(w.status, 200) << w.body;
      EXPECT_EQ(w.json(), info) << pid;
      // A signal to an ended process does nothing, as before the restart.
      auto sig = d.request("POST", procs + pid + "/signal", R"({"signal": "KILL"})", tcp);
      EXPECT_EQ(sig.status, 200) << sig.body;
      EXPECT_EQ(sig.json(), info) << pid;
      // Its stdin: a clear 409 that says it has ended.
      auto in = d.request("POST", procs + pid + "/stdin", "more\n", tcp, true,
                          {{"content-type", "application/octet-stream"}});
      EXPECT_EQ(in.status, 409) << in.body;
      EXPECT_NE(in.body.find("has ended"), std::string::npos) << in.body;
    }
    // The output is in the sandbox's writable layer: still all there.
    EXPECT_EQ(d.request("GET", procs + exited + "/output", {}, tcp).body, "out\n");
    EXPECT_EQ(d.request("GET", procs + exited + "/output?stream=stderr", {}, tcp).body, "err\n");
    EXPECT_EQ(d.request("GET", procs + exited + "/output?offset=2", {}, tcp).body, "t\n");
    EXPECT_EQ(d.request("GET", procs + unstartable + "/output?stream=stderr", {}, tcp).body,
              err_before);
    // A follow of an ended process ends at once.
    EXPECT_EQ(d.request("GET", procs + exited + "/output?follow=1", {}, tcp).body, "out\n");
    auto r = d.request("GET", procs + running, {}, tcp);
    EXPECT_EQ(r.json().value("state", ""), "running") << r.body;
  }
  // The one that still ran goes on as a re-attached process.
  ASSERT_EQ(d.request("POST", procs + running + "/signal", R"({"signal": "KILL"})").status, 200);
  EXPECT_EQ(number(wait_for(d, id, running), "signal"), SIGKILL);

  // A second restart changes nothing either (the reloaded results are
  // stored as they were, not rewritten).
  ASSERT_TRUE(take_down(d, GetParam()));
  ASSERT_TRUE(d.restart()) << d.output();
  for (const auto& [pid, info] : before) EXPECT_EQ(d.request("GET", procs + pid).json(), info);
  EXPECT_EQ(number(d.request("GET", procs + running).json(), "signal"), SIGKILL);
  EXPECT_EQ(listed(d, id, false), order);

  auto del = d.request("DELETE", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(del.value("state", ""), "cleaned") << del.dump();
}

INSTANTIATE_TEST_SUITE_P(DaemonRestartProcesses, EndedProcesses,
                         ::testing::Values(Down::kKill9, Down::kCleanStop), down_name);

// Processes that end while no daemon runs: their exits wait in the
// sandbox's spawn channel and the next daemon reports them as they were.
// A kill -9 between a process's exec.exit record and its stored exit
// (crash point exec.exit.audited, base/crash_point.h). The record comes
// first: the restarted daemon answers a wait from the store, so an exit
// code it answers must already be in the log (docs/audit.md: no
// acknowledged operation is lost). Here the store does not have the exit:
// the process is reported lost, with a second record saying so.
TEST(DaemonRestartProcesses, AnExitIsAuditedBeforeItIsStored) {
  ::setenv("CORRAL_TEST_CRASH_AT", "exec.exit.audited", 1);
  TestDaemon d;
  ::unsetenv("CORRAL_TEST_CRASH_AT");  // the restarted daemon runs on
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty()) << d.output();
  const std::string pid = start_background(d, id, R"({"cmd": "sleep 0.3; exit 13"})");
  ASSERT_FALSE(pid.empty());
  // It dies by its own SIGKILL as the exit is handled (after the start is
  // answered: the command sleeps first).
  bool died = false;
  for (int i = 0; i < 500 && !died; ++i) {
    died = ::kill(d.pid(), 0) != 0 || d.request("GET", "/v1/sandboxes/" + id).status == 0;
    if (!died) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(died) << "the crash point was not reached\n" << d.output();
  (void)d.kill9();  // reaps it, if the harness has not
  ASSERT_TRUE(d.restart()) << d.output();
  const json info = wait_for(d, id, pid);
  std::vector<json> exits;
  for (const auto& r : d.audit_records("exec.exit"))
    if (r.value("process", "") == pid) exits.push_back(r);
  ASSERT_FALSE(exits.empty()) << "no exec.exit record of " << pid;
  EXPECT_EQ(number(exits.front(), "exit_code"), 13) << exits.front();
  // Whatever the daemon answers, the log has it.
  if (number(info, "exit_code") != -1) {
    EXPECT_EQ(number(info, "exit_code"), 13) << info;
  } else {
    ASSERT_EQ(exits.size(), 2u) << "a lost process has its own record";
    EXPECT_TRUE(exits.back().value("lost", false)) << exits.back();
  }
  EXPECT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned");
}

TEST(DaemonRestartProcesses, ProcessThatEndsWhileTheDaemonIsDownHasItsRealExit) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  const std::string procs = "/v1/sandboxes/" + id + "/processes/";
  // Exits 7 on SIGTERM (sh runs the trap once its `sleep` returns).
  const std::string trapped = start_background(
      d, id, R"({"cmd": "trap 'exit 7' TERM; echo up; while :; do sleep 0.1; done"})");
  const std::string killed = start_background(d, id, R"({"argv": ["sleep", "300"]})");
  // Marked timed out by the first daemon, which died before the exit
  // (its SIGKILL) was reported: the mark is in the store.
  const std::string timed = start_background(d, id, R"({"argv": ["sleep", "300"]})");
  for (const auto& p : {trapped, killed, timed}) ASSERT_FALSE(p.empty());
  // `up` says the trap is set.
  for (int i = 0; i < 200 && d.request("GET", procs + trapped + "/output").body.empty(); ++i)
    std::this_thread::sleep_for(20ms);

  ASSERT_TRUE(d.kill9());
  auto t = stored_process(d.data_dir(), id, trapped);
  auto k = stored_process(d.data_dir(), id, killed);
  auto m = stored_process(d.data_dir(), id, timed);
  bool ended = false;
  if (t && k && m && t->host_pid && k->host_pid && m->host_pid) {
    // What the reaper writes before its SIGKILL (as raw SQL: the
    // daemon's own write, not a store call made for the test).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((d.data_dir() + "/state.db").c_str(), &db), SQLITE_OK);
    const std::string sql = "UPDATE processes SET timed_out = 1 WHERE id = '" + timed + "'";
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err != nullptr ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
    kill(static_cast<pid_t>(*t->host_pid), SIGTERM);
    kill(static_cast<pid_t>(*k->host_pid), SIGKILL);
    kill(static_cast<pid_t>(*m->host_pid), SIGKILL);
    ended = gone_from_host(*t->host_pid, *t->host_start_time) &&
            gone_from_host(*k->host_pid, *k->host_start_time) &&
            gone_from_host(*m->host_pid, *m->host_start_time);
  }
  const std::int64_t restarted_at = StateStore::now_ms();
  ASSERT_TRUE(d.restart()) << d.output();
  ASSERT_TRUE(ended) << "the processes were not recorded, or did not end while the daemon was down";

  for (bool tcp : kListeners) {
    SCOPED_TRACE(tcp ? "tcp" : "unix");
    auto ti = d.request("GET", procs + trapped, {}, tcp).json();
    EXPECT_EQ(ti.value("state", ""), "exited") << ti;
    EXPECT_EQ(number(ti, "exit_code"), 7) << ti;
    EXPECT_TRUE(ti["signal"].is_null()) << ti;
    EXPECT_FALSE(ti.value("timed_out", true)) << ti;
    // Learned on re-attach: the end is when this daemon heard of it.
    EXPECT_GE(ti.value("ended_at_ms", std::int64_t{0}), restarted_at) << ti;
    auto ki = d.request("GET", procs + killed, {}, tcp).json();
    EXPECT_EQ(ki.value("state", ""), "exited") << ki;
    EXPECT_TRUE(ki["exit_code"].is_null()) << ki;
    EXPECT_EQ(number(ki, "signal"), SIGKILL) << ki;
    auto mi = d.request("GET", procs + timed, {}, tcp).json();
    EXPECT_TRUE(mi.value("timed_out", false)) << mi;
    EXPECT_EQ(number(mi, "exit_code"), 124) << mi;
    EXPECT_EQ(number(mi, "signal"), SIGKILL) << mi;
    EXPECT_EQ(d.request("GET", procs + trapped + "/output", {}, tcp).body, "up\n");
  }
  const json ti = d.request("GET", procs + trapped).json();
  const json mi = d.request("GET", procs + timed).json();
  // Stored as learned: one more restart gives the same answers.
  d.stop();
  auto row = stored_process(d.data_dir(), id, trapped);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, ProcessState::kExited);
  EXPECT_EQ(row->exit_code, 7);
  ASSERT_TRUE(d.restart()) << d.output();
  EXPECT_EQ(d.request("GET", procs + trapped).json(), ti);
  EXPECT_EQ(d.request("GET", procs + timed).json(), mi);
  auto del = d.request("DELETE", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(del.value("state", ""), "cleaned") << del.dump();
}

// How a sandbox with processes ends: a DELETE, its max_lifetime, or its
// init killed while no daemon runs (the next daemon cannot re-attach it and
// destroys it on reconcile).
enum class End { kDeleted, kExpired, kDiedWhileDown };

std::string end_name(const ::testing::TestParamInfo<End>& info) {
  switch (info.param) {
    case End::kDeleted:
      return "Deleted";
    case End::kExpired:
      return "Expired";
    default:
      return "DiedWhileDown";
  }
}

// The init pid the daemon recorded for a sandbox (read while it is down).
std::int64_t stored_init_pid(const std::string& data_dir, const std::string& sandbox) {
  auto store = StateStore::open(data_dir + "/state.db");
  if (!store) return -1;
  auto rec = store->get(sandbox);
  if (!rec || !rec->runtime_json) return -1;
  return json::parse(*rec->runtime_json, nullptr, false).value("init_pid", std::int64_t{-1});
}

// The state of a sandbox, polled (bounded) until it is `want`.
bool becomes(TestDaemon& d, const std::string& id, const std::string& want) {
  for (int i = 0; i < 300; ++i) {
    if (d.request("GET", "/v1/sandboxes/" + id).json().value("state", "") == want) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

class EndedSandbox : public ::testing::TestWithParam<End> {};

// A sandbox that ended takes no more work: its processes' routes answer
// the same error before and after a restart (409, or 410 for an expired
// one), and their rows keep how they ended.
TEST_P(EndedSandbox, ItsProcessesAnswerAsBeforeTheRestart) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string id =
      d.create_sandbox(GetParam() == End::kExpired ? R"({"max_lifetime": "3s"})" : "{}");
  ASSERT_FALSE(id.empty());
  const std::string procs = "/v1/sandboxes/" + id + "/processes";
  const std::string done = start_background(d, id, R"({"cmd": "exit 5"})");
  const std::string live = start_background(d, id, R"({"argv": ["sleep", "300"]})");
  ASSERT_FALSE(done.empty());
  ASSERT_FALSE(live.empty());
  wait_for(d, id, done);
  const std::vector<std::string> routes = {procs, procs + "/" + done, procs + "/" + live,
                                           procs + "/" + done + "/output"};
  int want = 409;
  std::vector<HttpReply> before;
  if (GetParam() == End::kDeleted) {
    ASSERT_EQ(d.request("DELETE", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned");
  } else if (GetParam() == End::kExpired) {
    ASSERT_TRUE(becomes(d, id, "cleaned")) << "the sandbox did not reach its max_lifetime";
    want = 410;
  }
  for (const auto& r : routes) before.push_back(d.request("GET", r));
  ASSERT_TRUE(d.kill9());
  if (GetParam() == End::kDiedWhileDown) {
    const std::int64_t init = stored_init_pid(d.data_dir(), id);
    ASSERT_GT(init, 1);
    kill(static_cast<pid_t>(init), SIGKILL);  // its pid namespace, and every process, go too
  }
  ASSERT_TRUE(d.restart()) << d.output();
  if (GetParam() == End::kDiedWhileDown) {
    EXPECT_TRUE(d.wait_output("1 destroyed")) << d.output();
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned");
  }
  for (bool tcp : kListeners) {
    for (std::size_t i = 0; i < routes.size(); ++i) {
      auto after = d.request("GET", routes[i], {}, tcp);
      EXPECT_EQ(after.status, want) << routes[i] << ": " << after.body;
      if (GetParam() != End::kDiedWhileDown) {
        EXPECT_EQ(before[i].status, want) << routes[i] << ": " << before[i].body;
        EXPECT_EQ(after.json(), before[i].json()) << routes[i];
      }
    }
  }
  d.stop();
  auto rd = stored_process(d.data_dir(), id, done);
  auto rl = stored_process(d.data_dir(), id, live);
  ASSERT_TRUE(rd && rl);
  EXPECT_EQ(rd->state, ProcessState::kExited);
  EXPECT_EQ(rd->exit_code, 5);
  if (GetParam() == End::kDiedWhileDown) {
    // Its end was never reported: lost, never a made-up exit.
    EXPECT_EQ(rl->state, ProcessState::kLost);
  } else {
    EXPECT_EQ(rl->state, ProcessState::kExited);
    EXPECT_EQ(rl->signal, SIGKILL);
  }
}

INSTANTIATE_TEST_SUITE_P(DaemonRestartProcesses, EndedSandbox,
                         ::testing::Values(End::kDeleted, End::kExpired, End::kDiedWhileDown),
                         end_name);

}  // namespace
}  // namespace corral::testing
