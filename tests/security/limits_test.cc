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
  std::cout << "report: " << run.outcome.report.dump() << "\n";
}

// F2: the writable layer is full at --disk: ENOSPC (or EDQUOT) inside, in
// /workspace and in /tmp.
TEST_F(LimitsTest, DiskLimitGivesEnospcInside) {
  const long long disk = 16LL << 20;
  ProbeRun run = run_probe({"--disk", "16Mi", "--timeout", "60s"},
                           {"mkfile", "/workspace/big", std::to_string(4 * disk), "+", "mkfile",
                            "/tmp/big", std::to_string(4 * disk)});
  ASSERT_EQ(run.outcome.exit_code, 0) << run.describe();
  std::vector<json> files = run.all("mkfile");
  ASSERT_EQ(files.size(), 2u) << run.describe();
  long long total = 0;
  for (const json& f : files) {
    std::string e = f.value("errno", std::string());
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
  std::string e = m.value("errno", std::string());
  EXPECT_TRUE(e == "ENOSPC" || e == "EDQUOT") << m.dump();
}

// Memory beyond --memory ends in an OOM kill reported as such (exit 137).
TEST_F(LimitsTest, MemoryLimitKills) {
  ProbeRun run = run_probe({"--memory", "64Mi", "--timeout", "60s"}, {"alloc", "512"});
  EXPECT_EQ(run.outcome.exit_code, 137) << run.describe();
  json a = run.first("alloc");
  EXPECT_FALSE(a.value("ok", false)) << "allocated 512 MiB under a 64 MiB limit: " << a.dump();
  if (run.outcome.report.is_object()) {
    EXPECT_EQ(run.outcome.report.value("oom_killed", false), true) << run.describe();
  }
}

}  // namespace
}  // namespace corral::testing
