// Stale-cgroup reaping (after a kill -9 of a launcher) must never touch a
// live sandbox, even one started with another CORRAL_RUN_DIR (F3, C2).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <string>

#include "support/sandbox_harness.h"

namespace corral::testing {
namespace {

TEST(run_stale, LiveSandboxOfAnotherRunDirIsNotReaped) {
  std::string other_run_dir = make_temp_dir("rundir");
  setenv("CORRAL_RUN_DIR", other_run_dir.c_str(), 1);
  CorralProcess other({"run", "--", "sh", "-c", "echo started; sleep 3; echo finished"});
  unsetenv("CORRAL_RUN_DIR");
  ASSERT_TRUE(other.started());
  ASSERT_TRUE(other.wait_for_stdout("started", std::chrono::seconds(30)));

  // A launcher with the default run dir scans for stale cgroups now.
  RunOutcome r = run_sandbox({}, {"true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  RunOutcome o = other.wait(std::chrono::seconds(60));
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("finished"), std::string::npos) << "the live sandbox was killed: " << o.err;
  host_sh("rm -rf '" + other_run_dir + "'");
}

TEST(run_stale, CgroupOfAKilledLauncherIsReapedByTheNextRun) {
  CorralProcess victim({"run", "--", "sh", "-c", "echo started; sleep 60"});
  ASSERT_TRUE(victim.started());
  ASSERT_TRUE(victim.wait_for_stdout("started", std::chrono::seconds(30)));
  // The victim's sandbox id: the cgroup of its init (its only child).
  std::string id = host_sh("init=$(cat /proc/" + std::to_string(victim.pid()) +
                           "/task/*/children | tr -d ' '); "
                           "sed -n 's#^.*:pids:/corral/\\(sb-[0-9a-f]*\\).*$#\\1#p; "
                           "s#^0::/corral/\\(sb-[0-9a-f]*\\).*$#\\1#p' /proc/$init/cgroup | head -1");
  while (!id.empty() && id.back() == '\n') id.pop_back();
  ASSERT_EQ(id.rfind("sb-", 0), 0u) << "could not find the victim's sandbox id: '" << id << "'";
  ASSERT_TRUE(victim.send_signal(SIGKILL));
  (void)victim.wait(std::chrono::seconds(30));

  // Its processes died with it (init has PDEATHSIG); its cgroup and lock
  // file stay until the next launcher's stale scan.
  RunOutcome r = run_sandbox({}, {"true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  for (const std::string& dir : {"/sys/fs/cgroup/memory/corral/" + id,
                                "/sys/fs/cgroup/pids/corral/" + id, "/sys/fs/cgroup/corral/" + id,
                                "/run/corral/sandboxes/" + id + ".lock"}) {
    EXPECT_NE(stat(dir.c_str(), &st), 0) << dir << " survived the stale scan";
  }
}

}  // namespace
}  // namespace corral::testing
