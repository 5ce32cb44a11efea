// The create's stage timeout (issue 3, serve.setup_timeout): a sandbox
// factory that never answers is a real hang here (SIGSTOP), not a mock.
// The create fails in time with its own error, nothing of the half-made
// sandbox stays, live sandboxes keep working, later creates say what to do,
// and a restarted daemon creates again and re-attaches.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "jail/cgroup.h"
#include "support/daemon_harness.h"
#include "support/proc_files.h"
#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

using nlohmann::json;

// The child of `parent` whose name (comm) is `name`, or -1.
pid_t child_named(pid_t parent, const std::string& name) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const ProcStat stat = proc_stat(std::stoi(pid));
    if (proc_parent(std::stoi(pid)) == parent && stat.comm == name) return std::stoi(pid);
  }
  return -1;
}

TEST(DaemonSetupTimeout, AHungFactoryFailsTheCreateInTimeAndLeavesNothing) {
  if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("the daemon runs as root");
  // Short enough to test, long enough for a healthy create under ASan on a
  // loaded 2-CPU machine (1 s was not: the first create timed out there).
  TestDaemon d({}, "serve:\n  setup_timeout: 3s\n");
  ASSERT_TRUE(d.ready()) << d.output();
  const std::string alive = d.create_sandbox();
  ASSERT_FALSE(alive.empty());
  const pid_t factory = child_named(d.pid(), "corral-factory");
  ASSERT_GT(factory, 0) << "no corral-factory under the daemon";
  ASSERT_EQ(kill(factory, SIGSTOP), 0);

  const auto t0 = std::chrono::steady_clock::now();
  HttpReply hung;
  EXPECT_EQ(d.create_sandbox("{}", &hung), "");
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(hung.status, 500) << hung.body;
  EXPECT_EQ(hung.json()["error"].value("code", ""), "setup_failed") << hung.body;
  EXPECT_NE(hung.body.find("did not answer within 3000 ms"), std::string::npos) << hung.body;
  EXPECT_LT(took, std::chrono::seconds(10));
  EXPECT_NE(kill(factory, 0), 0) << "the hung factory was not stopped";

  // Later creates say what to do; the live sandbox keeps working.
  HttpReply later;
  EXPECT_EQ(d.create_sandbox("{}", &later), "");
  EXPECT_EQ(later.status, 503) << later.body;
  EXPECT_NE(later.body.find("restart the daemon"), std::string::npos) << later.body;
  EXPECT_EQ(d.exec(alive, "echo still here").value("stdout", ""), "still here\n");

  // The failed sandboxes are recorded, and nothing of them is on the host.
  json all = d.request("GET", "/v1/sandboxes?all=true").json();
  auto cgroups = CgroupManager::detect();
  ASSERT_TRUE(cgroups.has_value());
  int failed = 0;
  for (const json& s : all["sandboxes"]) {
    const std::string id = s.value("id", "");
    if (id == alive) continue;
    ++failed;
    EXPECT_EQ(s.value("state", ""), "cleaned") << s.dump();
    EXPECT_FALSE((*cgroups)->open(id).has_value()) << "the cgroup of " << id << " is left";
    EXPECT_FALSE(std::filesystem::exists("/run/corral/sandboxes/" + id + ".lock")) << id;
  }
  EXPECT_EQ(failed, 2);  // the hung create and the refused one, both recorded

  // A restarted daemon creates again and still has the live sandbox.
  ASSERT_TRUE(d.kill9());
  ASSERT_TRUE(d.restart()) << d.output();
  const std::string fresh = d.create_sandbox();
  EXPECT_FALSE(fresh.empty());
  EXPECT_EQ(d.exec(alive, "echo again").value("stdout", ""), "again\n");
}

}  // namespace
}  // namespace corral::testing
