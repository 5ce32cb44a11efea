// kill -9 of the daemon (issue 3, ADR 0003/0004): nothing acknowledged is
// lost, live sandboxes are re-attached and keep working, and a loop of
// crashes during creates, execs and destroys leaks no cgroup, process,
// lock file or mount, and leaves a consistent store.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "jail/cgroup.h"
#include "store/state_store.h"
#include "support/daemon_harness.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::set<std::string> corral_cgroups() {
  std::set<std::string> out;
  auto manager = CgroupManager::detect();
  if (!manager) return out;
  auto names = (*manager)->list();
  if (names) out.insert(names->begin(), names->end());
  return out;
}

int host_mount_lines_with(const std::string& needle) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(DaemonCrash, ReattachedSandboxKeepsWorking) {
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.startup_output();
  std::string id = d.create_sandbox();
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(d.exec(id, "echo 41 > /workspace/n; cat /workspace/n").value("stdout", ""), "41\n");
  auto bg = d.request("POST", "/v1/sandboxes/" + id + "/processes",
                      R"({"cmd": "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done"})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  std::string pid = bg.json().value("id", "");

  ASSERT_TRUE(d.kill9());
  std::this_thread::sleep_for(300ms);  // the sandbox lives on without a daemon
  ASSERT_TRUE(d.restart()) << d.startup_output();
  EXPECT_NE(d.startup_output().find("1 re-attached"), std::string::npos) << d.startup_output();

  auto info = d.request("GET", "/v1/sandboxes/" + id).json();
  EXPECT_TRUE(info.value("state", "") == "ready" || info.value("state", "") == "running") << info.dump();
  // Same sandbox, same files.
  EXPECT_EQ(d.exec(id, "cat /workspace/n").value("stdout", ""), "41\n");
  // The background process kept running and its exit still arrives.
  auto waited = d.request("POST", "/v1/sandboxes/" + id + "/processes/" + pid + "/wait?timeout=20");
  EXPECT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(waited.json().value("exit_code", -1), 0) << waited.body;
  auto out = d.request("GET", "/v1/sandboxes/" + id + "/processes/" + pid + "/output");
  EXPECT_NE(out.body.find("tick 6"), std::string::npos) << out.body;
  auto del = d.request("DELETE", "/v1/sandboxes/" + id).json();
  EXPECT_EQ(del.value("state", ""), "cleaned") << del.dump();
  EXPECT_TRUE(del["residue"].empty()) << del.dump();
}

TEST(DaemonCrash, Kill9LoopDuringCreatesExecsAndDestroysLeaksNothing) {
  const std::set<std::string> cgroups_before = corral_cgroups();
  TestDaemon d;
  ASSERT_TRUE(d.ready()) << d.startup_output();
  std::mt19937 rng(1234);
  std::atomic<int> worked{0};  // sandboxes that were created and ran a command
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    for (int w = 0; w < 3; ++w) {
      workers.emplace_back([&, w] {
        while (!stop) {
          std::string id = d.create_sandbox(R"({"limits": {"memory": "64Mi", "disk": "8Mi"}})");
          if (id.empty()) continue;
          if (d.exec(id, "echo work").value("stdout", "") == "work\n") ++worked;
          if (w != 0) d.request("DELETE", "/v1/sandboxes/" + id);  // worker 0 keeps some alive
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
    ASSERT_TRUE(d.kill9());
    stop = true;
    for (auto& t : workers) t.join();  // their requests fail fast: the socket is gone
    ASSERT_TRUE(d.restart()) << "round " << round << ": " << d.startup_output();
    // After reconcile, every sandbox is either live and usable, or cleaned.
    auto list = d.request("GET", "/v1/sandboxes?all=true").json();
    ASSERT_TRUE(list.contains("sandboxes")) << list.dump();
    for (const auto& s : list["sandboxes"]) {
      const std::string state = s.value("state", "");
      const std::string id = s.value("id", "");
      ASSERT_TRUE(state == "ready" || state == "running" || state == "cleaned")
          << "round " << round << ": " << id << " is " << state << ": " << s.dump();
      if (state == "ready") {
        auto r = d.exec(id, "echo still here");
        EXPECT_EQ(r.value("stdout", ""), "still here\n") << "round " << round << " " << id << r.dump();
      }
    }
  }
  // Destroy what is left, then count what the host still holds.
  auto list = d.request("GET", "/v1/sandboxes?all=true").json();
  std::vector<std::string> ids;
  for (const auto& s : list["sandboxes"]) {
    ids.push_back(s.value("id", ""));
    if (s.value("state", "") != "cleaned") d.request("DELETE", "/v1/sandboxes/" + ids.back());
  }
  EXPECT_GT(worked.load(), 20) << "the loop did too little work to mean anything";
  for (const auto& id : ids) {
    EXPECT_EQ(d.request("GET", "/v1/sandboxes/" + id).json().value("state", ""), "cleaned") << id;
    json report{{"sandbox_id", id}, {"residue_bytes", 0}, {"residue", json::array()}};
    expect_sandbox_cleaned_up(report, id);
  }
  const std::string data = d.data_dir();
  d.stop();
  std::set<std::string> after = corral_cgroups();
  for (const auto& name : after) {
    if (cgroups_before.count(name) == 0) {
      // Other tests run at the same time; only ours matter.
      EXPECT_EQ(std::find(ids.begin(), ids.end(), name), ids.end()) << "leaked cgroup " << name;
    }
  }
  // No mount of ours on the host: none names the data dir or a sandbox (other
  // tests run at the same time, so "corral" alone would be too broad).
  EXPECT_EQ(host_mount_lines_with(data), 0);
  for (const auto& id : ids) EXPECT_EQ(host_mount_lines_with(id), 0) << id;
  // Inits, zygotes and the factory carry the daemon's command line (they
  // are forks of it, never exec'd): none may outlive the sandboxes.
  for (const auto& p : host_processes_matching(data)) ADD_FAILURE() << "left running: " << p;
  auto store = StateStore::open(data + "/state.db");
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(*store->integrity_check(), "ok");
}

}  // namespace
}  // namespace corral::testing
