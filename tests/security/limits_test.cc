// Denial of service from inside is stopped by the sandbox's own limits,
// never by the host running out: processes (pids cgroup), disk and inodes
// of the writable layer (F2: ENOSPC/EDQUOT inside), memory (OOM kill,
// exit 137). The probe's loops are bounded so a broken sandbox cannot
// take the host down either.
#include <gtest/gtest.h>

#include "security/probe_session.h"

namespace corral::testing {
namespace {

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_root()) CORRAL_SKIP_OR_FAIL("security tests run as root");
  }
};

// A fork bomb hits the pids limit (EAGAIN) well before its own bound.
TEST_F(LimitsTest, ForkBombStopsAtPidsLimit) {
  ProbeRun run = run_probe({"--pids", "32", "--timeout", "60s"}, {"fork-bomb", "2000"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json fb = run.first("fork-bomb");
  ASSERT_TRUE(fb.is_object()) << run.describe();
  EXPECT_LT(fb.value("forked", 100000), 32) << fb.dump();
  EXPECT_EQ(fb.value("errno", json()), "EAGAIN") << fb.dump();
  // T1: the report says which limit stopped it.
  EXPECT_EQ(run.outcome.report.value("limit_hit", json()), "pids") << run.describe();
  EXPECT_GE(run.outcome.report.value("pids_max_hits", 0), 1) << run.describe();
}

// N7: the task timeout ends everything: exit 124, and no process of the
// sandbox is left on the host, not even one that daemonized (double fork,
// new session) before the main process went to sleep.
TEST_F(LimitsTest, TimeoutKillsEverythingIncludingDaemons) {
  std::string token = unique_token("timeout");
  ProbeRun run = run_probe({"--timeout", "2s"},
                           {"daemon", "60", token, "+", "sleep", "60", "/tmp/" + token});
  EXPECT_EQ(run.outcome.exit_code, 124) << run.describe();
  EXPECT_TRUE(run.first("daemon").value("ok", false)) << run.describe();
  if (run.outcome.report.is_object()) {
    EXPECT_EQ(run.outcome.report.value("timed_out", false), true) << run.describe();
  }
  std::vector<pid_t> left = find_host_processes(token);
  EXPECT_TRUE(left.empty()) << left.size() << " sandbox process(es) survived the timeout";
  for (pid_t pid : left) kill(pid, SIGKILL);  // ours (started by this test), by id
}

// When the workload exits normally, a daemon it left behind dies with the
// sandbox too.
TEST_F(LimitsTest, DaemonDiesWithTheSandbox) {
  std::string token = unique_token("daemon");
  ProbeRun run = run_probe({}, {"daemon", "60", token});
  EXPECT_EQ(run.outcome.exit_code, 0) << run.describe();
  EXPECT_TRUE(run.first("daemon").value("ok", false)) << run.describe();
  std::vector<pid_t> left;
  for (int i = 0; i < 50; ++i) {
    left = find_host_processes(token);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(left.empty()) << "a daemonized process outlived its sandbox";
  for (pid_t pid : left) kill(pid, SIGKILL);
}

// F2: the writable layer is full at --disk: ENOSPC (or EDQUOT) inside, in
// every writable place together (/workspace, /tmp, /dev/shm, /var/tmp,
// $HOME): one budget, not one per directory.
TEST_F(LimitsTest, DiskLimitGivesEnospcInside) {
  const long long disk = 16LL << 20;
  const std::vector<std::string> places = {"/workspace/big", "/tmp/big", "/dev/shm/big",
                                           "/var/tmp/big", "/home/sandbox/big"};
  std::vector<std::string> args;
  for (const auto& p : places) {
    if (!args.empty()) args.push_back("+");
    args.insert(args.end(), {"mkfile", p, std::to_string(4 * disk)});
  }
  ProbeRun run = run_probe({"--disk", "16Mi", "--timeout", "60s"}, args);
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> files = run.all("mkfile");
  ASSERT_EQ(files.size(), places.size()) << run.describe();
  long long total = 0;
  for (const json& f : files) {
    json e = f.value("errno", json());
    EXPECT_TRUE(e == "ENOSPC" || e == "EDQUOT") << f.dump();
    total += f.value("written", 0LL);
  }
  // Both files share the one layer (plus a little slack for metadata).
  EXPECT_LE(total, disk + (1 << 20)) << run.describe();
}

// F2: the inode limit holds too.
TEST_F(LimitsTest, InodeLimitGivesEnospcInside) {
  ProbeRun run = run_probe({"--inodes", "200", "--timeout", "60s"},
                           {"mkinodes", "/workspace/many", "5000"});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  json m = run.first("mkinodes");
  EXPECT_LT(m.value("created", 5000), 200) << m.dump();
  json e = m.value("errno", json());
  EXPECT_TRUE(e == "ENOSPC" || e == "EDQUOT") << m.dump();
}

// Memory beyond --memory ends in an OOM kill reported as such (exit 137).
TEST_F(LimitsTest, MemoryLimitKills) {
  ProbeRun run = run_probe({"--memory", "64Mi", "--timeout", "60s"}, {"alloc", "512"});
  EXPECT_EQ(run.outcome.exit_code, 137) << run.describe();
  // Killed before the end: no final "alloc" line, or one that failed.
  json a = run.first("alloc");
  if (a.is_object()) {
    EXPECT_FALSE(a.value("ok", false)) << "allocated 512 MiB under a 64 MiB limit: " << a.dump();
  }
  if (run.outcome.report.is_object()) {
    EXPECT_EQ(run.outcome.report.value("oom_killed", false), true) << run.describe();
  }
}

}  // namespace
}  // namespace corral::testing
