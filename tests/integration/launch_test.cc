// The launcher sequence (src/jail/launch.h), in process, as root: a launch
// is undone completely (init reaped, cgroup and lock file gone), and a step
// that fails undoes only what the launch made itself, never a lock file or
// cgroup that was there before.
#include "jail/launch.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "base/paths.h"
#include "base/unique_fd.h"
#include "jail/cgroup.h"
#include "jail/fs_util.h"
#include "jail/sandbox_planner.h"
#include "support/skip.h"

namespace corral::testing {
namespace {

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::string lock_path_of(const std::string& id) { return run_dir() + "/sandboxes/" + id + ".lock"; }

class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) CORRAL_SKIP_OR_FAIL("launching a sandbox needs root");
    auto manager = CgroupManager::detect();
    if (!manager) CORRAL_SKIP_OR_FAIL("no usable cgroup hierarchy: " + manager.error().message);
    cgroups_ = std::move(*manager);
    spec_.argv = {"true"};
    Stage failed_stage = Stage::kPlan;
    auto prepared = prepare_sandbox(spec_, RunOptions{}, failed_stage);
    ASSERT_TRUE(prepared.has_value()) << prepared.error().message;
    prepared_ = std::move(*prepared);
    options_.cgroups = cgroups_.get();
  }

  SandboxSpec spec_;
  std::unique_ptr<CgroupManager> cgroups_;
  std::unique_ptr<PreparedSandbox> prepared_;
  LaunchOptions options_;
};

TEST_F(Launch, ALaunchedInitIsUndoneCompletely) {
  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_TRUE(launched.has_value()) << launched.error().error.message;
  LaunchedInit& init = *launched;
  const std::string id = prepared_->id;
  const pid_t pid = init.pid;
  EXPECT_GT(pid, 0);
  EXPECT_EQ(init.lock_path, lock_path_of(id));
  EXPECT_TRUE(exists(init.lock_path));
  EXPECT_TRUE(cgroups_->open(id).has_value()) << "no cgroup " << id;
  EXPECT_TRUE(prepared_->bind_fds.empty()) << "the launcher kept its copies of the mount sources";

  EXPECT_TRUE(undo_launch(init).empty());
  EXPECT_NE(kill(pid, 0), 0) << "init " << pid << " is still there (or was not reaped)";
  EXPECT_FALSE(exists(lock_path_of(id)));
  EXPECT_FALSE(cgroups_->open(id).has_value()) << "cgroup " << id << " is left";
  EXPECT_TRUE(undo_launch(init).empty()) << "a second undo finds nothing to do";
}

TEST_F(Launch, ALockFileThatWasThereStopsTheLaunchAndStays) {
  const std::string id = prepared_->id;
  const std::string lock = lock_path_of(id);
  ASSERT_TRUE(mkdir_p(run_dir() + "/sandboxes", 0700).has_value());
  UniqueFd theirs(open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  ASSERT_TRUE(theirs) << lock;

  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_FALSE(launched.has_value());
  EXPECT_EQ(launched.error().step, LaunchStep::kAliveLock);
  EXPECT_EQ(launched.error().stage, Stage::kPlan);
  EXPECT_EQ(launched.error().error.sys_errno, EEXIST);
  EXPECT_EQ(launched.error().error.message.rfind("creating " + lock + ": ", 0), 0u)
      << launched.error().error.message;
  EXPECT_TRUE(launched.error().residue.empty());
  EXPECT_TRUE(exists(lock)) << "the launch removed a lock file it had not made";
  EXPECT_FALSE(cgroups_->open(id).has_value()) << "a cgroup was made after the lock failed";
  unlink(lock.c_str());
}

TEST_F(Launch, ACgroupThatWasThereStopsTheLaunchAndOnlyTheLockGoes) {
  const std::string id = prepared_->id;
  auto theirs = cgroups_->create(id, CgroupLimits{});
  ASSERT_TRUE(theirs.has_value()) << theirs.error().message;

  auto launched = launch_init(spec_, *prepared_, options_);
  ASSERT_FALSE(launched.has_value());
  EXPECT_EQ(launched.error().step, LaunchStep::kCgroup);
  EXPECT_EQ(launched.error().stage, Stage::kCgroup);
  EXPECT_TRUE(launched.error().residue.empty());
  EXPECT_FALSE(exists(lock_path_of(id))) << "the failed launch left its lock file";
  EXPECT_TRUE(cgroups_->open(id).has_value()) << "the launch removed a cgroup it had not made";
  EXPECT_TRUE((*theirs)->destroy().has_value());
}

}  // namespace
}  // namespace corral::testing
