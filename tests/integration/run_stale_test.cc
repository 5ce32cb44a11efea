// Stale-cgroup reaping (after a kill -9 of a launcher) must never touch a
// live sandbox, even one started with another CORRAL_RUN_DIR (F3, C2).
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/unique_fd.h"
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

// A lock file whose cgroup is gone (a launcher of another run dir reaped
// the dead sandbox's empty cgroup, and cannot see this lock) is removed by
// the next scan when it is free; a held one is a live launcher's and stays.
TEST(run_stale, AFreeLockWithoutItsCgroupIsRemovedAHeldOneStays) {
  const std::string dir = "/run/corral/sandboxes";
  RunOutcome warm = run_sandbox({}, {"true"});  // makes the dir
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  const std::string free_lock = dir + "/sb-0rphan" + std::to_string(getpid()) + "a.lock";
  const std::string held_lock = dir + "/sb-0rphan" + std::to_string(getpid()) + "b.lock";
  UniqueFd f(open(free_lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  UniqueFd h(open(held_lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  ASSERT_TRUE(f && h);
  ASSERT_EQ(flock(h.get(), LOCK_EX), 0);
  f.reset();
  RunOutcome r = run_sandbox({}, {"true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  EXPECT_NE(stat(free_lock.c_str(), &st), 0) << free_lock << " survived the stale scan";
  EXPECT_EQ(stat(held_lock.c_str(), &st), 0) << "a held lock was removed";
  unlink(held_lock.c_str());
}

}  // namespace
}  // namespace corral::testing
